//! The resource table: every built-in resource k1s serves, with what discovery, the registry,
//! OpenAPI and the printers need to know about it.

use crate::strategies;
use crate::strategy::{DynStrategy, Generic, Typed};
use k8s_openapi::api as a;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as aggregator;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use std::sync::LazyLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// How a resource is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Objects kept in the store.
    Stored,
    /// Create-only request/response kinds computed by the server (reviews, bindings).
    Virtual,
}

/// A subresource as discovery shows it.
#[derive(Clone, Debug)]
pub struct SubresourceInfo {
    pub name: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

pub const STANDARD_VERBS: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const CREATE_ONLY: &[&str] = &["create"];
const GET_LIST: &[&str] = &["get", "list"];

pub struct ResourceInfo {
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lower case: the URL path segment.
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub list_kind: String,
    pub scope: Scope,
    pub backing: Backing,
    pub verbs: &'static [&'static str],
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub subresources: Vec<SubresourceInfo>,
    /// OpenAPI definition name, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub schema_name: String,
    /// Adds the kind's schema (and everything it references) to a generator; returns a `$ref`.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
    /// Whether objects of this kind carry `metadata.generation` (kinds with a `spec`).
    pub has_spec: bool,
    pub strategy: Box<dyn DynStrategy>,
    /// What a custom resource takes from its CustomResourceDefinition; `None` for built-ins.
    pub custom: Option<crate::custom::CustomInfo>,
}

impl std::fmt::Debug for ResourceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.group, self.version, self.resource)
    }
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    pub fn namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }
    /// The storage prefix `/registry/<group>/<resource>/`; `core` resources have no group segment.
    pub fn storage_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/registry/{}/", self.resource)
        } else {
            format!("/registry/{}/{}/", self.group, self.resource)
        }
    }
}

trait ScopeOf {
    const SCOPE: Scope;
}
impl ScopeOf for k8s_openapi::NamespaceResourceScope {
    const SCOPE: Scope = Scope::Namespaced;
}
impl ScopeOf for k8s_openapi::ClusterResourceScope {
    const SCOPE: Scope = Scope::Cluster;
}

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn has_spec<T: JsonSchema>() -> bool {
    let mut g = SchemaGenerator::default();
    let s = T::json_schema(&mut g);
    s.get("properties").and_then(|p| p.get("spec")).is_some()
}

struct Entry {
    singular: &'static str,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
    backing: Backing,
    verbs: &'static [&'static str],
}

fn info<T>(e: Entry, strategy: Box<dyn DynStrategy>) -> ResourceInfo
where
    T: k8s_openapi::Resource + JsonSchema,
    T::Scope: ScopeOf,
{
    let subresources = e.subresources.iter().map(|name| subresource::<T>(name)).collect();
    ResourceInfo {
        group: T::GROUP,
        version: T::VERSION,
        resource: T::URL_PATH_SEGMENT,
        singular: e.singular,
        kind: T::KIND,
        list_kind: format!("{}List", T::KIND),
        scope: <T::Scope as ScopeOf>::SCOPE,
        backing: e.backing,
        verbs: e.verbs,
        short_names: e.short_names,
        categories: e.categories,
        subresources,
        schema_name: T::schema_name().into_owned(),
        schema: schema_of::<T>,
        has_spec: has_spec::<T>(),
        strategy,
        custom: None,
    }
}

fn subresource<T: k8s_openapi::Resource>(name: &'static str) -> SubresourceInfo {
    let rw: &'static [&'static str] = &["get", "patch", "update"];
    let (group, version, kind, verbs): (&'static str, &'static str, &'static str, &'static [&'static str]) = match name
    {
        "status" | "ephemeralcontainers" | "resize" | "approval" => (T::GROUP, T::VERSION, T::KIND, rw),
        "scale" => ("autoscaling", "v1", "Scale", rw),
        "binding" => ("", "v1", "Binding", CREATE_ONLY),
        "eviction" => ("policy", "v1", "Eviction", CREATE_ONLY),
        "log" => ("", "v1", "Pod", &["get"]),
        "exec" => ("", "v1", "PodExecOptions", &["create", "get"]),
        "attach" => ("", "v1", "PodAttachOptions", &["create", "get"]),
        "portforward" => ("", "v1", "PodPortForwardOptions", &["create", "get"]),
        "proxy" => match T::KIND {
            "Node" => ("", "v1", "NodeProxyOptions", &["create", "delete", "get", "patch", "update"]),
            "Service" => ("", "v1", "ServiceProxyOptions", &["create", "delete", "get", "patch", "update"]),
            _ => ("", "v1", "PodProxyOptions", &["create", "delete", "get", "patch", "update"]),
        },
        "token" => ("authentication.k8s.io", "v1", "TokenRequest", CREATE_ONLY),
        "finalize" => (T::GROUP, T::VERSION, T::KIND, &["update"]),
        _ => (T::GROUP, T::VERSION, T::KIND, rw),
    };
    SubresourceInfo { name, group, version, kind, verbs }
}

const fn e(singular: &'static str) -> Entry {
    Entry {
        singular,
        short_names: &[],
        categories: &[],
        subresources: &[],
        backing: Backing::Stored,
        verbs: STANDARD_VERBS,
    }
}

impl Entry {
    const fn short(mut self, s: &'static [&'static str]) -> Self {
        self.short_names = s;
        self
    }
    const fn cat(mut self, c: &'static [&'static str]) -> Self {
        self.categories = c;
        self
    }
    const fn all(mut self) -> Self {
        self.categories = &["all"];
        self
    }
    const fn subs(mut self, s: &'static [&'static str]) -> Self {
        self.subresources = s;
        self
    }
    const fn virt(mut self, verbs: &'static [&'static str]) -> Self {
        self.backing = Backing::Virtual;
        self.verbs = verbs;
        self
    }
}

fn g<T: serde::Serialize + serde::de::DeserializeOwned + Clone + Send + Sync + 'static>() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<T>::default()))
}

macro_rules! table {
    ($( $ty:ty => $entry:expr, $strategy:expr; )*) => {
        vec![ $( info::<$ty>($entry, $strategy), )* ]
    };
}

static TABLE: LazyLock<Vec<ResourceInfo>> = LazyLock::new(build);

/// Every resource k1s serves, in discovery order within each group-version.
pub fn all() -> &'static [ResourceInfo] {
    &TABLE
}

/// Looks a resource up by group, version and plural name.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
    all().iter().find(|r| r.group == group && r.version == version && r.resource == resource)
}

/// Looks a resource up by group, version and kind.
pub fn find_kind(group: &str, version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    all().iter().find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// The group-versions served, in preference order within each group, groups in upstream's order.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in all() {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

fn build() -> Vec<ResourceInfo> {
    use strategies as s;
    table! {
        // core/v1
        a::core::v1::Binding => e("binding").virt(CREATE_ONLY), g::<a::core::v1::Binding>();
        a::core::v1::ComponentStatus => e("componentstatus").short(&["cs"]).virt(GET_LIST), g::<a::core::v1::ComponentStatus>();
        a::core::v1::ConfigMap => e("configmap").short(&["cm"]), s::core::config_map();
        a::core::v1::Endpoints => e("endpoints").short(&["ep"]), s::core::endpoints();
        a::core::v1::Event => e("event").short(&["ev"]), s::core::event();
        a::core::v1::LimitRange => e("limitrange").short(&["limits"]), s::core::limit_range();
        a::core::v1::Namespace => e("namespace").short(&["ns"]).subs(&["finalize", "status"]), s::core::namespace();
        a::core::v1::Node => e("node").short(&["no"]).subs(&["proxy", "status"]), s::core::node();
        a::core::v1::PersistentVolumeClaim => e("persistentvolumeclaim").short(&["pvc"]).subs(&["status"]), s::core::persistent_volume_claim();
        a::core::v1::PersistentVolume => e("persistentvolume").short(&["pv"]).subs(&["status"]), s::core::persistent_volume();
        a::core::v1::Pod => e("pod").short(&["po"]).all().subs(&["attach", "binding", "ephemeralcontainers", "eviction", "exec", "log", "portforward", "proxy", "resize", "status"]), s::core::pod();
        a::core::v1::PodTemplate => e("podtemplate"), s::core::pod_template();
        a::core::v1::ReplicationController => e("replicationcontroller").short(&["rc"]).all().subs(&["scale", "status"]), s::core::replication_controller();
        a::core::v1::ResourceQuota => e("resourcequota").short(&["quota"]).subs(&["status"]), s::core::resource_quota();
        a::core::v1::Secret => e("secret"), s::core::secret();
        a::core::v1::ServiceAccount => e("serviceaccount").short(&["sa"]).subs(&["token"]), s::core::service_account();
        a::core::v1::Service => e("service").short(&["svc"]).all().subs(&["proxy", "status"]), s::core::service();
        // apiregistration.k8s.io/v1: first of the named groups, as upstream's aggregator lists it
        aggregator::APIService => e("apiservice").cat(&["api-extensions"]).subs(&["status"]), strategies::apiregistration::api_service();
        // admissionregistration.k8s.io/v1
        a::admissionregistration::v1::MutatingWebhookConfiguration => e("mutatingwebhookconfiguration"), s::admissionregistration::mutating_webhook_configuration();
        a::admissionregistration::v1::ValidatingAdmissionPolicy => e("validatingadmissionpolicy").subs(&["status"]), s::admissionregistration::validating_admission_policy();
        a::admissionregistration::v1::ValidatingAdmissionPolicyBinding => e("validatingadmissionpolicybinding"), s::admissionregistration::validating_admission_policy_binding();
        a::admissionregistration::v1::ValidatingWebhookConfiguration => e("validatingwebhookconfiguration"), s::admissionregistration::validating_webhook_configuration();
        // apiextensions.k8s.io/v1
        apiext::CustomResourceDefinition => e("customresourcedefinition").short(&["crd", "crds"]).subs(&["status"]), strategies::apiextensions::custom_resource_definition();
        // apps/v1
        a::apps::v1::ControllerRevision => e("controllerrevision"), g::<a::apps::v1::ControllerRevision>();
        a::apps::v1::DaemonSet => e("daemonset").short(&["ds"]).all().subs(&["status"]), s::apps::daemon_set();
        a::apps::v1::Deployment => e("deployment").short(&["deploy"]).all().subs(&["scale", "status"]), s::apps::deployment();
        a::apps::v1::ReplicaSet => e("replicaset").short(&["rs"]).all().subs(&["scale", "status"]), s::apps::replica_set();
        a::apps::v1::StatefulSet => e("statefulset").short(&["sts"]).all().subs(&["scale", "status"]), s::apps::stateful_set();
        // authentication.k8s.io/v1
        a::authentication::v1::SelfSubjectReview => e("selfsubjectreview").virt(CREATE_ONLY), g::<a::authentication::v1::SelfSubjectReview>();
        a::authentication::v1::TokenReview => e("tokenreview").virt(CREATE_ONLY), g::<a::authentication::v1::TokenReview>();
        // authorization.k8s.io/v1
        a::authorization::v1::LocalSubjectAccessReview => e("localsubjectaccessreview").virt(CREATE_ONLY), g::<a::authorization::v1::LocalSubjectAccessReview>();
        a::authorization::v1::SelfSubjectAccessReview => e("selfsubjectaccessreview").virt(CREATE_ONLY), g::<a::authorization::v1::SelfSubjectAccessReview>();
        a::authorization::v1::SelfSubjectRulesReview => e("selfsubjectrulesreview").virt(CREATE_ONLY), g::<a::authorization::v1::SelfSubjectRulesReview>();
        a::authorization::v1::SubjectAccessReview => e("subjectaccessreview").virt(CREATE_ONLY), g::<a::authorization::v1::SubjectAccessReview>();
        // autoscaling
        a::autoscaling::v2::HorizontalPodAutoscaler => e("horizontalpodautoscaler").short(&["hpa"]).all().subs(&["status"]), strategies::autoscaling::hpa_v2();
        a::autoscaling::v1::HorizontalPodAutoscaler => e("horizontalpodautoscaler").short(&["hpa"]).all().subs(&["status"]), strategies::autoscaling::hpa_v1();
        // batch/v1
        a::batch::v1::CronJob => e("cronjob").short(&["cj"]).all().subs(&["status"]), s::batch::cron_job();
        a::batch::v1::Job => e("job").all().subs(&["status"]), s::batch::job();
        // certificates.k8s.io/v1
        a::certificates::v1::CertificateSigningRequest => e("certificatesigningrequest").short(&["csr"]).subs(&["approval", "status"]), s::certificates::certificate_signing_request();
        // coordination.k8s.io/v1
        a::coordination::v1::Lease => e("lease"), s::coordination::lease();
        // discovery.k8s.io/v1
        a::discovery::v1::EndpointSlice => e("endpointslice"), s::discovery::endpoint_slice();
        // events.k8s.io/v1
        a::events::v1::Event => e("event").short(&["ev"]), s::events::event();
        // networking.k8s.io/v1
        a::networking::v1::IngressClass => e("ingressclass"), g::<a::networking::v1::IngressClass>();
        a::networking::v1::Ingress => e("ingress").short(&["ing"]).subs(&["status"]), s::networking::ingress();
        a::networking::v1::IPAddress => e("ipaddress").short(&["ip"]), g::<a::networking::v1::IPAddress>();
        a::networking::v1::NetworkPolicy => e("networkpolicy").short(&["netpol"]), s::networking::network_policy();
        a::networking::v1::ServiceCIDR => e("servicecidr").subs(&["status"]), s::networking::service_cidr();
        // node.k8s.io/v1
        a::node::v1::RuntimeClass => e("runtimeclass"), g::<a::node::v1::RuntimeClass>();
        // policy/v1
        a::policy::v1::PodDisruptionBudget => e("poddisruptionbudget").short(&["pdb"]).subs(&["status"]), s::policy::pod_disruption_budget();
        // rbac.authorization.k8s.io/v1
        a::rbac::v1::ClusterRoleBinding => e("clusterrolebinding"), s::rbac::cluster_role_binding();
        a::rbac::v1::ClusterRole => e("clusterrole"), s::rbac::cluster_role();
        a::rbac::v1::RoleBinding => e("rolebinding"), s::rbac::role_binding();
        a::rbac::v1::Role => e("role"), s::rbac::role();
        // scheduling.k8s.io/v1
        a::scheduling::v1::PriorityClass => e("priorityclass").short(&["pc"]), g::<a::scheduling::v1::PriorityClass>();
        // storage.k8s.io/v1
        a::storage::v1::CSIDriver => e("csidriver"), g::<a::storage::v1::CSIDriver>();
        a::storage::v1::CSINode => e("csinode"), g::<a::storage::v1::CSINode>();
        a::storage::v1::CSIStorageCapacity => e("csistoragecapacity"), g::<a::storage::v1::CSIStorageCapacity>();
        a::storage::v1::StorageClass => e("storageclass").short(&["sc"]), g::<a::storage::v1::StorageClass>();
        a::storage::v1::VolumeAttachment => e("volumeattachment").subs(&["status"]), g::<a::storage::v1::VolumeAttachment>();
        a::storage::v1::VolumeAttributesClass => e("volumeattributesclass").short(&["vac"]), g::<a::storage::v1::VolumeAttributesClass>();
        // metrics.k8s.io/v1beta1: last, as upstream's aggregated API is, so that "pods" and
        // "nodes" stay core's
        crate::metrics::NodeMetrics => e("nodemetrics").virt(GET_LIST), g::<crate::metrics::NodeMetrics>();
        crate::metrics::PodMetrics => e("podmetrics").virt(GET_LIST), g::<crate::metrics::PodMetrics>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_core_kinds_with_scope_and_schema_names() {
        let pods = find("", "v1", "pods").expect("pods");
        assert_eq!(pods.kind, "Pod");
        assert_eq!(pods.scope, Scope::Namespaced);
        assert_eq!(pods.schema_name, "io.k8s.api.core.v1.Pod");
        assert!(pods.has_spec);
        let ns = find("", "v1", "namespaces").expect("namespaces");
        assert_eq!(ns.scope, Scope::Cluster);
        let cm = find("", "v1", "configmaps").expect("configmaps");
        assert!(!cm.has_spec);
        assert_eq!(
            find("apps", "v1", "deployments").map(|r| r.storage_prefix()).as_deref(),
            Some("/registry/apps/deployments/")
        );
        let scale = find("apps", "v1", "deployments")
            .expect("deploy")
            .subresources
            .iter()
            .find(|s| s.name == "scale")
            .map(|s| s.kind);
        assert_eq!(scale, Some("Scale"));
    }
}
