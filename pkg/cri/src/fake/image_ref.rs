//! Image references as containerd normalizes them (`busybox` ▶ `docker.io/library/busybox:latest`)
//! and the stable fake digests the fake runtime gives its images.

/// The fully qualified form of an image reference: registry domain, `library/` for Docker Hub
/// official images, and `:latest` when neither a tag nor a digest is given.
pub fn normalize(reference: &str) -> String {
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    let (repo, tag) = split_tag(name);
    let mut full = match repo.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => repo.to_string(),
        Some(_) => format!("docker.io/{repo}"),
        None => format!("docker.io/library/{repo}"),
    };
    if let Some(tag) = tag {
        full.push(':');
        full.push_str(tag);
    } else if digest.is_none() {
        full.push_str(":latest");
    }
    if let Some(digest) = digest {
        full.push('@');
        full.push_str(digest);
    }
    full
}

/// The repository of a normalized reference: without tag and digest.
pub fn repository(normalized: &str) -> &str {
    let name = normalized.split_once('@').map_or(normalized, |(name, _)| name);
    split_tag(name).0
}

/// Splits `repo:tag`; a colon before the last `/` belongs to a registry port, not a tag.
fn split_tag(name: &str) -> (&str, Option<&str>) {
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    }
}

/// A `sha256:<64 hex>` digest that is a pure function of `seed`.
pub fn fake_digest(seed: &str) -> String {
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for round in 0u64..4 {
        hex.push_str(&format!("{:016x}", fnv1a(seed, round)));
    }
    hex
}

fn fnv1a(text: &str, salt: u64) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_become_docker_hub_library_latest() {
        assert_eq!(normalize("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("nginx:1.27"), "docker.io/library/nginx:1.27");
        assert_eq!(normalize("bitnami/redis"), "docker.io/bitnami/redis:latest");
    }

    #[test]
    fn registry_with_port_is_not_mistaken_for_a_tag() {
        assert_eq!(normalize("127.0.0.1:5000/busybox"), "127.0.0.1:5000/busybox:latest");
        assert_eq!(normalize("127.0.0.1:5000/busybox:1.35"), "127.0.0.1:5000/busybox:1.35");
        assert_eq!(normalize("localhost/pause"), "localhost/pause:latest");
        assert_eq!(repository("127.0.0.1:5000/busybox:1.35"), "127.0.0.1:5000/busybox");
    }

    #[test]
    fn digest_references_get_no_latest_tag() {
        let digest = fake_digest("x");
        assert_eq!(normalize(&format!("busybox@{digest}")), format!("docker.io/library/busybox@{digest}"));
        assert_eq!(repository(&format!("docker.io/library/busybox@{digest}")), "docker.io/library/busybox");
    }

    #[test]
    fn fake_digests_are_stable_and_distinct() {
        let a = fake_digest("docker.io/library/busybox:latest");
        assert_eq!(a, fake_digest("docker.io/library/busybox:latest"));
        assert_ne!(a, fake_digest("docker.io/library/busybox:1.35"));
        assert_eq!(a.len(), "sha256:".len() + 64);
    }
}
