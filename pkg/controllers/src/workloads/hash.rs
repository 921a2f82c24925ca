//! Template and revision hashes, computed the way upstream computes them, over the JSON form
//! of the typed object (upstream hashes Go's `spew` dump of the struct, which has no Rust
//! equivalent; JSON of the typed value is just as deterministic):
//!
//! - `pod-template-hash` (Deployment ▶ ReplicaSet names, DaemonSet revisions):
//!   `controller.ComputeHash`: FNV-32a over the template, then the collision count as 8
//!   little-endian bytes, rendered with the safe-encode alphabet.
//! - ControllerRevision hashes (StatefulSet): `history.HashControllerRevision`: FNV-32 (not 1a)
//!   over the revision data, then the collision count in decimal.

use k8s_openapi::api::core::v1::PodTemplateSpec;

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// FNV-1a, 32 bits.
pub fn fnv32a(chunks: &[&[u8]]) -> u32 {
    let mut h = FNV32_OFFSET;
    for b in chunks.iter().flat_map(|c| c.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(FNV32_PRIME);
    }
    h
}

/// FNV-1, 32 bits.
pub fn fnv32(chunks: &[&[u8]]) -> u32 {
    let mut h = FNV32_OFFSET;
    for b in chunks.iter().flat_map(|c| c.iter()) {
        h = h.wrapping_mul(FNV32_PRIME);
        h ^= u32::from(*b);
    }
    h
}

/// `rand.SafeEncodeString`: each byte mapped into an alphabet without vowels or look-alikes,
/// so generated names never spell words.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes().map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()])).collect()
}

/// The `pod-template-hash` of a pod template with the owner's `status.collisionCount`.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut collision = [0u8; 8];
    let sum = match collision_count {
        Some(c) => {
            collision[..4].copy_from_slice(&c.to_le_bytes());
            fnv32a(&[&json, &collision])
        }
        None => fnv32a(&[&json]),
    };
    safe_encode(&sum.to_string())
}

/// The hash of a ControllerRevision's data with the owner's `status.collisionCount`.
pub fn controller_revision_hash(data: &[u8], collision_count: Option<i32>) -> String {
    let sum = match collision_count {
        Some(c) => fnv32(&[data, c.to_string().as_bytes()]),
        None => fnv32(&[data]),
    };
    safe_encode(&sum.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container { name: "c".into(), image: Some(image.into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn fnv_matches_reference_vectors() {
        // Reference values of Go's hash/fnv for "a" and "foobar".
        assert_eq!(fnv32a(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv32a(&[b"foobar"]), 0xbf9c_f968);
        assert_eq!(fnv32(&[b"a"]), 0x050c_5d7e);
        assert_eq!(fnv32(&[b"foobar"]), 0x31f0_b262);
        assert_eq!(fnv32a(&[b"foo", b"bar"]), fnv32a(&[b"foobar"]));
    }

    #[test]
    fn safe_encode_uses_the_upstream_alphabet() {
        // "0" is byte 48; 48 % 27 = 21 ▶ '4'; '6' is 54 % 27 = 0 ▶ 'b'.
        assert_eq!(safe_encode("0"), "4");
        assert_eq!(safe_encode("1234567890"), "56789bcdf4");
    }

    #[test]
    fn pod_template_hash_is_stable_and_sensitive_to_template_and_collisions() {
        let a = pod_template_hash(&template("nginx:1"), None);
        assert_eq!(a, pod_template_hash(&template("nginx:1"), None));
        assert_ne!(a, pod_template_hash(&template("nginx:2"), None));
        assert_ne!(a, pod_template_hash(&template("nginx:1"), Some(1)));
        assert!(a.len() <= 10 && a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn controller_revision_hash_depends_on_collision_count() {
        let data = br#"{"spec":{"template":{"$patch":"replace"}}}"#;
        assert_eq!(controller_revision_hash(data, None), controller_revision_hash(data, None));
        assert_ne!(controller_revision_hash(data, None), controller_revision_hash(data, Some(1)));
    }
}
