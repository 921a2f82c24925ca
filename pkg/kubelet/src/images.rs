//! Image pulls through CRI: pull policy, de-duplication of concurrent pulls of one image,
//! credentials from `imagePullSecrets` and `registries.yaml`, and the node's image list.

use crate::Shared;
use k1s_cri::v1::{AuthConfig, ImageSpec, ImageStatusRequest, ListImagesRequest, PullImageRequest};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::OnceCell;

/// How an image pull ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// Pulling failed (`ErrImagePull`).
    #[error("{0}")]
    Failed(String),
    /// `imagePullPolicy: Never` and the image is absent (`ErrImageNeverPull`).
    #[error("Container image \"{0}\" is not present with pull policy of Never")]
    NeverPull(String),
}

/// One pull in flight, shared by everyone who wants the same image.
type SharedPull = Arc<OnceCell<Result<String, PullError>>>;

/// Concurrent pulls of one image share a single CRI call.
#[derive(Default)]
pub struct PullCoordinator {
    inflight: Mutex<HashMap<String, SharedPull>>,
}

/// Normalises `busybox` to `docker.io/library/busybox:latest` the way the CRI does for matching.
pub fn normalize(image: &str) -> String {
    let (name, tag_or_digest) = match image.rsplit_once('@') {
        Some((n, d)) => (n.to_string(), format!("@{d}")),
        None => {
            let last = image.rsplit('/').next().unwrap_or(image);
            match last.rsplit_once(':') {
                Some((_, t)) => (image[..image.len() - t.len() - 1].to_string(), format!(":{t}")),
                None => (image.to_string(), ":latest".to_string()),
            }
        }
    };
    let first = name.split('/').next().unwrap_or("");
    let has_registry = name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_registry {
        name
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{full}{tag_or_digest}")
}

/// The registry host of an image reference.
pub fn registry_host(image: &str) -> String {
    normalize(image).split('/').next().unwrap_or("docker.io").to_string()
}

/// Credentials for `image` from the pod's pull secrets (`.dockerconfigjson` / `.dockercfg`).
pub fn auth_from_secrets(image: &str, secrets: &[Value]) -> Option<AuthConfig> {
    use base64::Engine as _;
    let host = registry_host(image);
    for s in secrets {
        let data = s.get("data")?;
        let raw = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")).and_then(Value::as_str)?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
        let cfg: Value = serde_json::from_slice(&decoded).ok()?;
        let auths = cfg.get("auths").unwrap_or(&cfg);
        for (k, v) in auths.as_object()? {
            let k = k.trim_start_matches("https://").trim_start_matches("http://");
            let k = k.split('/').next().unwrap_or(k);
            let matches = k == host || (host == "docker.io" && (k == "index.docker.io" || k == "registry-1.docker.io"));
            if !matches {
                continue;
            }
            let mut auth = AuthConfig {
                username: v.get("username").and_then(Value::as_str).unwrap_or("").to_string(),
                password: v.get("password").and_then(Value::as_str).unwrap_or("").to_string(),
                auth: v.get("auth").and_then(Value::as_str).unwrap_or("").to_string(),
                ..Default::default()
            };
            if auth.username.is_empty() && !auth.auth.is_empty() {
                if let Some((u, p)) = base64::engine::general_purpose::STANDARD
                    .decode(&auth.auth)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())))
                {
                    auth.username = u;
                    auth.password = p;
                }
            }
            return Some(auth);
        }
    }
    None
}

impl Shared {
    /// The image's id (`sha256:…`) if present on the node.
    pub async fn image_present(&self, image: &str) -> Option<String> {
        let resp = self
            .images
            .image_status(ImageStatusRequest {
                image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
                verbose: false,
            })
            .await
            .ok()?;
        resp.image.map(|i| i.id)
    }
}

/// Outcome of `ensure_image`: the image reference to create containers with, and whether a
/// pull happened.
pub struct Ensured {
    pub image_ref: String,
    pub pulled: bool,
}

/// Makes sure `image` is present per `policy` (`Always`, `IfNotPresent`, `Never`), emitting
/// the Pulling/Pulled events on `pod_ref`.
pub async fn ensure_image(
    shared: &Shared,
    image: &str,
    policy: &str,
    secrets: &[Value],
    pod_ref: &k8s_openapi::api::core::v1::ObjectReference,
) -> Result<Ensured, PullError> {
    use k1s_runtime::events::EventType::{Normal, Warning};
    if policy != "Always" {
        if let Some(id) = shared.image_present(image).await {
            shared.event(pod_ref, Normal, "Pulled", &format!("Container image \"{image}\" already present on machine"));
            return Ok(Ensured { image_ref: id, pulled: false });
        }
        if policy == "Never" {
            shared.event(pod_ref, Warning, "ErrImageNeverPull", &PullError::NeverPull(image.into()).to_string());
            return Err(PullError::NeverPull(image.to_string()));
        }
    }
    shared.event(pod_ref, Normal, "Pulling", &format!("Pulling image \"{image}\""));
    let started = Instant::now();
    let cell = {
        let mut m = shared.pulls.inflight.lock().map_err(|_| PullError::Failed("pull table poisoned".into()))?;
        m.entry(image.to_string()).or_default().clone()
    };
    let auth = auth_from_secrets(image, secrets).or_else(|| {
        shared.config.registries.as_ref().and_then(|r| r.credentials_for_image(image)).map(|c| AuthConfig {
            username: c.auth.username.unwrap_or_default(),
            password: c.auth.password.unwrap_or_default(),
            auth: c.auth.auth.unwrap_or_default(),
            identity_token: c.auth.identity_token.unwrap_or_default(),
            server_address: c.server_address,
            ..Default::default()
        })
    });
    let result = cell
        .get_or_init(|| async {
            shared
                .images
                .pull_image(PullImageRequest {
                    image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
                    auth,
                    sandbox_config: None,
                })
                .await
                .map(|r| r.image_ref)
                .map_err(|e| PullError::Failed(format!("failed to pull and unpack image \"{image}\": {e}")))
        })
        .await
        .clone();
    if let Ok(mut m) = shared.pulls.inflight.lock() {
        if m.get(image).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            m.remove(image);
        }
    }
    match result {
        Ok(r) => {
            let took = started.elapsed();
            shared.event(
                pod_ref,
                Normal,
                "Pulled",
                &format!("Successfully pulled image \"{image}\" in {took:.3?} ({took:.3?} including waiting)"),
            );
            Ok(Ensured { image_ref: r, pulled: true })
        }
        Err(e) => {
            shared.event(pod_ref, Warning, "Failed", &format!("Failed to pull image \"{image}\": {e}"));
            Err(e)
        }
    }
}

/// The node's images for `status.images`.
pub async fn node_images(shared: &Shared) -> Value {
    match shared.images.list_images(ListImagesRequest { filter: None }).await {
        Ok(r) => Value::Array(
            r.images
                .into_iter()
                .map(|i| {
                    let mut names: Vec<String> = i.repo_digests.clone();
                    names.extend(i.repo_tags.clone());
                    json!({"names": names, "sizeBytes": i.size})
                })
                .collect(),
        ),
        Err(_) => json!([]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_normalise_like_the_cri() {
        assert_eq!(normalize("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("127.0.0.1:5000/busybox:1.36"), "127.0.0.1:5000/busybox:1.36");
        assert_eq!(normalize("library/nginx:1"), "docker.io/library/nginx:1");
        assert_eq!(registry_host("127.0.0.1:5000/busybox"), "127.0.0.1:5000");
        assert_eq!(registry_host("quay.io/x/y@sha256:abc"), "quay.io");
    }

    #[test]
    fn pull_secret_credentials_match_the_registry() {
        use base64::Engine as _;
        let cfg = serde_json::json!({"auths": {"127.0.0.1:5000": {"username": "u", "password": "p"}}}).to_string();
        let secret =
            serde_json::json!({"data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(cfg)}});
        let a = auth_from_secrets("127.0.0.1:5000/busybox:1", std::slice::from_ref(&secret)).expect("auth");
        assert_eq!((a.username.as_str(), a.password.as_str()), ("u", "p"));
        assert!(auth_from_secrets("quay.io/x", &[secret]).is_none());
    }
}
