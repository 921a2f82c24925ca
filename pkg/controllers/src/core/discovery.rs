//! The resources the API serves, as discovery reports them: what the namespace controller
//! empties a namespace of and what the garbage collector watches. Built-in and custom resources
//! alike, so a CustomResourceDefinition added later is covered at the next discovery.

use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Discovery, Scope};

/// One served resource at one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedResource {
    pub api: ApiResource,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    /// Subresource names (`status`, `scale`, ...).
    pub subresources: Vec<String>,
}

impl ServedResource {
    fn new(api: ApiResource, caps: &ApiCapabilities) -> ServedResource {
        ServedResource {
            api,
            namespaced: caps.scope == Scope::Namespaced,
            verbs: caps.operations.clone(),
            subresources: caps.subresources.iter().map(|(r, _)| r.plural.clone()).collect(),
        }
    }

    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// `resource.group` (`pods.` for the core group), as upstream's messages print it.
    pub fn group_resource(&self) -> String {
        format!("{}.{}", self.api.plural, self.api.group)
    }

    /// A resource built by hand (tests, well-known resources).
    pub fn of(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        verbs: &[&str],
    ) -> ServedResource {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        ServedResource {
            api: ApiResource::from_gvk_with_plural(&gvk, plural),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            subresources: Vec::new(),
        }
    }
}

/// What one discovery run found.
#[derive(Clone, Debug, Default)]
pub struct Served {
    /// One entry per resource, at its most stable served version (upstream's
    /// `ServerPreferredResources`).
    pub preferred: Vec<ServedResource>,
    /// Every resource at every served version (for resolving an ownerReference's apiVersion).
    pub all: Vec<ServedResource>,
}

impl Served {
    /// The resource for `api_version` + `kind`; falls back to another served version of the
    /// same group and kind (the object is the same whatever the version).
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&ServedResource> {
        let (group, version) = split_api_version(api_version);
        self.all
            .iter()
            .find(|r| r.api.group == group && r.api.version == version && r.api.kind == kind)
            .or_else(|| self.preferred.iter().find(|r| r.api.group == group && r.api.kind == kind))
    }
}

/// `apps/v1` ▶ (`apps`, `v1`); `v1` ▶ (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("discovering the served resources")]
    Discover(#[source] kube::Error),
}

/// Runs aggregated discovery (two requests), falling back to per-group discovery.
pub async fn served(client: &kube::Client) -> Result<Served, DiscoveryError> {
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => d,
        Err(e) => {
            tracing::debug!(error = %e, "aggregated discovery failed; falling back to per-group discovery");
            Discovery::new(client.clone()).run().await.map_err(DiscoveryError::Discover)?
        }
    };
    let mut out = Served::default();
    for group in discovery.groups() {
        for (api, caps) in group.resources_by_stability() {
            out.preferred.push(ServedResource::new(api, &caps));
        }
        for version in group.versions() {
            for (api, caps) in group.versioned_resources(version) {
                out.all.push(ServedResource::new(api, &caps));
            }
        }
    }
    out.preferred.sort_by(|a, b| (&a.api.group, &a.api.plural).cmp(&(&b.api.group, &b.api.plural)));
    Ok(out)
}

/// What discovery last found, asked again once it is 30 s old: for controllers that resolve
/// kinds on the way (the scale of an owner, an autoscaler's target).
#[derive(Default)]
pub struct ServedCache(tokio::sync::Mutex<Option<(std::time::Instant, Served)>>);

impl ServedCache {
    pub async fn get(&self, client: &kube::Client) -> Result<Served, String> {
        let mut cache = self.0.lock().await;
        if let Some((at, s)) = cache.as_ref() {
            if at.elapsed() < std::time::Duration::from_secs(30) {
                return Ok(s.clone());
            }
        }
        let s = served(client).await.map_err(|e| k1s_api::errors::chain(&e))?;
        *cache = Some((std::time::Instant::now(), s.clone()));
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_prefers_the_exact_version_and_falls_back_to_the_group_kind() {
        let v2 =
            ServedResource::of("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, &[]);
        let served = Served { preferred: vec![v2.clone()], all: vec![v2.clone()] };
        assert_eq!(served.resolve("autoscaling/v2", "HorizontalPodAutoscaler"), Some(&v2));
        assert_eq!(served.resolve("autoscaling/v1", "HorizontalPodAutoscaler"), Some(&v2));
        assert_eq!(served.resolve("apps/v1", "Deployment"), None);
    }

    #[test]
    fn core_group_api_version_has_no_group() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(ServedResource::of("", "v1", "Pod", "pods", true, &[]).group_resource(), "pods.");
    }
}
