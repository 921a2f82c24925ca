//! The `x-kubernetes-*` extensions upstream's OpenAPI generator derives from Go struct tags and
//! markers, which the k8s-openapi schemas lack: `patchStrategy`/`patchMergeKey` tags become
//! `x-kubernetes-patch-strategy`/`x-kubernetes-patch-merge-key`, `+listType`/`+listMapKey` become
//! `x-kubernetes-list-type`/`x-kubernetes-list-map-keys`, and `+mapType`/`+structType` become
//! `x-kubernetes-map-type`.
//!
//! The table was derived from the struct tags of `k8s.io/api`, `k8s.io/apimachinery`,
//! `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator` at v0.35.7, restricted to the
//! definitions k1s serves. Format: `@<definition> [attributes]` opens a definition (attributes
//! there apply to the definition itself); each following `<field> attributes...` line annotates
//! one property. Attributes:
//! `patch=` strategy, `key=` merge key, `list=` list type, `keys=` comma-separated list-map keys,
//! `map=` map type.

use serde_json::{Map, Value};

const TABLE: &str = "\
@io.k8s.api.admissionregistration.v1.MatchResources map=atomic
excludeResourceRules list=atomic
resourceRules list=atomic
@io.k8s.api.admissionregistration.v1.MutatingWebhook
admissionReviewVersions list=atomic
matchConditions patch=merge key=name list=map keys=name
rules list=atomic
@io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration
webhooks patch=merge key=name list=map keys=name
@io.k8s.api.admissionregistration.v1.NamedRuleWithOperations map=atomic
apiGroups list=atomic
apiVersions list=atomic
operations list=atomic
resourceNames list=atomic
resources list=atomic
@io.k8s.api.admissionregistration.v1.ParamKind map=atomic
@io.k8s.api.admissionregistration.v1.ParamRef map=atomic
@io.k8s.api.admissionregistration.v1.RuleWithOperations
apiGroups list=atomic
apiVersions list=atomic
operations list=atomic
resources list=atomic
@io.k8s.api.admissionregistration.v1.TypeChecking
expressionWarnings list=atomic
@io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec
validationActions list=set
@io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec
auditAnnotations list=atomic
matchConditions patch=merge key=name list=map keys=name
validations list=atomic
variables patch=merge key=name list=map keys=name
@io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus
conditions list=map keys=type
@io.k8s.api.admissionregistration.v1.ValidatingWebhook
admissionReviewVersions list=atomic
matchConditions patch=merge key=name list=map keys=name
rules list=atomic
@io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration
webhooks patch=merge key=name list=map keys=name
@io.k8s.api.admissionregistration.v1.Variable map=atomic
@io.k8s.api.apps.v1.DaemonSetStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.apps.v1.DeploymentSpec
strategy patch=retainKeys
@io.k8s.api.apps.v1.DeploymentStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.apps.v1.ReplicaSetStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.apps.v1.StatefulSetSpec
volumeClaimTemplates list=atomic
@io.k8s.api.apps.v1.StatefulSetStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.authentication.v1.TokenRequestSpec
audiences list=atomic
@io.k8s.api.authentication.v1.TokenReviewSpec
audiences list=atomic
@io.k8s.api.authentication.v1.TokenReviewStatus
audiences list=atomic
@io.k8s.api.authentication.v1.UserInfo
groups list=atomic
@io.k8s.api.authorization.v1.FieldSelectorAttributes
requirements list=atomic
@io.k8s.api.authorization.v1.LabelSelectorAttributes
requirements list=atomic
@io.k8s.api.authorization.v1.NonResourceRule
nonResourceURLs list=atomic
verbs list=atomic
@io.k8s.api.authorization.v1.ResourceRule
apiGroups list=atomic
resourceNames list=atomic
resources list=atomic
verbs list=atomic
@io.k8s.api.authorization.v1.SubjectAccessReviewSpec
groups list=atomic
@io.k8s.api.authorization.v1.SubjectRulesReviewStatus
nonResourceRules list=atomic
resourceRules list=atomic
@io.k8s.api.autoscaling.v1.CrossVersionObjectReference map=atomic
@io.k8s.api.autoscaling.v2.HPAScalingRules
policies list=atomic
@io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec
metrics list=atomic
@io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus
conditions patch=merge key=type list=map keys=type
currentMetrics list=atomic
@io.k8s.api.batch.v1.CronJobStatus
active list=atomic
@io.k8s.api.batch.v1.JobStatus
conditions patch=merge key=type list=atomic
@io.k8s.api.batch.v1.PodFailurePolicy
rules list=atomic
@io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement
values list=set
@io.k8s.api.batch.v1.PodFailurePolicyRule
onPodConditions list=atomic
@io.k8s.api.batch.v1.SuccessPolicy
rules list=atomic
@io.k8s.api.batch.v1.UncountedTerminatedPods
failed list=set
succeeded list=set
@io.k8s.api.certificates.v1.CertificateSigningRequestSpec
groups list=atomic
usages list=atomic
@io.k8s.api.certificates.v1.CertificateSigningRequestStatus
conditions list=map keys=type
@io.k8s.api.core.v1.Capabilities
add list=atomic
drop list=atomic
@io.k8s.api.core.v1.CephFSPersistentVolumeSource
monitors list=atomic
@io.k8s.api.core.v1.CephFSVolumeSource
monitors list=atomic
@io.k8s.api.core.v1.ComponentStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.core.v1.ConfigMapKeySelector map=atomic
@io.k8s.api.core.v1.ConfigMapProjection
items list=atomic
@io.k8s.api.core.v1.ConfigMapVolumeSource
items list=atomic
@io.k8s.api.core.v1.Container
args list=atomic
command list=atomic
env patch=merge key=name list=map keys=name
envFrom list=atomic
ports patch=merge key=containerPort list=map keys=containerPort,protocol
resizePolicy list=atomic
restartPolicyRules list=atomic
volumeDevices patch=merge key=devicePath list=map keys=devicePath
volumeMounts patch=merge key=mountPath list=map keys=mountPath
@io.k8s.api.core.v1.ContainerImage
names list=atomic
@io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes
values list=set
@io.k8s.api.core.v1.ContainerStatus
allocatedResourcesStatus patch=merge key=name list=map keys=name
volumeMounts patch=merge key=mountPath list=map keys=mountPath
@io.k8s.api.core.v1.DownwardAPIProjection
items list=atomic
@io.k8s.api.core.v1.DownwardAPIVolumeSource
items list=atomic
@io.k8s.api.core.v1.EndpointAddress map=atomic
@io.k8s.api.core.v1.EndpointPort map=atomic
@io.k8s.api.core.v1.EndpointSubset
addresses list=atomic
notReadyAddresses list=atomic
ports list=atomic
@io.k8s.api.core.v1.Endpoints
subsets list=atomic
@io.k8s.api.core.v1.EphemeralContainer
args list=atomic
command list=atomic
env patch=merge key=name list=map keys=name
envFrom list=atomic
ports patch=merge key=containerPort list=map keys=containerPort,protocol
resizePolicy list=atomic
restartPolicyRules list=atomic
volumeDevices patch=merge key=devicePath list=map keys=devicePath
volumeMounts patch=merge key=mountPath list=map keys=mountPath
@io.k8s.api.core.v1.ExecAction
command list=atomic
@io.k8s.api.core.v1.FCVolumeSource
targetWWNs list=atomic
wwids list=atomic
@io.k8s.api.core.v1.FileKeySelector map=atomic
@io.k8s.api.core.v1.HTTPGetAction
httpHeaders list=atomic
@io.k8s.api.core.v1.HostAlias
hostnames list=atomic
@io.k8s.api.core.v1.ISCSIPersistentVolumeSource
portals list=atomic
@io.k8s.api.core.v1.ISCSIVolumeSource
portals list=atomic
@io.k8s.api.core.v1.LimitRangeSpec
limits list=atomic
@io.k8s.api.core.v1.LinuxContainerUser
supplementalGroups list=atomic
@io.k8s.api.core.v1.LoadBalancerIngress
ports list=atomic
@io.k8s.api.core.v1.LoadBalancerStatus
ingress list=atomic
@io.k8s.api.core.v1.LocalObjectReference map=atomic
@io.k8s.api.core.v1.NamespaceSpec
finalizers list=atomic
@io.k8s.api.core.v1.NamespaceStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.core.v1.NodeAffinity
preferredDuringSchedulingIgnoredDuringExecution list=atomic
@io.k8s.api.core.v1.NodeSelector map=atomic
nodeSelectorTerms list=atomic
@io.k8s.api.core.v1.NodeSelectorRequirement
values list=atomic
@io.k8s.api.core.v1.NodeSelectorTerm map=atomic
matchExpressions list=atomic
matchFields list=atomic
@io.k8s.api.core.v1.NodeSpec
podCIDRs patch=merge list=set
taints list=atomic
@io.k8s.api.core.v1.NodeStatus
addresses patch=merge key=type list=map keys=type
conditions patch=merge key=type list=map keys=type
declaredFeatures list=atomic
images list=atomic
runtimeHandlers list=atomic
volumesAttached list=atomic
volumesInUse list=atomic
@io.k8s.api.core.v1.ObjectFieldSelector map=atomic
@io.k8s.api.core.v1.ObjectReference map=atomic
@io.k8s.api.core.v1.PersistentVolumeClaimSpec
accessModes list=atomic
@io.k8s.api.core.v1.PersistentVolumeClaimStatus
accessModes list=atomic
allocatedResourceStatuses map=granular
conditions patch=merge key=type list=map keys=type
@io.k8s.api.core.v1.PersistentVolumeSpec
accessModes list=atomic
claimRef map=granular
mountOptions list=atomic
@io.k8s.api.core.v1.PodAffinity
preferredDuringSchedulingIgnoredDuringExecution list=atomic
requiredDuringSchedulingIgnoredDuringExecution list=atomic
@io.k8s.api.core.v1.PodAffinityTerm
matchLabelKeys list=atomic
mismatchLabelKeys list=atomic
namespaces list=atomic
@io.k8s.api.core.v1.PodAntiAffinity
preferredDuringSchedulingIgnoredDuringExecution list=atomic
requiredDuringSchedulingIgnoredDuringExecution list=atomic
@io.k8s.api.core.v1.PodDNSConfig
nameservers list=atomic
options list=atomic
searches list=atomic
@io.k8s.api.core.v1.PodExtendedResourceClaimStatus
requestMappings list=atomic
@io.k8s.api.core.v1.PodSecurityContext
supplementalGroups list=atomic
sysctls list=atomic
@io.k8s.api.core.v1.PodSpec
containers patch=merge key=name list=map keys=name
ephemeralContainers patch=merge key=name list=map keys=name
hostAliases patch=merge key=ip list=map keys=ip
imagePullSecrets patch=merge key=name list=map keys=name
initContainers patch=merge key=name list=map keys=name
nodeSelector map=atomic
readinessGates list=atomic
resourceClaims patch=merge,retainKeys key=name list=map keys=name
schedulingGates patch=merge key=name list=map keys=name
tolerations list=atomic
topologySpreadConstraints patch=merge key=topologyKey list=map keys=topologyKey,whenUnsatisfiable
volumes patch=merge,retainKeys key=name list=map keys=name
@io.k8s.api.core.v1.PodStatus
conditions patch=merge key=type list=map keys=type
containerStatuses list=atomic
ephemeralContainerStatuses list=atomic
hostIPs patch=merge key=ip list=atomic
initContainerStatuses list=atomic
podIPs patch=merge key=ip list=map keys=ip
resourceClaimStatuses patch=merge,retainKeys key=name list=map keys=name
@io.k8s.api.core.v1.ProjectedVolumeSource
sources list=atomic
@io.k8s.api.core.v1.RBDPersistentVolumeSource
monitors list=atomic
@io.k8s.api.core.v1.RBDVolumeSource
monitors list=atomic
@io.k8s.api.core.v1.ReplicationControllerSpec
selector map=atomic
@io.k8s.api.core.v1.ReplicationControllerStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.core.v1.ResourceFieldSelector map=atomic
@io.k8s.api.core.v1.ResourceQuotaSpec
scopes list=atomic
@io.k8s.api.core.v1.ResourceRequirements
claims list=map keys=name
@io.k8s.api.core.v1.ResourceStatus
resources list=map keys=resourceID
@io.k8s.api.core.v1.ScopeSelector map=atomic
matchExpressions list=atomic
@io.k8s.api.core.v1.ScopedResourceSelectorRequirement
values list=atomic
@io.k8s.api.core.v1.SecretKeySelector map=atomic
@io.k8s.api.core.v1.SecretProjection
items list=atomic
@io.k8s.api.core.v1.SecretReference map=atomic
@io.k8s.api.core.v1.SecretVolumeSource
items list=atomic
@io.k8s.api.core.v1.ServiceAccount
imagePullSecrets list=atomic
secrets patch=merge key=name list=map keys=name
@io.k8s.api.core.v1.ServiceSpec
clusterIPs list=atomic
externalIPs list=atomic
ipFamilies list=atomic
loadBalancerSourceRanges list=atomic
ports patch=merge key=port list=map keys=port,protocol
selector map=atomic
@io.k8s.api.core.v1.ServiceStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.core.v1.TopologySelectorLabelRequirement
values list=atomic
@io.k8s.api.core.v1.TopologySelectorTerm map=atomic
matchLabelExpressions list=atomic
@io.k8s.api.core.v1.TopologySpreadConstraint
matchLabelKeys list=atomic
@io.k8s.api.core.v1.TypedLocalObjectReference map=atomic
@io.k8s.api.discovery.v1.Endpoint
addresses list=set
@io.k8s.api.discovery.v1.EndpointHints
forNodes list=atomic
forZones list=atomic
@io.k8s.api.discovery.v1.EndpointPort map=atomic
@io.k8s.api.discovery.v1.EndpointSlice
endpoints list=atomic
ports list=atomic
@io.k8s.api.networking.v1.HTTPIngressRuleValue
paths list=atomic
@io.k8s.api.networking.v1.IPBlock
except list=atomic
@io.k8s.api.networking.v1.IngressLoadBalancerIngress
ports list=atomic
@io.k8s.api.networking.v1.IngressLoadBalancerStatus
ingress list=atomic
@io.k8s.api.networking.v1.IngressSpec
rules list=atomic
tls list=atomic
@io.k8s.api.networking.v1.IngressTLS
hosts list=atomic
@io.k8s.api.networking.v1.NetworkPolicyEgressRule
ports list=atomic
to list=atomic
@io.k8s.api.networking.v1.NetworkPolicyIngressRule
from list=atomic
ports list=atomic
@io.k8s.api.networking.v1.NetworkPolicySpec
egress list=atomic
ingress list=atomic
policyTypes list=atomic
@io.k8s.api.networking.v1.ServiceBackendPort map=atomic
@io.k8s.api.networking.v1.ServiceCIDRSpec
cidrs list=atomic
@io.k8s.api.networking.v1.ServiceCIDRStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.node.v1.Scheduling
nodeSelector map=atomic
tolerations list=atomic
@io.k8s.api.policy.v1.PodDisruptionBudgetSpec
selector patch=replace
@io.k8s.api.policy.v1.PodDisruptionBudgetStatus
conditions patch=merge key=type list=map keys=type
@io.k8s.api.rbac.v1.AggregationRule
clusterRoleSelectors list=atomic
@io.k8s.api.rbac.v1.ClusterRole
rules list=atomic
@io.k8s.api.rbac.v1.ClusterRoleBinding
subjects list=atomic
@io.k8s.api.rbac.v1.PolicyRule
apiGroups list=atomic
nonResourceURLs list=atomic
resourceNames list=atomic
resources list=atomic
verbs list=atomic
@io.k8s.api.rbac.v1.Role
rules list=atomic
@io.k8s.api.rbac.v1.RoleBinding
subjects list=atomic
@io.k8s.api.rbac.v1.RoleRef map=atomic
@io.k8s.api.rbac.v1.Subject map=atomic
@io.k8s.api.storage.v1.CSIDriverSpec
tokenRequests list=atomic
volumeLifecycleModes list=set
@io.k8s.api.storage.v1.CSINodeDriver
topologyKeys list=atomic
@io.k8s.api.storage.v1.CSINodeSpec
drivers patch=merge key=name list=map keys=name
@io.k8s.api.storage.v1.StorageClass
allowedTopologies list=atomic
mountOptions list=atomic
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionNames
categories list=atomic
shortNames list=atomic
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec
versions list=atomic
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus
conditions list=map keys=type
storedVersions list=atomic
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion
additionalPrinterColumns list=atomic
selectableFields list=atomic
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps
allOf list=atomic
anyOf list=atomic
enum list=atomic
oneOf list=atomic
required list=atomic
x-kubernetes-list-map-keys list=atomic
x-kubernetes-validations patch=merge key=rule list=map keys=rule
@io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.WebhookConversion
conversionReviewVersions list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup
serverAddressByClientCIDRs list=atomic
versions list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList
groups list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.APIResource
categories list=atomic
shortNames list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList
resources list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions
serverAddressByClientCIDRs list=atomic
versions list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions
dryRun list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement
values list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector map=atomic
matchExpressions list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement
values list=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta
finalizers patch=merge list=set
managedFields list=atomic
ownerReferences patch=merge key=uid list=map keys=uid
@io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference map=atomic
@io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails
causes list=atomic
@io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec
caBundle list=atomic
@io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceStatus
conditions patch=merge key=type list=map keys=type
";

/// One `name=value` attribute as the extension it stands for.
fn extension(attribute: &str) -> Option<(&'static str, Value)> {
    let (name, value) = attribute.split_once('=')?;
    Some(match name {
        "patch" => ("x-kubernetes-patch-strategy", value.into()),
        "key" => ("x-kubernetes-patch-merge-key", value.into()),
        "list" => ("x-kubernetes-list-type", value.into()),
        "keys" => ("x-kubernetes-list-map-keys", value.split(',').map(Value::from).collect()),
        "map" => ("x-kubernetes-map-type", value.into()),
        _ => return None,
    })
}

/// Every table line as (definition, property or `None` for the definition itself, extensions).
fn entries() -> impl Iterator<Item = (&'static str, Option<&'static str>, Vec<(&'static str, Value)>)> {
    let mut definition = "";
    TABLE.lines().filter_map(move |line| {
        let mut tokens = line.split_whitespace();
        let first = tokens.next()?;
        let extensions = tokens.filter_map(extension).collect();
        match first.strip_prefix('@') {
            Some(name) => {
                definition = name;
                Some((name, None, extensions))
            }
            None => Some((definition, Some(first), extensions)),
        }
    })
}

/// Adds the table's extensions to the schemas; entries naming an absent definition or property
/// are skipped.
pub(super) fn apply(schemas: &mut Map<String, Value>) {
    for (definition, field, extensions) in entries() {
        let Some(Value::Object(def)) = schemas.get_mut(definition) else { continue };
        let target = match field {
            None => def,
            Some(field) => match def.get_mut("properties").and_then(|p| p.get_mut(field)) {
                Some(Value::Object(property)) => property,
                _ => continue,
            },
        };
        for (name, value) in extensions {
            target.insert(name.into(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_line_parses_into_known_extensions() {
        for line in TABLE.lines() {
            let attributes: Vec<&str> = line.split_whitespace().skip(1).collect();
            assert!(line.starts_with('@') || !attributes.is_empty(), "line without attributes: {line}");
            for a in attributes {
                assert!(extension(a).is_some(), "unknown attribute {a} in {line}");
            }
        }
    }

    #[test]
    fn every_table_entry_names_a_served_definition_and_property() {
        let registry = super::super::registry::Registry::build();
        for (definition, field, _) in entries() {
            let def = registry.schemas.get(definition);
            assert!(def.is_some(), "unknown definition {definition}");
            if let (Some(def), Some(field)) = (def, field) {
                assert!(def.pointer(&format!("/properties/{field}")).is_some(), "unknown field {definition}.{field}");
            }
        }
    }
}
