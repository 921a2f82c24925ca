//! `k1s images save`: pulls images from their registries with `oci-client` and writes them as
//! one OCI image layout tar that the images folder and `k1s images import` (or
//! `ctr images import`, `skopeo copy oci-archive:`) take.
//!
//! Registries are reached as containerd would reach them under `registries.yaml`: mirrors
//! first, then the registry itself, each with its `configs` credentials (basic auth) and TLS
//! settings; loopback registries without a scheme are plain HTTP. For a multi-platform image
//! only this node's platform (linux/<arch>) is saved. `index.json` names every image with
//! `io.containerd.image.name` (the full name) and `org.opencontainers.image.ref.name` (its tag),
//! as `ctr images export` does. Every blob's digest is checked as it arrives.

use crate::image_archive::{CONTAINERD_IMAGE_NAME, OCI_REF_NAME};
use crate::registries::{PullEndpoint, Registries};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const ACCEPTED: &[&str] = &[OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST];

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("{image:?} is not a valid image reference: {message}")]
    Reference { image: String, message: String },
    #[error("pulling {image} failed from every endpoint: {attempts}")]
    Pull { image: String, attempts: String },
    #[error("{image} has no manifest for {platform}")]
    NoPlatform { image: String, platform: String },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveSummary {
    /// Full image names, in the order given.
    pub images: Vec<String>,
    /// Distinct blobs in the archive (manifests, configs, layers).
    pub blobs: usize,
    /// Size of the archive file.
    pub bytes: u64,
}

/// One manifest to put into `index.json`.
struct Saved {
    name: String,
    tag: Option<String>,
    media_type: String,
    digest: String,
    size: usize,
}

/// Go's name for this machine's architecture, as image platforms use it.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

fn blob_name(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// The archive being written: a tar with each blob once.
struct ArchiveWriter {
    tar: tar::Builder<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
    written: BTreeSet<String>,
}

impl ArchiveWriter {
    fn err(&self) -> impl Fn(std::io::Error) -> SaveError + '_ {
        |source| SaveError::Write { path: self.path.clone(), source }
    }

    fn append(&mut self, name: &str, data: &[u8]) -> Result<(), SaveError> {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        let path = self.path.clone();
        self.tar.append_data(&mut h, name, data).map_err(|source| SaveError::Write { path, source })
    }

    fn append_blob(&mut self, digest: &str, data: &[u8]) -> Result<(), SaveError> {
        if self.written.insert(digest.to_string()) {
            self.append(&blob_name(digest), data)?;
        }
        Ok(())
    }

    fn append_file(&mut self, digest: &str, file: &Path) -> Result<(), SaveError> {
        if !self.written.insert(digest.to_string()) {
            return Ok(());
        }
        let mut f = std::fs::File::open(file).map_err(self.err())?;
        self.tar.append_file(blob_name(digest), &mut f).map_err(|source| SaveError::Write { path: file.into(), source })
    }
}

fn registry_auth(endpoint: &PullEndpoint) -> RegistryAuth {
    use base64::Engine as _;
    let Some(auth) = &endpoint.auth else { return RegistryAuth::Anonymous };
    if let (Some(u), Some(p)) = (&auth.username, &auth.password) {
        return RegistryAuth::Basic(u.clone(), p.clone());
    }
    if let Some(encoded) = &auth.auth {
        if let Some((u, p)) = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|raw| String::from_utf8(raw).ok())
            .and_then(|s| s.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())))
        {
            return RegistryAuth::Basic(u, p);
        }
    }
    tracing::warn!(registry = %endpoint.host, "registries.yaml credentials other than username/password or auth are not used by k1s images save");
    RegistryAuth::Anonymous
}

fn client_for(endpoint: &PullEndpoint) -> Client {
    let mut config = ClientConfig {
        protocol: if endpoint.plain_http {
            ClientProtocol::HttpsExcept(vec![endpoint.host.clone()])
        } else {
            ClientProtocol::Https
        },
        ..ClientConfig::default()
    };
    if let Some(tls) = &endpoint.tls {
        config.accept_invalid_certificates = tls.insecure_skip_verify;
        if let Some(ca) = tls.ca_file.as_deref().and_then(|f| std::fs::read(f).ok()) {
            config.extra_root_certificates.push(Certificate { encoding: CertificateEncoding::Pem, data: ca });
        }
    }
    Client::new(config)
}

/// A manifest's media type: its own `mediaType`, else by its shape.
fn media_type_of(doc: &serde_json::Value) -> String {
    match doc.get("mediaType").and_then(|m| m.as_str()) {
        Some(m) => m.to_string(),
        None if doc.get("manifests").is_some() => OCI_INDEX.to_string(),
        None => OCI_MANIFEST.to_string(),
    }
}

/// Pulls one image from one endpoint into the archive.
async fn pull_into(
    client: &Client,
    auth: &RegistryAuth,
    reference: &Reference,
    archive: &mut ArchiveWriter,
    scratch: &Path,
) -> Result<Saved, String> {
    client.auth(reference, auth, RegistryOperation::Pull).await.map_err(|e| format!("authenticating: {e}"))?;
    let (mut body, mut digest) =
        client.pull_manifest_raw(reference, auth, ACCEPTED).await.map_err(|e| format!("manifest: {e}"))?;
    let mut doc: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("manifest is not JSON: {e}"))?;
    let mut media_type = media_type_of(&doc);
    if media_type == OCI_INDEX || media_type == DOCKER_LIST {
        let arch = go_arch();
        let entry = doc["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["platform"]["os"] == "linux" && m["platform"]["architecture"] == arch)
            .ok_or_else(|| format!("no manifest for linux/{arch} in the index"))?;
        let child = entry["digest"].as_str().ok_or("an index entry without a digest")?.to_string();
        let child_type = entry["mediaType"].as_str().map(str::to_string);
        let by_digest = reference.clone_with_digest(child.clone());
        (body, digest) =
            client.pull_manifest_raw(&by_digest, auth, ACCEPTED).await.map_err(|e| format!("manifest {child}: {e}"))?;
        doc = serde_json::from_slice(&body).map_err(|e| format!("manifest {child} is not JSON: {e}"))?;
        media_type = child_type.unwrap_or_else(|| media_type_of(&doc));
    }
    let actual = sha256(&body);
    if actual != digest {
        return Err(format!("manifest digest {actual} is not the {digest} the registry announced"));
    }
    let mut blobs: Vec<oci_client::manifest::OciDescriptor> = Vec::new();
    let config = serde_json::from_value(doc["config"].clone()).map_err(|e| format!("manifest config: {e}"))?;
    blobs.push(config);
    for layer in doc["layers"].as_array().into_iter().flatten() {
        blobs.push(serde_json::from_value(layer.clone()).map_err(|e| format!("manifest layer: {e}"))?);
    }
    for desc in &blobs {
        if archive.written.contains(&desc.digest) {
            continue;
        }
        let tmp = scratch.join(format!(".k1s-save-{}.blob", std::process::id()));
        let file = tokio::fs::File::create(&tmp).await.map_err(|e| format!("{}: {e}", tmp.display()))?;
        // oci-client checks the blob against its digest while it streams.
        client.pull_blob(reference, desc, file).await.map_err(|e| format!("blob {}: {e}", desc.digest))?;
        let res = archive.append_file(&desc.digest, &tmp).map_err(|e| k1s_api::errors::chain(&e));
        let _ = std::fs::remove_file(&tmp);
        res?;
    }
    archive.append_blob(&digest, &body).map_err(|e| k1s_api::errors::chain(&e))?;
    Ok(Saved { name: String::new(), tag: None, media_type, digest, size: body.len() })
}

/// Pulls `images` and writes them to `out` (gzip- or zstd-compressed when its name ends in
/// `.gz`/`.tgz` or `.zst`/`.tzst`). The file appears only when everything was saved.
pub async fn save(images: &[String], registries: &Registries, out: &Path) -> Result<SaveSummary, SaveError> {
    // reqwest is built without a default crypto provider; the server installs ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let partial = dir.join(format!(".{}.partial", out.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    let werr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SaveError::Write { path, source }
    };
    let file = std::fs::File::create(&partial).map_err(werr(&partial))?;
    let mut archive = ArchiveWriter {
        tar: tar::Builder::new(std::io::BufWriter::new(file)),
        path: partial.clone(),
        written: BTreeSet::new(),
    };
    let result = write_images(images, registries, &mut archive, &dir).await;
    let result = match result {
        Ok(saved) => finish(archive, saved, out, &partial).await,
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_file(&partial);
    result
}

async fn write_images(
    images: &[String],
    registries: &Registries,
    archive: &mut ArchiveWriter,
    scratch: &Path,
) -> Result<Vec<Saved>, SaveError> {
    let mut saved = Vec::new();
    for image in images {
        let reference: Reference = image.parse().map_err(|e: oci_client::ParseError| SaveError::Reference {
            image: image.clone(),
            message: e.to_string(),
        })?;
        let mut attempts = Vec::new();
        let mut done = None;
        for endpoint in registries.pull_endpoints(reference.registry()) {
            let mut r = reference.clone();
            if endpoint.host != reference.registry() {
                r.set_mirror_registry(endpoint.host.clone());
            }
            let client = client_for(&endpoint);
            match pull_into(&client, &registry_auth(&endpoint), &r, archive, scratch).await {
                Ok(s) => {
                    done = Some(s);
                    break;
                }
                Err(e) => {
                    tracing::debug!(image = %image, endpoint = %endpoint.host, error = %e, "pull attempt failed");
                    attempts.push(format!("{}: {e}", endpoint.host));
                }
            }
        }
        let Some(mut s) = done else {
            if attempts.iter().any(|a| a.contains("no manifest for linux/")) && attempts.len() == 1 {
                return Err(SaveError::NoPlatform { image: image.clone(), platform: format!("linux/{}", go_arch()) });
            }
            return Err(SaveError::Pull { image: image.clone(), attempts: attempts.join("; ") });
        };
        s.name = reference.whole();
        s.tag = reference.tag().map(str::to_string);
        tracing::info!(image = %s.name, digest = %s.digest, "saved");
        saved.push(s);
    }
    Ok(saved)
}

/// The `index.json` of an archive of `saved`.
fn index_json(saved: &[Saved]) -> Vec<u8> {
    let manifests: Vec<serde_json::Value> = saved
        .iter()
        .map(|s| {
            let mut annotations = serde_json::Map::new();
            annotations.insert(CONTAINERD_IMAGE_NAME.into(), s.name.clone().into());
            if let Some(tag) = &s.tag {
                annotations.insert(OCI_REF_NAME.into(), tag.clone().into());
            }
            serde_json::json!({"mediaType": s.media_type, "digest": s.digest, "size": s.size, "annotations": annotations})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}))
        .unwrap_or_default()
}

async fn finish(
    mut archive: ArchiveWriter,
    saved: Vec<Saved>,
    out: &Path,
    partial: &Path,
) -> Result<SaveSummary, SaveError> {
    let werr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SaveError::Write { path, source }
    };
    archive.append("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    archive.append("index.json", &index_json(&saved))?;
    let blobs = archive.written.len();
    let mut w = archive.tar.into_inner().map_err(werr(partial))?;
    w.flush().map_err(werr(partial))?;
    drop(w);
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let gzip = name.ends_with(".gz") || name.ends_with(".tgz");
    let zstd = name.ends_with(".zst") || name.ends_with(".zstd") || name.ends_with(".tzst");
    if gzip || zstd {
        let compressed = partial.with_extension("compressing");
        let src = std::fs::File::open(partial).map_err(werr(partial))?;
        let dst = std::fs::File::create(&compressed).map_err(werr(&compressed))?;
        let res = if gzip {
            let mut enc = flate2::write::GzEncoder::new(std::io::BufWriter::new(dst), flate2::Compression::default());
            std::io::copy(&mut std::io::BufReader::new(src), &mut enc).and_then(|_| enc.finish()?.flush())
        } else {
            let mut w = std::io::BufWriter::new(dst);
            ruzstd::encoding::compress(
                std::io::BufReader::new(src),
                &mut w,
                ruzstd::encoding::CompressionLevel::Fastest,
            );
            w.flush()
        };
        if let Err(source) = res {
            let _ = std::fs::remove_file(&compressed);
            return Err(SaveError::Write { path: compressed, source });
        }
        std::fs::rename(&compressed, out).map_err(werr(out))?;
    } else {
        std::fs::rename(partial, out).map_err(werr(out))?;
    }
    let bytes = std::fs::metadata(out).map_err(werr(out))?.len();
    Ok(SaveSummary { images: saved.into_iter().map(|s| s.name).collect(), blobs, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_json_names_each_image_as_containerd_export_does() {
        let saved = vec![Saved {
            name: "127.0.0.1:5001/airgap/busybox:1.36".into(),
            tag: Some("1.36".into()),
            media_type: DOCKER_MANIFEST.into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            size: 527,
        }];
        let index: serde_json::Value = serde_json::from_slice(&index_json(&saved)).expect("json");
        let m = &index["manifests"][0];
        assert_eq!(m["annotations"][CONTAINERD_IMAGE_NAME], "127.0.0.1:5001/airgap/busybox:1.36");
        assert_eq!(m["annotations"][OCI_REF_NAME], "1.36");
        assert_eq!(m["size"], 527);
        assert_eq!(m["mediaType"], DOCKER_MANIFEST);
        assert_eq!(index["schemaVersion"], 2);
    }

    #[test]
    fn basic_credentials_come_from_username_and_password_or_auth() {
        let ep = |auth: crate::registries::RegistryAuth| PullEndpoint {
            host: "r.example.com".into(),
            plain_http: false,
            auth: Some(auth),
            tls: None,
        };
        let plain = crate::registries::RegistryAuth {
            username: Some("u".into()),
            password: Some("p".into()),
            ..Default::default()
        };
        assert_eq!(registry_auth(&ep(plain)), RegistryAuth::Basic("u".into(), "p".into()));
        let encoded = crate::registries::RegistryAuth { auth: Some("dTI6cDI=".into()), ..Default::default() };
        assert_eq!(registry_auth(&ep(encoded)), RegistryAuth::Basic("u2".into(), "p2".into()));
    }
}
