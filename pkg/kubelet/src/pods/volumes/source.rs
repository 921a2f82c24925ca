//! Where volume and environment contents come from: ConfigMaps, Secrets and ServiceAccount
//! tokens, behind [`ObjectSource`] so that everything above it runs in tests without an API
//! server. [`ApiSource`] reads them with the kubelet's client; [`MemorySource`] holds them in
//! memory.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use std::collections::HashMap;
use std::sync::Mutex;

/// Why an object could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// Upstream's kubelet-side NotFound (`configmap "x" not found`, singular resource).
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: &'static str, name: String },
    /// The API answered with an error Status; `message` is its message.
    #[error("{message}")]
    Api { message: String },
    /// The request did not get an answer.
    #[error("{resource} \"{name}\": {message}")]
    Transport { resource: &'static str, name: String, message: String },
}

impl SourceError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, SourceError::NotFound { .. })
    }
}

/// Reads the objects a pod's volumes and environment reference.
#[async_trait::async_trait]
pub trait ObjectSource: Send + Sync {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, SourceError>;
    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, SourceError>;
    async fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, SourceError>;
    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, SourceError>;
    /// `POST serviceaccounts/<name>/token`; returns the answered TokenRequest (token and
    /// expiration in its status).
    async fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, SourceError>;
}

/// The API-backed source, with the kubelet's identity.
#[derive(Clone)]
pub struct ApiSource {
    client: kube::Client,
}

impl ApiSource {
    pub fn new(client: kube::Client) -> Self {
        ApiSource { client }
    }
}

fn map_kube_error(resource: &'static str, name: &str, e: kube::Error) -> SourceError {
    match e {
        kube::Error::Api(status) if status.is_not_found() => SourceError::NotFound { resource, name: name.to_string() },
        kube::Error::Api(status) => SourceError::Api { message: status.message.clone() },
        other => SourceError::Transport { resource, name: name.to_string(), message: other.to_string() },
    }
}

#[async_trait::async_trait]
impl ObjectSource for ApiSource {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, SourceError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        api.get(name).await.map_err(|e| map_kube_error("configmap", name, e))
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, SourceError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        api.get(name).await.map_err(|e| map_kube_error("secret", name, e))
    }

    async fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, SourceError> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.get(name).await.map_err(|e| map_kube_error("persistentvolumeclaim", name, e))
    }

    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, SourceError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.get(name).await.map_err(|e| map_kube_error("persistentvolume", name, e))
    }

    async fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, SourceError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        api.create_token_request(service_account, &PostParams::default(), request)
            .await
            .map_err(|e| map_kube_error("serviceaccount", service_account, e))
    }
}

/// An in-memory source: objects put in are served until replaced or removed; tokens are
/// minted locally (`token-<n>` for `<namespace>/<serviceaccount>`) with the requested lifetime,
/// or refused with a configured error.
#[derive(Default)]
pub struct MemorySource {
    config_maps: Mutex<HashMap<(String, String), ConfigMap>>,
    secrets: Mutex<HashMap<(String, String), Secret>>,
    claims: Mutex<HashMap<(String, String), PersistentVolumeClaim>>,
    volumes: Mutex<HashMap<String, PersistentVolume>>,
    tokens: Mutex<TokenState>,
}

#[derive(Default)]
struct TokenState {
    issued: u64,
    refuse: Option<String>,
    requests: Vec<TokenRequest>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

impl MemorySource {
    pub fn put_config_map(&self, cm: ConfigMap) {
        self.config_maps.lock().unwrap_or_else(|p| p.into_inner()).insert(key_of(&cm.metadata), cm);
    }

    pub fn put_secret(&self, s: Secret) {
        self.secrets.lock().unwrap_or_else(|p| p.into_inner()).insert(key_of(&s.metadata), s);
    }

    pub fn put_claim(&self, c: PersistentVolumeClaim) {
        self.claims.lock().unwrap_or_else(|p| p.into_inner()).insert(key_of(&c.metadata), c);
    }

    pub fn put_volume(&self, v: PersistentVolume) {
        let name = v.metadata.name.clone().unwrap_or_default();
        self.volumes.lock().unwrap_or_else(|p| p.into_inner()).insert(name, v);
    }

    pub fn remove_config_map(&self, namespace: &str, name: &str) {
        self.config_maps.lock().unwrap_or_else(|p| p.into_inner()).remove(&(namespace.to_string(), name.to_string()));
    }

    /// Makes token requests fail with `message` (`None` to mint tokens again).
    pub fn refuse_tokens(&self, message: Option<&str>) {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).refuse = message.map(str::to_string);
    }

    /// The token requests received so far.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).requests.clone()
    }
}

#[async_trait::async_trait]
impl ObjectSource for MemorySource {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, SourceError> {
        let map = self.config_maps.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| SourceError::NotFound { resource: "configmap", name: name.to_string() })
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, SourceError> {
        let map = self.secrets.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| SourceError::NotFound { resource: "secret", name: name.to_string() })
    }

    async fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, SourceError> {
        let map = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| SourceError::NotFound { resource: "persistentvolumeclaim", name: name.to_string() })
    }

    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, SourceError> {
        let map = self.volumes.lock().unwrap_or_else(|p| p.into_inner());
        map.get(name)
            .cloned()
            .ok_or_else(|| SourceError::NotFound { resource: "persistentvolume", name: name.to_string() })
    }

    async fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, SourceError> {
        let mut st = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        st.requests.push(request.clone());
        if let Some(message) = &st.refuse {
            return Err(SourceError::Api { message: message.clone() });
        }
        st.issued += 1;
        let seconds = request.spec.expiration_seconds.unwrap_or(3600);
        let expires = k8s_openapi::jiff::Timestamp::now()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
            .unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
        let mut answered = request.clone();
        answered.spec.expiration_seconds = Some(seconds);
        answered.status = Some(k8s_openapi::api::authentication::v1::TokenRequestStatus {
            token: format!("token-{}-{namespace}-{service_account}", st.issued),
            expiration_timestamp: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(expires),
        });
        Ok(answered)
    }
}
