//! Message descriptors for the Kubernetes kinds whose protobuf request bodies k1s decodes.
//!
//! Derived from upstream `generated.proto` (field numbers, wire types) and `types.go` (JSON names, Go
//! struct order, pointer-ness and `omitempty`) of `k8s.io/api` and `k8s.io/apimachinery` v0.35.
//! One line per field: `f(number, json name, type, presence)`; see [`super::Pres`] for the presence rules.
//! Fields are listed in Go struct order so the decoded JSON has upstream's key order.

use super::Pres::{Inline, Null, Omit, Ptr, Val};
use super::Ty::{Bool, Bytes, IntOrString, List, Map, MicroTime, Msg, Quantity, Raw, Str, StrList, Time, I32, I64};
use super::{f, Fields};

/// The root message for `(apiVersion, kind)`, if supported. `DeleteOptions` is accepted under any
/// apiVersion: upstream registers it in every group version as well as in `meta.k8s.io/v1`.
pub(super) fn root(api_version: &str, kind: &str) -> Option<Fields> {
    if kind == "DeleteOptions" {
        return Some(DELETE_OPTIONS);
    }
    KINDS.iter().find(|(v, k, _)| *v == api_version && *k == kind).map(|(_, _, fields)| *fields)
}

/// The root message of each supported `(apiVersion, kind)` besides `DeleteOptions`.
const KINDS: &[(&str, &str, Fields)] = &[
    ("v1", "Namespace", NAMESPACE),
    ("v1", "ConfigMap", CONFIG_MAP),
    ("v1", "Secret", SECRET),
    ("v1", "Service", SERVICE),
    ("v1", "Pod", POD),
    ("v1", "ServiceAccount", SERVICE_ACCOUNT),
    ("v1", "ResourceQuota", RESOURCE_QUOTA),
    ("v1", "Binding", BINDING),
    ("v1", "PersistentVolumeClaim", PERSISTENT_VOLUME_CLAIM),
    ("v1", "Event", EVENT),
    ("v1", "PodTemplate", POD_TEMPLATE),
    ("v1", "ReplicationController", REPLICATION_CONTROLLER),
    ("v1", "LimitRange", LIMIT_RANGE),
    ("apps/v1", "Deployment", DEPLOYMENT),
    ("apps/v1", "ReplicaSet", REPLICA_SET),
    ("apps/v1", "StatefulSet", STATEFUL_SET),
    ("apps/v1", "DaemonSet", DAEMON_SET),
    ("batch/v1", "Job", JOB),
    ("batch/v1", "CronJob", CRON_JOB),
    ("autoscaling/v1", "Scale", SCALE),
    ("autoscaling/v1", "HorizontalPodAutoscaler", HORIZONTAL_POD_AUTOSCALER),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", SELF_SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", SELF_SUBJECT_RULES_REVIEW),
    ("authorization.k8s.io/v1", "SubjectAccessReview", SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", LOCAL_SUBJECT_ACCESS_REVIEW),
    ("authentication.k8s.io/v1", "SelfSubjectReview", SELF_SUBJECT_REVIEW),
    ("authentication.k8s.io/v1", "TokenRequest", TOKEN_REQUEST),
    ("authentication.k8s.io/v1", "TokenReview", TOKEN_REVIEW),
    ("policy/v1", "Eviction", EVICTION),
    ("policy/v1", "PodDisruptionBudget", POD_DISRUPTION_BUDGET),
    ("rbac.authorization.k8s.io/v1", "Role", ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", ROLE_BINDING),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", CLUSTER_ROLE_BINDING),
    ("networking.k8s.io/v1", "Ingress", INGRESS),
    ("scheduling.k8s.io/v1", "PriorityClass", PRIORITY_CLASS),
];

/// `k8s.io.api.core.v1.Namespace`
const NAMESPACE: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(NAMESPACE_SPEC), Val),
    f(3, "status", Msg(NAMESPACE_STATUS), Val),
];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta`
const OBJECT_META: Fields = &[
    f(1, "name", Str, Omit),
    f(2, "generateName", Str, Omit),
    f(3, "namespace", Str, Omit),
    f(4, "selfLink", Str, Omit),
    f(5, "uid", Str, Omit),
    f(6, "resourceVersion", Str, Omit),
    f(7, "generation", I64, Omit),
    f(8, "creationTimestamp", Time, Val),
    f(9, "deletionTimestamp", Time, Ptr),
    f(10, "deletionGracePeriodSeconds", I64, Ptr),
    f(11, "labels", Map(&Str), Omit),
    f(12, "annotations", Map(&Str), Omit),
    f(13, "ownerReferences", List(&Msg(OWNER_REFERENCE)), Omit),
    f(14, "finalizers", List(&Str), Omit),
    f(17, "managedFields", List(&Msg(MANAGED_FIELDS_ENTRY)), Omit),
];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.OwnerReference`
const OWNER_REFERENCE: Fields = &[
    f(5, "apiVersion", Str, Val),
    f(1, "kind", Str, Val),
    f(3, "name", Str, Val),
    f(4, "uid", Str, Val),
    f(6, "controller", Bool, Ptr),
    f(7, "blockOwnerDeletion", Bool, Ptr),
];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry`
const MANAGED_FIELDS_ENTRY: Fields = &[
    f(1, "manager", Str, Omit),
    f(2, "operation", Str, Omit),
    f(3, "apiVersion", Str, Omit),
    f(4, "time", Time, Ptr),
    f(6, "fieldsType", Str, Omit),
    f(7, "fieldsV1", Raw, Ptr),
    f(8, "subresource", Str, Omit),
];

/// `k8s.io.api.core.v1.NamespaceSpec`
const NAMESPACE_SPEC: Fields = &[f(1, "finalizers", List(&Str), Omit)];

/// `k8s.io.api.core.v1.NamespaceStatus`
const NAMESPACE_STATUS: Fields = &[f(1, "phase", Str, Omit), f(2, "conditions", List(&Msg(NAMESPACE_CONDITION)), Omit)];

/// `k8s.io.api.core.v1.NamespaceCondition`
const NAMESPACE_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(4, "lastTransitionTime", Time, Val),
    f(5, "reason", Str, Omit),
    f(6, "message", Str, Omit),
];

/// `k8s.io.api.core.v1.ConfigMap`
const CONFIG_MAP: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(4, "immutable", Bool, Ptr),
    f(2, "data", Map(&Str), Omit),
    f(3, "binaryData", Map(&Bytes), Omit),
];

/// `k8s.io.api.core.v1.Secret`
const SECRET: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(5, "immutable", Bool, Ptr),
    f(2, "data", Map(&Bytes), Omit),
    f(4, "stringData", Map(&Str), Omit),
    f(3, "type", Str, Omit),
];

/// `k8s.io.api.core.v1.Service`
const SERVICE: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SERVICE_SPEC), Val),
    f(3, "status", Msg(SERVICE_STATUS), Val),
];

/// `k8s.io.api.core.v1.ServiceSpec`
const SERVICE_SPEC: Fields = &[
    f(1, "ports", List(&Msg(SERVICE_PORT)), Omit),
    f(2, "selector", Map(&Str), Omit),
    f(3, "clusterIP", Str, Omit),
    f(18, "clusterIPs", List(&Str), Omit),
    f(4, "type", Str, Omit),
    f(5, "externalIPs", List(&Str), Omit),
    f(7, "sessionAffinity", Str, Omit),
    f(8, "loadBalancerIP", Str, Omit),
    f(9, "loadBalancerSourceRanges", List(&Str), Omit),
    f(10, "externalName", Str, Omit),
    f(11, "externalTrafficPolicy", Str, Omit),
    f(12, "healthCheckNodePort", I32, Omit),
    f(13, "publishNotReadyAddresses", Bool, Omit),
    f(14, "sessionAffinityConfig", Msg(SESSION_AFFINITY_CONFIG), Ptr),
    f(19, "ipFamilies", List(&Str), Omit),
    f(17, "ipFamilyPolicy", Str, Ptr),
    f(20, "allocateLoadBalancerNodePorts", Bool, Ptr),
    f(21, "loadBalancerClass", Str, Ptr),
    f(22, "internalTrafficPolicy", Str, Ptr),
    f(23, "trafficDistribution", Str, Ptr),
];

/// `k8s.io.api.core.v1.ServicePort`
const SERVICE_PORT: Fields = &[
    f(1, "name", Str, Omit),
    f(2, "protocol", Str, Omit),
    f(6, "appProtocol", Str, Ptr),
    f(3, "port", I32, Val),
    f(4, "targetPort", IntOrString, Val),
    f(5, "nodePort", I32, Omit),
];

/// `k8s.io.api.core.v1.SessionAffinityConfig`
const SESSION_AFFINITY_CONFIG: Fields = &[f(1, "clientIP", Msg(CLIENT_IP_CONFIG), Ptr)];

/// `k8s.io.api.core.v1.ClientIPConfig`
const CLIENT_IP_CONFIG: Fields = &[f(1, "timeoutSeconds", I32, Ptr)];

/// `k8s.io.api.core.v1.ServiceStatus`
const SERVICE_STATUS: Fields =
    &[f(1, "loadBalancer", Msg(LOAD_BALANCER_STATUS), Val), f(2, "conditions", List(&Msg(CONDITION)), Omit)];

/// `k8s.io.api.core.v1.LoadBalancerStatus`
const LOAD_BALANCER_STATUS: Fields = &[f(1, "ingress", List(&Msg(LOAD_BALANCER_INGRESS)), Omit)];

/// `k8s.io.api.core.v1.LoadBalancerIngress`
const LOAD_BALANCER_INGRESS: Fields = &[
    f(1, "ip", Str, Omit),
    f(2, "hostname", Str, Omit),
    f(3, "ipMode", Str, Ptr),
    f(4, "ports", List(&Msg(PORT_STATUS)), Omit),
];

/// `k8s.io.api.core.v1.PortStatus`
const PORT_STATUS: Fields = &[f(1, "port", I32, Val), f(2, "protocol", Str, Val), f(3, "error", Str, Ptr)];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.Condition`
const CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "observedGeneration", I64, Omit),
    f(4, "lastTransitionTime", Time, Val),
    f(5, "reason", Str, Val),
    f(6, "message", Str, Val),
];

/// `k8s.io.api.core.v1.Pod`
const POD: Fields =
    &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(POD_SPEC), Val), f(3, "status", Msg(POD_STATUS), Val)];

/// `k8s.io.api.core.v1.PodSpec`
const POD_SPEC: Fields = &[
    f(1, "volumes", List(&Msg(VOLUME)), Omit),
    f(20, "initContainers", List(&Msg(CONTAINER)), Omit),
    f(2, "containers", List(&Msg(CONTAINER)), Null),
    f(34, "ephemeralContainers", List(&Msg(EPHEMERAL_CONTAINER)), Omit),
    f(3, "restartPolicy", Str, Omit),
    f(4, "terminationGracePeriodSeconds", I64, Ptr),
    f(5, "activeDeadlineSeconds", I64, Ptr),
    f(6, "dnsPolicy", Str, Omit),
    f(7, "nodeSelector", Map(&Str), Omit),
    f(8, "serviceAccountName", Str, Omit),
    f(9, "serviceAccount", Str, Omit),
    f(21, "automountServiceAccountToken", Bool, Ptr),
    f(10, "nodeName", Str, Omit),
    f(11, "hostNetwork", Bool, Omit),
    f(12, "hostPID", Bool, Omit),
    f(13, "hostIPC", Bool, Omit),
    f(27, "shareProcessNamespace", Bool, Ptr),
    f(14, "securityContext", Msg(POD_SECURITY_CONTEXT), Ptr),
    f(15, "imagePullSecrets", List(&Msg(LOCAL_OBJECT_REFERENCE)), Omit),
    f(16, "hostname", Str, Omit),
    f(17, "subdomain", Str, Omit),
    f(18, "affinity", Msg(AFFINITY), Ptr),
    f(19, "schedulerName", Str, Omit),
    f(22, "tolerations", List(&Msg(TOLERATION)), Omit),
    f(23, "hostAliases", List(&Msg(HOST_ALIAS)), Omit),
    f(24, "priorityClassName", Str, Omit),
    f(25, "priority", I32, Ptr),
    f(26, "dnsConfig", Msg(POD_DNS_CONFIG), Ptr),
    f(28, "readinessGates", List(&Msg(POD_READINESS_GATE)), Omit),
    f(29, "runtimeClassName", Str, Ptr),
    f(30, "enableServiceLinks", Bool, Ptr),
    f(31, "preemptionPolicy", Str, Ptr),
    f(32, "overhead", Map(&Quantity), Omit),
    f(33, "topologySpreadConstraints", List(&Msg(TOPOLOGY_SPREAD_CONSTRAINT)), Omit),
    f(35, "setHostnameAsFQDN", Bool, Ptr),
    f(36, "os", Msg(POD_OS), Ptr),
    f(37, "hostUsers", Bool, Ptr),
    f(38, "schedulingGates", List(&Msg(POD_SCHEDULING_GATE)), Omit),
    f(39, "resourceClaims", List(&Msg(POD_RESOURCE_CLAIM)), Omit),
    f(40, "resources", Msg(RESOURCE_REQUIREMENTS), Ptr),
    f(41, "hostnameOverride", Str, Ptr),
    f(42, "workloadRef", Msg(WORKLOAD_REFERENCE), Ptr),
];

/// `k8s.io.api.core.v1.Volume`
const VOLUME: Fields = &[f(1, "name", Str, Val), f(2, "", Msg(VOLUME_SOURCE), Inline)];

/// `k8s.io.api.core.v1.VolumeSource`
const VOLUME_SOURCE: Fields = &[
    f(1, "hostPath", Msg(HOST_PATH_VOLUME_SOURCE), Ptr),
    f(2, "emptyDir", Msg(EMPTY_DIR_VOLUME_SOURCE), Ptr),
    f(3, "gcePersistentDisk", Msg(GCE_PERSISTENT_DISK_VOLUME_SOURCE), Ptr),
    f(4, "awsElasticBlockStore", Msg(AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE), Ptr),
    f(5, "gitRepo", Msg(GIT_REPO_VOLUME_SOURCE), Ptr),
    f(6, "secret", Msg(SECRET_VOLUME_SOURCE), Ptr),
    f(7, "nfs", Msg(NFS_VOLUME_SOURCE), Ptr),
    f(8, "iscsi", Msg(ISCSI_VOLUME_SOURCE), Ptr),
    f(9, "glusterfs", Msg(GLUSTERFS_VOLUME_SOURCE), Ptr),
    f(10, "persistentVolumeClaim", Msg(PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE), Ptr),
    f(11, "rbd", Msg(RBD_VOLUME_SOURCE), Ptr),
    f(12, "flexVolume", Msg(FLEX_VOLUME_SOURCE), Ptr),
    f(13, "cinder", Msg(CINDER_VOLUME_SOURCE), Ptr),
    f(14, "cephfs", Msg(CEPH_FS_VOLUME_SOURCE), Ptr),
    f(15, "flocker", Msg(FLOCKER_VOLUME_SOURCE), Ptr),
    f(16, "downwardAPI", Msg(DOWNWARD_API_VOLUME_SOURCE), Ptr),
    f(17, "fc", Msg(FC_VOLUME_SOURCE), Ptr),
    f(18, "azureFile", Msg(AZURE_FILE_VOLUME_SOURCE), Ptr),
    f(19, "configMap", Msg(CONFIG_MAP_VOLUME_SOURCE), Ptr),
    f(20, "vsphereVolume", Msg(VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE), Ptr),
    f(21, "quobyte", Msg(QUOBYTE_VOLUME_SOURCE), Ptr),
    f(22, "azureDisk", Msg(AZURE_DISK_VOLUME_SOURCE), Ptr),
    f(23, "photonPersistentDisk", Msg(PHOTON_PERSISTENT_DISK_VOLUME_SOURCE), Ptr),
    f(26, "projected", Msg(PROJECTED_VOLUME_SOURCE), Ptr),
    f(24, "portworxVolume", Msg(PORTWORX_VOLUME_SOURCE), Ptr),
    f(25, "scaleIO", Msg(SCALE_IO_VOLUME_SOURCE), Ptr),
    f(27, "storageos", Msg(STORAGE_OS_VOLUME_SOURCE), Ptr),
    f(28, "csi", Msg(CSI_VOLUME_SOURCE), Ptr),
    f(29, "ephemeral", Msg(EPHEMERAL_VOLUME_SOURCE), Ptr),
    f(30, "image", Msg(IMAGE_VOLUME_SOURCE), Ptr),
];

/// `k8s.io.api.core.v1.HostPathVolumeSource`
const HOST_PATH_VOLUME_SOURCE: Fields = &[f(1, "path", Str, Val), f(2, "type", Str, Ptr)];

/// `k8s.io.api.core.v1.EmptyDirVolumeSource`
const EMPTY_DIR_VOLUME_SOURCE: Fields = &[f(1, "medium", Str, Omit), f(2, "sizeLimit", Quantity, Ptr)];

/// `k8s.io.api.core.v1.GCEPersistentDiskVolumeSource`
const GCE_PERSISTENT_DISK_VOLUME_SOURCE: Fields =
    &[f(1, "pdName", Str, Val), f(2, "fsType", Str, Omit), f(3, "partition", I32, Omit), f(4, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.AWSElasticBlockStoreVolumeSource`
const AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Fields = &[
    f(1, "volumeID", Str, Val),
    f(2, "fsType", Str, Omit),
    f(3, "partition", I32, Omit),
    f(4, "readOnly", Bool, Omit),
];

/// `k8s.io.api.core.v1.GitRepoVolumeSource`
const GIT_REPO_VOLUME_SOURCE: Fields =
    &[f(1, "repository", Str, Val), f(2, "revision", Str, Omit), f(3, "directory", Str, Omit)];

/// `k8s.io.api.core.v1.SecretVolumeSource`
const SECRET_VOLUME_SOURCE: Fields = &[
    f(1, "secretName", Str, Omit),
    f(2, "items", List(&Msg(KEY_TO_PATH)), Omit),
    f(3, "defaultMode", I32, Ptr),
    f(4, "optional", Bool, Ptr),
];

/// `k8s.io.api.core.v1.KeyToPath`
const KEY_TO_PATH: Fields = &[f(1, "key", Str, Val), f(2, "path", Str, Val), f(3, "mode", I32, Ptr)];

/// `k8s.io.api.core.v1.NFSVolumeSource`
const NFS_VOLUME_SOURCE: Fields = &[f(1, "server", Str, Val), f(2, "path", Str, Val), f(3, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.ISCSIVolumeSource`
const ISCSI_VOLUME_SOURCE: Fields = &[
    f(1, "targetPortal", Str, Val),
    f(2, "iqn", Str, Val),
    f(3, "lun", I32, Val),
    f(4, "iscsiInterface", Str, Omit),
    f(5, "fsType", Str, Omit),
    f(6, "readOnly", Bool, Omit),
    f(7, "portals", List(&Str), Omit),
    f(8, "chapAuthDiscovery", Bool, Omit),
    f(11, "chapAuthSession", Bool, Omit),
    f(10, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
    f(12, "initiatorName", Str, Ptr),
];

/// `k8s.io.api.core.v1.LocalObjectReference`
const LOCAL_OBJECT_REFERENCE: Fields = &[f(1, "name", Str, Omit)];

/// `k8s.io.api.core.v1.GlusterfsVolumeSource`
const GLUSTERFS_VOLUME_SOURCE: Fields =
    &[f(1, "endpoints", Str, Val), f(2, "path", Str, Val), f(3, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.PersistentVolumeClaimVolumeSource`
const PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Fields = &[f(1, "claimName", Str, Val), f(2, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.RBDVolumeSource`
const RBD_VOLUME_SOURCE: Fields = &[
    f(1, "monitors", List(&Str), Null),
    f(2, "image", Str, Val),
    f(3, "fsType", Str, Omit),
    f(4, "pool", Str, Omit),
    f(5, "user", Str, Omit),
    f(6, "keyring", Str, Omit),
    f(7, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
    f(8, "readOnly", Bool, Omit),
];

/// `k8s.io.api.core.v1.FlexVolumeSource`
const FLEX_VOLUME_SOURCE: Fields = &[
    f(1, "driver", Str, Val),
    f(2, "fsType", Str, Omit),
    f(3, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
    f(4, "readOnly", Bool, Omit),
    f(5, "options", Map(&Str), Omit),
];

/// `k8s.io.api.core.v1.CinderVolumeSource`
const CINDER_VOLUME_SOURCE: Fields = &[
    f(1, "volumeID", Str, Val),
    f(2, "fsType", Str, Omit),
    f(3, "readOnly", Bool, Omit),
    f(4, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
];

/// `k8s.io.api.core.v1.CephFSVolumeSource`
const CEPH_FS_VOLUME_SOURCE: Fields = &[
    f(1, "monitors", List(&Str), Null),
    f(2, "path", Str, Omit),
    f(3, "user", Str, Omit),
    f(4, "secretFile", Str, Omit),
    f(5, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
    f(6, "readOnly", Bool, Omit),
];

/// `k8s.io.api.core.v1.FlockerVolumeSource`
const FLOCKER_VOLUME_SOURCE: Fields = &[f(1, "datasetName", Str, Omit), f(2, "datasetUUID", Str, Omit)];

/// `k8s.io.api.core.v1.DownwardAPIVolumeSource`
const DOWNWARD_API_VOLUME_SOURCE: Fields =
    &[f(1, "items", List(&Msg(DOWNWARD_API_VOLUME_FILE)), Omit), f(2, "defaultMode", I32, Ptr)];

/// `k8s.io.api.core.v1.DownwardAPIVolumeFile`
const DOWNWARD_API_VOLUME_FILE: Fields = &[
    f(1, "path", Str, Val),
    f(2, "fieldRef", Msg(OBJECT_FIELD_SELECTOR), Ptr),
    f(3, "resourceFieldRef", Msg(RESOURCE_FIELD_SELECTOR), Ptr),
    f(4, "mode", I32, Ptr),
];

/// `k8s.io.api.core.v1.ObjectFieldSelector`
const OBJECT_FIELD_SELECTOR: Fields = &[f(1, "apiVersion", Str, Omit), f(2, "fieldPath", Str, Val)];

/// `k8s.io.api.core.v1.ResourceFieldSelector`
const RESOURCE_FIELD_SELECTOR: Fields =
    &[f(1, "containerName", Str, Omit), f(2, "resource", Str, Val), f(3, "divisor", Quantity, Val)];

/// `k8s.io.api.core.v1.FCVolumeSource`
const FC_VOLUME_SOURCE: Fields = &[
    f(1, "targetWWNs", List(&Str), Omit),
    f(2, "lun", I32, Ptr),
    f(3, "fsType", Str, Omit),
    f(4, "readOnly", Bool, Omit),
    f(5, "wwids", List(&Str), Omit),
];

/// `k8s.io.api.core.v1.AzureFileVolumeSource`
const AZURE_FILE_VOLUME_SOURCE: Fields =
    &[f(1, "secretName", Str, Val), f(2, "shareName", Str, Val), f(3, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.ConfigMapVolumeSource`
const CONFIG_MAP_VOLUME_SOURCE: Fields = &[
    f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline),
    f(2, "items", List(&Msg(KEY_TO_PATH)), Omit),
    f(3, "defaultMode", I32, Ptr),
    f(4, "optional", Bool, Ptr),
];

/// `k8s.io.api.core.v1.VsphereVirtualDiskVolumeSource`
const VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Fields = &[
    f(1, "volumePath", Str, Val),
    f(2, "fsType", Str, Omit),
    f(3, "storagePolicyName", Str, Omit),
    f(4, "storagePolicyID", Str, Omit),
];

/// `k8s.io.api.core.v1.QuobyteVolumeSource`
const QUOBYTE_VOLUME_SOURCE: Fields = &[
    f(1, "registry", Str, Val),
    f(2, "volume", Str, Val),
    f(3, "readOnly", Bool, Omit),
    f(4, "user", Str, Omit),
    f(5, "group", Str, Omit),
    f(6, "tenant", Str, Omit),
];

/// `k8s.io.api.core.v1.AzureDiskVolumeSource`
const AZURE_DISK_VOLUME_SOURCE: Fields = &[
    f(1, "diskName", Str, Val),
    f(2, "diskURI", Str, Val),
    f(3, "cachingMode", Str, Ptr),
    f(4, "fsType", Str, Ptr),
    f(5, "readOnly", Bool, Ptr),
    f(6, "kind", Str, Ptr),
];

/// `k8s.io.api.core.v1.PhotonPersistentDiskVolumeSource`
const PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Fields = &[f(1, "pdID", Str, Val), f(2, "fsType", Str, Omit)];

/// `k8s.io.api.core.v1.ProjectedVolumeSource`
const PROJECTED_VOLUME_SOURCE: Fields =
    &[f(1, "sources", List(&Msg(VOLUME_PROJECTION)), Null), f(2, "defaultMode", I32, Ptr)];

/// `k8s.io.api.core.v1.VolumeProjection`
const VOLUME_PROJECTION: Fields = &[
    f(1, "secret", Msg(SECRET_PROJECTION), Ptr),
    f(2, "downwardAPI", Msg(DOWNWARD_API_PROJECTION), Ptr),
    f(3, "configMap", Msg(CONFIG_MAP_PROJECTION), Ptr),
    f(4, "serviceAccountToken", Msg(SERVICE_ACCOUNT_TOKEN_PROJECTION), Ptr),
    f(5, "clusterTrustBundle", Msg(CLUSTER_TRUST_BUNDLE_PROJECTION), Ptr),
    f(6, "podCertificate", Msg(POD_CERTIFICATE_PROJECTION), Ptr),
];

/// `k8s.io.api.core.v1.SecretProjection`
const SECRET_PROJECTION: Fields = &[
    f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline),
    f(2, "items", List(&Msg(KEY_TO_PATH)), Omit),
    f(4, "optional", Bool, Ptr),
];

/// `k8s.io.api.core.v1.DownwardAPIProjection`
const DOWNWARD_API_PROJECTION: Fields = &[f(1, "items", List(&Msg(DOWNWARD_API_VOLUME_FILE)), Omit)];

/// `k8s.io.api.core.v1.ConfigMapProjection`
const CONFIG_MAP_PROJECTION: Fields = &[
    f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline),
    f(2, "items", List(&Msg(KEY_TO_PATH)), Omit),
    f(4, "optional", Bool, Ptr),
];

/// `k8s.io.api.core.v1.ServiceAccountTokenProjection`
const SERVICE_ACCOUNT_TOKEN_PROJECTION: Fields =
    &[f(1, "audience", Str, Omit), f(2, "expirationSeconds", I64, Ptr), f(3, "path", Str, Val)];

/// `k8s.io.api.core.v1.ClusterTrustBundleProjection`
const CLUSTER_TRUST_BUNDLE_PROJECTION: Fields = &[
    f(1, "name", Str, Ptr),
    f(2, "signerName", Str, Ptr),
    f(3, "labelSelector", Msg(LABEL_SELECTOR), Ptr),
    f(5, "optional", Bool, Ptr),
    f(4, "path", Str, Val),
];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector`
const LABEL_SELECTOR: Fields =
    &[f(1, "matchLabels", Map(&Str), Omit), f(2, "matchExpressions", List(&Msg(LABEL_SELECTOR_REQUIREMENT)), Omit)];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement`
const LABEL_SELECTOR_REQUIREMENT: Fields =
    &[f(1, "key", Str, Val), f(2, "operator", Str, Val), f(3, "values", List(&Str), Omit)];

/// `k8s.io.api.core.v1.PodCertificateProjection`
const POD_CERTIFICATE_PROJECTION: Fields = &[
    f(1, "signerName", Str, Omit),
    f(2, "keyType", Str, Omit),
    f(3, "maxExpirationSeconds", I32, Ptr),
    f(4, "credentialBundlePath", Str, Omit),
    f(5, "keyPath", Str, Omit),
    f(6, "certificateChainPath", Str, Omit),
    f(7, "userAnnotations", Map(&Str), Omit),
];

/// `k8s.io.api.core.v1.PortworxVolumeSource`
const PORTWORX_VOLUME_SOURCE: Fields =
    &[f(1, "volumeID", Str, Val), f(2, "fsType", Str, Omit), f(3, "readOnly", Bool, Omit)];

/// `k8s.io.api.core.v1.ScaleIOVolumeSource`
const SCALE_IO_VOLUME_SOURCE: Fields = &[
    f(1, "gateway", Str, Val),
    f(2, "system", Str, Val),
    f(3, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
    f(4, "sslEnabled", Bool, Omit),
    f(5, "protectionDomain", Str, Omit),
    f(6, "storagePool", Str, Omit),
    f(7, "storageMode", Str, Omit),
    f(8, "volumeName", Str, Omit),
    f(9, "fsType", Str, Omit),
    f(10, "readOnly", Bool, Omit),
];

/// `k8s.io.api.core.v1.StorageOSVolumeSource`
const STORAGE_OS_VOLUME_SOURCE: Fields = &[
    f(1, "volumeName", Str, Omit),
    f(2, "volumeNamespace", Str, Omit),
    f(3, "fsType", Str, Omit),
    f(4, "readOnly", Bool, Omit),
    f(5, "secretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
];

/// `k8s.io.api.core.v1.CSIVolumeSource`
const CSI_VOLUME_SOURCE: Fields = &[
    f(1, "driver", Str, Val),
    f(2, "readOnly", Bool, Ptr),
    f(3, "fsType", Str, Ptr),
    f(4, "volumeAttributes", Map(&Str), Omit),
    f(5, "nodePublishSecretRef", Msg(LOCAL_OBJECT_REFERENCE), Ptr),
];

/// `k8s.io.api.core.v1.EphemeralVolumeSource`
const EPHEMERAL_VOLUME_SOURCE: Fields = &[f(1, "volumeClaimTemplate", Msg(PERSISTENT_VOLUME_CLAIM_TEMPLATE), Ptr)];

/// `k8s.io.api.core.v1.PersistentVolumeClaimTemplate`
const PERSISTENT_VOLUME_CLAIM_TEMPLATE: Fields =
    &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(PERSISTENT_VOLUME_CLAIM_SPEC), Val)];

/// `k8s.io.api.core.v1.PersistentVolumeClaimSpec`
const PERSISTENT_VOLUME_CLAIM_SPEC: Fields = &[
    f(1, "accessModes", List(&Str), Omit),
    f(4, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(2, "resources", Msg(VOLUME_RESOURCE_REQUIREMENTS), Val),
    f(3, "volumeName", Str, Omit),
    f(5, "storageClassName", Str, Ptr),
    f(6, "volumeMode", Str, Ptr),
    f(7, "dataSource", Msg(TYPED_LOCAL_OBJECT_REFERENCE), Ptr),
    f(8, "dataSourceRef", Msg(TYPED_OBJECT_REFERENCE), Ptr),
    f(9, "volumeAttributesClassName", Str, Ptr),
];

/// `k8s.io.api.core.v1.VolumeResourceRequirements`
const VOLUME_RESOURCE_REQUIREMENTS: Fields =
    &[f(1, "limits", Map(&Quantity), Omit), f(2, "requests", Map(&Quantity), Omit)];

/// `k8s.io.api.core.v1.TypedLocalObjectReference`
const TYPED_LOCAL_OBJECT_REFERENCE: Fields =
    &[f(1, "apiGroup", Str, Ptr), f(2, "kind", Str, Val), f(3, "name", Str, Val)];

/// `k8s.io.api.core.v1.TypedObjectReference`
const TYPED_OBJECT_REFERENCE: Fields =
    &[f(1, "apiGroup", Str, Ptr), f(2, "kind", Str, Val), f(3, "name", Str, Val), f(4, "namespace", Str, Ptr)];

/// `k8s.io.api.core.v1.ImageVolumeSource`
const IMAGE_VOLUME_SOURCE: Fields = &[f(1, "reference", Str, Omit), f(2, "pullPolicy", Str, Omit)];

/// `k8s.io.api.core.v1.Container`
const CONTAINER: Fields = &[
    f(1, "name", Str, Val),
    f(2, "image", Str, Omit),
    f(3, "command", List(&Str), Omit),
    f(4, "args", List(&Str), Omit),
    f(5, "workingDir", Str, Omit),
    f(6, "ports", List(&Msg(CONTAINER_PORT)), Omit),
    f(19, "envFrom", List(&Msg(ENV_FROM_SOURCE)), Omit),
    f(7, "env", List(&Msg(ENV_VAR)), Omit),
    f(8, "resources", Msg(RESOURCE_REQUIREMENTS), Val),
    f(23, "resizePolicy", List(&Msg(CONTAINER_RESIZE_POLICY)), Omit),
    f(24, "restartPolicy", Str, Ptr),
    f(25, "restartPolicyRules", List(&Msg(CONTAINER_RESTART_RULE)), Omit),
    f(9, "volumeMounts", List(&Msg(VOLUME_MOUNT)), Omit),
    f(21, "volumeDevices", List(&Msg(VOLUME_DEVICE)), Omit),
    f(10, "livenessProbe", Msg(PROBE), Ptr),
    f(11, "readinessProbe", Msg(PROBE), Ptr),
    f(22, "startupProbe", Msg(PROBE), Ptr),
    f(12, "lifecycle", Msg(LIFECYCLE), Ptr),
    f(13, "terminationMessagePath", Str, Omit),
    f(20, "terminationMessagePolicy", Str, Omit),
    f(14, "imagePullPolicy", Str, Omit),
    f(15, "securityContext", Msg(SECURITY_CONTEXT), Ptr),
    f(16, "stdin", Bool, Omit),
    f(17, "stdinOnce", Bool, Omit),
    f(18, "tty", Bool, Omit),
];

/// `k8s.io.api.core.v1.ContainerPort`
const CONTAINER_PORT: Fields = &[
    f(1, "name", Str, Omit),
    f(2, "hostPort", I32, Omit),
    f(3, "containerPort", I32, Val),
    f(4, "protocol", Str, Omit),
    f(5, "hostIP", Str, Omit),
];

/// `k8s.io.api.core.v1.EnvFromSource`
const ENV_FROM_SOURCE: Fields = &[
    f(1, "prefix", Str, Omit),
    f(2, "configMapRef", Msg(CONFIG_MAP_ENV_SOURCE), Ptr),
    f(3, "secretRef", Msg(SECRET_ENV_SOURCE), Ptr),
];

/// `k8s.io.api.core.v1.ConfigMapEnvSource`
const CONFIG_MAP_ENV_SOURCE: Fields = &[f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline), f(2, "optional", Bool, Ptr)];

/// `k8s.io.api.core.v1.SecretEnvSource`
const SECRET_ENV_SOURCE: Fields = &[f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline), f(2, "optional", Bool, Ptr)];

/// `k8s.io.api.core.v1.EnvVar`
const ENV_VAR: Fields =
    &[f(1, "name", Str, Val), f(2, "value", Str, Omit), f(3, "valueFrom", Msg(ENV_VAR_SOURCE), Ptr)];

/// `k8s.io.api.core.v1.EnvVarSource`
const ENV_VAR_SOURCE: Fields = &[
    f(1, "fieldRef", Msg(OBJECT_FIELD_SELECTOR), Ptr),
    f(2, "resourceFieldRef", Msg(RESOURCE_FIELD_SELECTOR), Ptr),
    f(3, "configMapKeyRef", Msg(CONFIG_MAP_KEY_SELECTOR), Ptr),
    f(4, "secretKeyRef", Msg(SECRET_KEY_SELECTOR), Ptr),
    f(5, "fileKeyRef", Msg(FILE_KEY_SELECTOR), Ptr),
];

/// `k8s.io.api.core.v1.ConfigMapKeySelector`
const CONFIG_MAP_KEY_SELECTOR: Fields =
    &[f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline), f(2, "key", Str, Val), f(3, "optional", Bool, Ptr)];

/// `k8s.io.api.core.v1.SecretKeySelector`
const SECRET_KEY_SELECTOR: Fields =
    &[f(1, "", Msg(LOCAL_OBJECT_REFERENCE), Inline), f(2, "key", Str, Val), f(3, "optional", Bool, Ptr)];

/// `k8s.io.api.core.v1.FileKeySelector`
const FILE_KEY_SELECTOR: Fields =
    &[f(1, "volumeName", Str, Val), f(2, "path", Str, Val), f(3, "key", Str, Val), f(4, "optional", Bool, Ptr)];

/// `k8s.io.api.core.v1.ResourceRequirements`
const RESOURCE_REQUIREMENTS: Fields = &[
    f(1, "limits", Map(&Quantity), Omit),
    f(2, "requests", Map(&Quantity), Omit),
    f(3, "claims", List(&Msg(RESOURCE_CLAIM)), Omit),
];

/// `k8s.io.api.core.v1.ResourceClaim`
const RESOURCE_CLAIM: Fields = &[f(1, "name", Str, Val), f(2, "request", Str, Omit)];

/// `k8s.io.api.core.v1.ContainerResizePolicy`
const CONTAINER_RESIZE_POLICY: Fields = &[f(1, "resourceName", Str, Val), f(2, "restartPolicy", Str, Val)];

/// `k8s.io.api.core.v1.ContainerRestartRule`
const CONTAINER_RESTART_RULE: Fields =
    &[f(1, "action", Str, Omit), f(2, "exitCodes", Msg(CONTAINER_RESTART_RULE_ON_EXIT_CODES), Ptr)];

/// `k8s.io.api.core.v1.ContainerRestartRuleOnExitCodes`
const CONTAINER_RESTART_RULE_ON_EXIT_CODES: Fields = &[f(1, "operator", Str, Omit), f(2, "values", List(&I32), Omit)];

/// `k8s.io.api.core.v1.VolumeMount`
const VOLUME_MOUNT: Fields = &[
    f(1, "name", Str, Val),
    f(2, "readOnly", Bool, Omit),
    f(7, "recursiveReadOnly", Str, Ptr),
    f(3, "mountPath", Str, Val),
    f(4, "subPath", Str, Omit),
    f(5, "mountPropagation", Str, Ptr),
    f(6, "subPathExpr", Str, Omit),
];

/// `k8s.io.api.core.v1.VolumeDevice`
const VOLUME_DEVICE: Fields = &[f(1, "name", Str, Val), f(2, "devicePath", Str, Val)];

/// `k8s.io.api.core.v1.Probe`
const PROBE: Fields = &[
    f(1, "", Msg(PROBE_HANDLER), Inline),
    f(2, "initialDelaySeconds", I32, Omit),
    f(3, "timeoutSeconds", I32, Omit),
    f(4, "periodSeconds", I32, Omit),
    f(5, "successThreshold", I32, Omit),
    f(6, "failureThreshold", I32, Omit),
    f(7, "terminationGracePeriodSeconds", I64, Ptr),
];

/// `k8s.io.api.core.v1.ProbeHandler`
const PROBE_HANDLER: Fields = &[
    f(1, "exec", Msg(EXEC_ACTION), Ptr),
    f(2, "httpGet", Msg(HTTP_GET_ACTION), Ptr),
    f(3, "tcpSocket", Msg(TCP_SOCKET_ACTION), Ptr),
    f(4, "grpc", Msg(GRPC_ACTION), Ptr),
];

/// `k8s.io.api.core.v1.ExecAction`
const EXEC_ACTION: Fields = &[f(1, "command", List(&Str), Omit)];

/// `k8s.io.api.core.v1.HTTPGetAction`
const HTTP_GET_ACTION: Fields = &[
    f(1, "path", Str, Omit),
    f(2, "port", IntOrString, Val),
    f(3, "host", Str, Omit),
    f(4, "scheme", Str, Omit),
    f(5, "httpHeaders", List(&Msg(HTTP_HEADER)), Omit),
];

/// `k8s.io.api.core.v1.HTTPHeader`
const HTTP_HEADER: Fields = &[f(1, "name", Str, Val), f(2, "value", Str, Val)];

/// `k8s.io.api.core.v1.TCPSocketAction`
const TCP_SOCKET_ACTION: Fields = &[f(1, "port", IntOrString, Val), f(2, "host", Str, Omit)];

/// `k8s.io.api.core.v1.GRPCAction`
const GRPC_ACTION: Fields = &[f(1, "port", I32, Val), f(2, "service", Str, Ptr)];

/// `k8s.io.api.core.v1.Lifecycle`
const LIFECYCLE: Fields = &[
    f(1, "postStart", Msg(LIFECYCLE_HANDLER), Ptr),
    f(2, "preStop", Msg(LIFECYCLE_HANDLER), Ptr),
    f(3, "stopSignal", Str, Ptr),
];

/// `k8s.io.api.core.v1.LifecycleHandler`
const LIFECYCLE_HANDLER: Fields = &[
    f(1, "exec", Msg(EXEC_ACTION), Ptr),
    f(2, "httpGet", Msg(HTTP_GET_ACTION), Ptr),
    f(3, "tcpSocket", Msg(TCP_SOCKET_ACTION), Ptr),
    f(4, "sleep", Msg(SLEEP_ACTION), Ptr),
];

/// `k8s.io.api.core.v1.SleepAction`
const SLEEP_ACTION: Fields = &[f(1, "seconds", I64, Val)];

/// `k8s.io.api.core.v1.SecurityContext`
const SECURITY_CONTEXT: Fields = &[
    f(1, "capabilities", Msg(CAPABILITIES), Ptr),
    f(2, "privileged", Bool, Ptr),
    f(3, "seLinuxOptions", Msg(SE_LINUX_OPTIONS), Ptr),
    f(10, "windowsOptions", Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS), Ptr),
    f(4, "runAsUser", I64, Ptr),
    f(8, "runAsGroup", I64, Ptr),
    f(5, "runAsNonRoot", Bool, Ptr),
    f(6, "readOnlyRootFilesystem", Bool, Ptr),
    f(7, "allowPrivilegeEscalation", Bool, Ptr),
    f(9, "procMount", Str, Ptr),
    f(11, "seccompProfile", Msg(SECCOMP_PROFILE), Ptr),
    f(12, "appArmorProfile", Msg(APP_ARMOR_PROFILE), Ptr),
];

/// `k8s.io.api.core.v1.Capabilities`
const CAPABILITIES: Fields = &[f(1, "add", List(&Str), Omit), f(2, "drop", List(&Str), Omit)];

/// `k8s.io.api.core.v1.SELinuxOptions`
const SE_LINUX_OPTIONS: Fields =
    &[f(1, "user", Str, Omit), f(2, "role", Str, Omit), f(3, "type", Str, Omit), f(4, "level", Str, Omit)];

/// `k8s.io.api.core.v1.WindowsSecurityContextOptions`
const WINDOWS_SECURITY_CONTEXT_OPTIONS: Fields = &[
    f(1, "gmsaCredentialSpecName", Str, Ptr),
    f(2, "gmsaCredentialSpec", Str, Ptr),
    f(3, "runAsUserName", Str, Ptr),
    f(4, "hostProcess", Bool, Ptr),
];

/// `k8s.io.api.core.v1.SeccompProfile`
const SECCOMP_PROFILE: Fields = &[f(1, "type", Str, Val), f(2, "localhostProfile", Str, Ptr)];

/// `k8s.io.api.core.v1.AppArmorProfile`
const APP_ARMOR_PROFILE: Fields = &[f(1, "type", Str, Val), f(2, "localhostProfile", Str, Ptr)];

/// `k8s.io.api.core.v1.EphemeralContainer`
const EPHEMERAL_CONTAINER: Fields =
    &[f(1, "", Msg(EPHEMERAL_CONTAINER_COMMON), Inline), f(2, "targetContainerName", Str, Omit)];

/// `k8s.io.api.core.v1.EphemeralContainerCommon`
const EPHEMERAL_CONTAINER_COMMON: Fields = &[
    f(1, "name", Str, Val),
    f(2, "image", Str, Omit),
    f(3, "command", List(&Str), Omit),
    f(4, "args", List(&Str), Omit),
    f(5, "workingDir", Str, Omit),
    f(6, "ports", List(&Msg(CONTAINER_PORT)), Omit),
    f(19, "envFrom", List(&Msg(ENV_FROM_SOURCE)), Omit),
    f(7, "env", List(&Msg(ENV_VAR)), Omit),
    f(8, "resources", Msg(RESOURCE_REQUIREMENTS), Val),
    f(23, "resizePolicy", List(&Msg(CONTAINER_RESIZE_POLICY)), Omit),
    f(24, "restartPolicy", Str, Ptr),
    f(25, "restartPolicyRules", List(&Msg(CONTAINER_RESTART_RULE)), Omit),
    f(9, "volumeMounts", List(&Msg(VOLUME_MOUNT)), Omit),
    f(21, "volumeDevices", List(&Msg(VOLUME_DEVICE)), Omit),
    f(10, "livenessProbe", Msg(PROBE), Ptr),
    f(11, "readinessProbe", Msg(PROBE), Ptr),
    f(22, "startupProbe", Msg(PROBE), Ptr),
    f(12, "lifecycle", Msg(LIFECYCLE), Ptr),
    f(13, "terminationMessagePath", Str, Omit),
    f(20, "terminationMessagePolicy", Str, Omit),
    f(14, "imagePullPolicy", Str, Omit),
    f(15, "securityContext", Msg(SECURITY_CONTEXT), Ptr),
    f(16, "stdin", Bool, Omit),
    f(17, "stdinOnce", Bool, Omit),
    f(18, "tty", Bool, Omit),
];

/// `k8s.io.api.core.v1.PodSecurityContext`
const POD_SECURITY_CONTEXT: Fields = &[
    f(1, "seLinuxOptions", Msg(SE_LINUX_OPTIONS), Ptr),
    f(8, "windowsOptions", Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS), Ptr),
    f(2, "runAsUser", I64, Ptr),
    f(6, "runAsGroup", I64, Ptr),
    f(3, "runAsNonRoot", Bool, Ptr),
    f(4, "supplementalGroups", List(&I64), Omit),
    f(12, "supplementalGroupsPolicy", Str, Ptr),
    f(5, "fsGroup", I64, Ptr),
    f(7, "sysctls", List(&Msg(SYSCTL)), Omit),
    f(9, "fsGroupChangePolicy", Str, Ptr),
    f(10, "seccompProfile", Msg(SECCOMP_PROFILE), Ptr),
    f(11, "appArmorProfile", Msg(APP_ARMOR_PROFILE), Ptr),
    f(13, "seLinuxChangePolicy", Str, Ptr),
];

/// `k8s.io.api.core.v1.Sysctl`
const SYSCTL: Fields = &[f(1, "name", Str, Val), f(2, "value", Str, Val)];

/// `k8s.io.api.core.v1.Affinity`
const AFFINITY: Fields = &[
    f(1, "nodeAffinity", Msg(NODE_AFFINITY), Ptr),
    f(2, "podAffinity", Msg(POD_AFFINITY), Ptr),
    f(3, "podAntiAffinity", Msg(POD_ANTI_AFFINITY), Ptr),
];

/// `k8s.io.api.core.v1.NodeAffinity`
const NODE_AFFINITY: Fields = &[
    f(1, "requiredDuringSchedulingIgnoredDuringExecution", Msg(NODE_SELECTOR), Ptr),
    f(2, "preferredDuringSchedulingIgnoredDuringExecution", List(&Msg(PREFERRED_SCHEDULING_TERM)), Omit),
];

/// `k8s.io.api.core.v1.NodeSelector`
const NODE_SELECTOR: Fields = &[f(1, "nodeSelectorTerms", List(&Msg(NODE_SELECTOR_TERM)), Null)];

/// `k8s.io.api.core.v1.NodeSelectorTerm`
const NODE_SELECTOR_TERM: Fields = &[
    f(1, "matchExpressions", List(&Msg(NODE_SELECTOR_REQUIREMENT)), Omit),
    f(2, "matchFields", List(&Msg(NODE_SELECTOR_REQUIREMENT)), Omit),
];

/// `k8s.io.api.core.v1.NodeSelectorRequirement`
const NODE_SELECTOR_REQUIREMENT: Fields =
    &[f(1, "key", Str, Val), f(2, "operator", Str, Val), f(3, "values", List(&Str), Omit)];

/// `k8s.io.api.core.v1.PreferredSchedulingTerm`
const PREFERRED_SCHEDULING_TERM: Fields = &[f(1, "weight", I32, Val), f(2, "preference", Msg(NODE_SELECTOR_TERM), Val)];

/// `k8s.io.api.core.v1.PodAffinity`
const POD_AFFINITY: Fields = &[
    f(1, "requiredDuringSchedulingIgnoredDuringExecution", List(&Msg(POD_AFFINITY_TERM)), Omit),
    f(2, "preferredDuringSchedulingIgnoredDuringExecution", List(&Msg(WEIGHTED_POD_AFFINITY_TERM)), Omit),
];

/// `k8s.io.api.core.v1.PodAffinityTerm`
const POD_AFFINITY_TERM: Fields = &[
    f(1, "labelSelector", Msg(LABEL_SELECTOR), Ptr),
    f(2, "namespaces", List(&Str), Omit),
    f(3, "topologyKey", Str, Val),
    f(4, "namespaceSelector", Msg(LABEL_SELECTOR), Ptr),
    f(5, "matchLabelKeys", List(&Str), Omit),
    f(6, "mismatchLabelKeys", List(&Str), Omit),
];

/// `k8s.io.api.core.v1.WeightedPodAffinityTerm`
const WEIGHTED_POD_AFFINITY_TERM: Fields =
    &[f(1, "weight", I32, Val), f(2, "podAffinityTerm", Msg(POD_AFFINITY_TERM), Val)];

/// `k8s.io.api.core.v1.PodAntiAffinity`
const POD_ANTI_AFFINITY: Fields = &[
    f(1, "requiredDuringSchedulingIgnoredDuringExecution", List(&Msg(POD_AFFINITY_TERM)), Omit),
    f(2, "preferredDuringSchedulingIgnoredDuringExecution", List(&Msg(WEIGHTED_POD_AFFINITY_TERM)), Omit),
];

/// `k8s.io.api.core.v1.Toleration`
const TOLERATION: Fields = &[
    f(1, "key", Str, Omit),
    f(2, "operator", Str, Omit),
    f(3, "value", Str, Omit),
    f(4, "effect", Str, Omit),
    f(5, "tolerationSeconds", I64, Ptr),
];

/// `k8s.io.api.core.v1.HostAlias`
const HOST_ALIAS: Fields = &[f(1, "ip", Str, Val), f(2, "hostnames", List(&Str), Omit)];

/// `k8s.io.api.core.v1.PodDNSConfig`
const POD_DNS_CONFIG: Fields = &[
    f(1, "nameservers", List(&Str), Omit),
    f(2, "searches", List(&Str), Omit),
    f(3, "options", List(&Msg(POD_DNS_CONFIG_OPTION)), Omit),
];

/// `k8s.io.api.core.v1.PodDNSConfigOption`
const POD_DNS_CONFIG_OPTION: Fields = &[f(1, "name", Str, Omit), f(2, "value", Str, Ptr)];

/// `k8s.io.api.core.v1.PodReadinessGate`
const POD_READINESS_GATE: Fields = &[f(1, "conditionType", Str, Val)];

/// `k8s.io.api.core.v1.TopologySpreadConstraint`
const TOPOLOGY_SPREAD_CONSTRAINT: Fields = &[
    f(1, "maxSkew", I32, Val),
    f(2, "topologyKey", Str, Val),
    f(3, "whenUnsatisfiable", Str, Val),
    f(4, "labelSelector", Msg(LABEL_SELECTOR), Ptr),
    f(5, "minDomains", I32, Ptr),
    f(6, "nodeAffinityPolicy", Str, Ptr),
    f(7, "nodeTaintsPolicy", Str, Ptr),
    f(8, "matchLabelKeys", List(&Str), Omit),
];

/// `k8s.io.api.core.v1.PodOS`
const POD_OS: Fields = &[f(1, "name", Str, Val)];

/// `k8s.io.api.core.v1.PodSchedulingGate`
const POD_SCHEDULING_GATE: Fields = &[f(1, "name", Str, Val)];

/// `k8s.io.api.core.v1.PodResourceClaim`
const POD_RESOURCE_CLAIM: Fields =
    &[f(1, "name", Str, Val), f(3, "resourceClaimName", Str, Ptr), f(4, "resourceClaimTemplateName", Str, Ptr)];

/// `k8s.io.api.core.v1.WorkloadReference`
const WORKLOAD_REFERENCE: Fields =
    &[f(1, "name", Str, Val), f(2, "podGroup", Str, Val), f(3, "podGroupReplicaKey", Str, Omit)];

/// `k8s.io.api.core.v1.PodStatus`
const POD_STATUS: Fields = &[
    f(17, "observedGeneration", I64, Omit),
    f(1, "phase", Str, Omit),
    f(2, "conditions", List(&Msg(POD_CONDITION)), Omit),
    f(3, "message", Str, Omit),
    f(4, "reason", Str, Omit),
    f(11, "nominatedNodeName", Str, Omit),
    f(5, "hostIP", Str, Omit),
    f(16, "hostIPs", List(&Msg(HOST_IP)), Omit),
    f(6, "podIP", Str, Omit),
    f(12, "podIPs", List(&Msg(POD_IP)), Omit),
    f(7, "startTime", Time, Ptr),
    f(10, "initContainerStatuses", List(&Msg(CONTAINER_STATUS)), Omit),
    f(8, "containerStatuses", List(&Msg(CONTAINER_STATUS)), Omit),
    f(9, "qosClass", Str, Omit),
    f(13, "ephemeralContainerStatuses", List(&Msg(CONTAINER_STATUS)), Omit),
    f(14, "resize", Str, Omit),
    f(15, "resourceClaimStatuses", List(&Msg(POD_RESOURCE_CLAIM_STATUS)), Omit),
    f(18, "extendedResourceClaimStatus", Msg(POD_EXTENDED_RESOURCE_CLAIM_STATUS), Ptr),
    f(19, "allocatedResources", Map(&Quantity), Omit),
    f(20, "resources", Msg(RESOURCE_REQUIREMENTS), Ptr),
];

/// `k8s.io.api.core.v1.PodCondition`
const POD_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(7, "observedGeneration", I64, Omit),
    f(2, "status", Str, Val),
    f(3, "lastProbeTime", Time, Val),
    f(4, "lastTransitionTime", Time, Val),
    f(5, "reason", Str, Omit),
    f(6, "message", Str, Omit),
];

/// `k8s.io.api.core.v1.HostIP`
const HOST_IP: Fields = &[f(1, "ip", Str, Val)];

/// `k8s.io.api.core.v1.PodIP`
const POD_IP: Fields = &[f(1, "ip", Str, Val)];

/// `k8s.io.api.core.v1.ContainerStatus`
const CONTAINER_STATUS: Fields = &[
    f(1, "name", Str, Val),
    f(2, "state", Msg(CONTAINER_STATE), Val),
    f(3, "lastState", Msg(CONTAINER_STATE), Val),
    f(4, "ready", Bool, Val),
    f(5, "restartCount", I32, Val),
    f(6, "image", Str, Val),
    f(7, "imageID", Str, Val),
    f(8, "containerID", Str, Omit),
    f(9, "started", Bool, Ptr),
    f(10, "allocatedResources", Map(&Quantity), Omit),
    f(11, "resources", Msg(RESOURCE_REQUIREMENTS), Ptr),
    f(12, "volumeMounts", List(&Msg(VOLUME_MOUNT_STATUS)), Omit),
    f(13, "user", Msg(CONTAINER_USER), Ptr),
    f(14, "allocatedResourcesStatus", List(&Msg(RESOURCE_STATUS)), Omit),
    f(15, "stopSignal", Str, Ptr),
];

/// `k8s.io.api.core.v1.ContainerState`
const CONTAINER_STATE: Fields = &[
    f(1, "waiting", Msg(CONTAINER_STATE_WAITING), Ptr),
    f(2, "running", Msg(CONTAINER_STATE_RUNNING), Ptr),
    f(3, "terminated", Msg(CONTAINER_STATE_TERMINATED), Ptr),
];

/// `k8s.io.api.core.v1.ContainerStateWaiting`
const CONTAINER_STATE_WAITING: Fields = &[f(1, "reason", Str, Omit), f(2, "message", Str, Omit)];

/// `k8s.io.api.core.v1.ContainerStateRunning`
const CONTAINER_STATE_RUNNING: Fields = &[f(1, "startedAt", Time, Val)];

/// `k8s.io.api.core.v1.ContainerStateTerminated`
const CONTAINER_STATE_TERMINATED: Fields = &[
    f(1, "exitCode", I32, Val),
    f(2, "signal", I32, Omit),
    f(3, "reason", Str, Omit),
    f(4, "message", Str, Omit),
    f(5, "startedAt", Time, Val),
    f(6, "finishedAt", Time, Val),
    f(7, "containerID", Str, Omit),
];

/// `k8s.io.api.core.v1.VolumeMountStatus`
const VOLUME_MOUNT_STATUS: Fields = &[
    f(1, "name", Str, Val),
    f(2, "mountPath", Str, Val),
    f(3, "readOnly", Bool, Omit),
    f(4, "recursiveReadOnly", Str, Ptr),
];

/// `k8s.io.api.core.v1.ContainerUser`
const CONTAINER_USER: Fields = &[f(1, "linux", Msg(LINUX_CONTAINER_USER), Ptr)];

/// `k8s.io.api.core.v1.LinuxContainerUser`
const LINUX_CONTAINER_USER: Fields =
    &[f(1, "uid", I64, Val), f(2, "gid", I64, Val), f(3, "supplementalGroups", List(&I64), Omit)];

/// `k8s.io.api.core.v1.ResourceStatus`
const RESOURCE_STATUS: Fields = &[f(1, "name", Str, Val), f(2, "resources", List(&Msg(RESOURCE_HEALTH)), Omit)];

/// `k8s.io.api.core.v1.ResourceHealth`
const RESOURCE_HEALTH: Fields = &[f(1, "resourceID", Str, Val), f(2, "health", Str, Omit)];

/// `k8s.io.api.core.v1.PodResourceClaimStatus`
const POD_RESOURCE_CLAIM_STATUS: Fields = &[f(1, "name", Str, Val), f(2, "resourceClaimName", Str, Ptr)];

/// `k8s.io.api.core.v1.PodExtendedResourceClaimStatus`
const POD_EXTENDED_RESOURCE_CLAIM_STATUS: Fields = &[
    f(1, "requestMappings", List(&Msg(CONTAINER_EXTENDED_RESOURCE_REQUEST)), Null),
    f(2, "resourceClaimName", Str, Val),
];

/// `k8s.io.api.core.v1.ContainerExtendedResourceRequest`
const CONTAINER_EXTENDED_RESOURCE_REQUEST: Fields =
    &[f(1, "containerName", Str, Val), f(2, "resourceName", Str, Val), f(3, "requestName", Str, Val)];

/// `k8s.io.api.core.v1.ServiceAccount`
const SERVICE_ACCOUNT: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "secrets", List(&Msg(OBJECT_REFERENCE)), Omit),
    f(3, "imagePullSecrets", List(&Msg(LOCAL_OBJECT_REFERENCE)), Omit),
    f(4, "automountServiceAccountToken", Bool, Ptr),
];

/// `k8s.io.api.core.v1.ObjectReference`
const OBJECT_REFERENCE: Fields = &[
    f(1, "kind", Str, Omit),
    f(2, "namespace", Str, Omit),
    f(3, "name", Str, Omit),
    f(4, "uid", Str, Omit),
    f(5, "apiVersion", Str, Omit),
    f(6, "resourceVersion", Str, Omit),
    f(7, "fieldPath", Str, Omit),
];

/// `k8s.io.api.core.v1.ResourceQuota`
const RESOURCE_QUOTA: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(RESOURCE_QUOTA_SPEC), Val),
    f(3, "status", Msg(RESOURCE_QUOTA_STATUS), Val),
];

/// `k8s.io.api.core.v1.ResourceQuotaSpec`
const RESOURCE_QUOTA_SPEC: Fields = &[
    f(1, "hard", Map(&Quantity), Omit),
    f(2, "scopes", List(&Str), Omit),
    f(3, "scopeSelector", Msg(SCOPE_SELECTOR), Ptr),
];

/// `k8s.io.api.core.v1.ScopeSelector`
const SCOPE_SELECTOR: Fields = &[f(1, "matchExpressions", List(&Msg(SCOPED_RESOURCE_SELECTOR_REQUIREMENT)), Omit)];

/// `k8s.io.api.core.v1.ScopedResourceSelectorRequirement`
const SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Fields =
    &[f(1, "scopeName", Str, Val), f(2, "operator", Str, Val), f(3, "values", List(&Str), Omit)];

/// `k8s.io.api.core.v1.ResourceQuotaStatus`
const RESOURCE_QUOTA_STATUS: Fields = &[f(1, "hard", Map(&Quantity), Omit), f(2, "used", Map(&Quantity), Omit)];

/// `k8s.io.api.core.v1.Binding`
const BINDING: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "target", Msg(OBJECT_REFERENCE), Val)];

/// `k8s.io.api.core.v1.PersistentVolumeClaim`
const PERSISTENT_VOLUME_CLAIM: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(PERSISTENT_VOLUME_CLAIM_SPEC), Val),
    f(3, "status", Msg(PERSISTENT_VOLUME_CLAIM_STATUS), Val),
];

/// `k8s.io.api.core.v1.PersistentVolumeClaimStatus`
const PERSISTENT_VOLUME_CLAIM_STATUS: Fields = &[
    f(1, "phase", Str, Omit),
    f(2, "accessModes", List(&Str), Omit),
    f(3, "capacity", Map(&Quantity), Omit),
    f(4, "conditions", List(&Msg(PERSISTENT_VOLUME_CLAIM_CONDITION)), Omit),
    f(5, "allocatedResources", Map(&Quantity), Omit),
    f(7, "allocatedResourceStatuses", Map(&Str), Omit),
    f(8, "currentVolumeAttributesClassName", Str, Ptr),
    f(9, "modifyVolumeStatus", Msg(MODIFY_VOLUME_STATUS), Ptr),
];

/// `k8s.io.api.core.v1.PersistentVolumeClaimCondition`
const PERSISTENT_VOLUME_CLAIM_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastProbeTime", Time, Val),
    f(4, "lastTransitionTime", Time, Val),
    f(5, "reason", Str, Omit),
    f(6, "message", Str, Omit),
];

/// `k8s.io.api.core.v1.ModifyVolumeStatus`
const MODIFY_VOLUME_STATUS: Fields = &[f(1, "targetVolumeAttributesClassName", Str, Omit), f(2, "status", Str, Val)];

/// `k8s.io.api.core.v1.Event`
const EVENT: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "involvedObject", Msg(OBJECT_REFERENCE), Val),
    f(3, "reason", Str, Omit),
    f(4, "message", Str, Omit),
    f(5, "source", Msg(EVENT_SOURCE), Val),
    f(6, "firstTimestamp", Time, Val),
    f(7, "lastTimestamp", Time, Val),
    f(8, "count", I32, Omit),
    f(9, "type", Str, Omit),
    f(10, "eventTime", MicroTime, Val),
    f(11, "series", Msg(EVENT_SERIES), Ptr),
    f(12, "action", Str, Omit),
    f(13, "related", Msg(OBJECT_REFERENCE), Ptr),
    f(14, "reportingComponent", Str, Val),
    f(15, "reportingInstance", Str, Val),
];

/// `k8s.io.api.core.v1.EventSource`
const EVENT_SOURCE: Fields = &[f(1, "component", Str, Omit), f(2, "host", Str, Omit)];

/// `k8s.io.api.core.v1.EventSeries`
const EVENT_SERIES: Fields = &[f(1, "count", I32, Omit), f(2, "lastObservedTime", MicroTime, Val)];

/// `k8s.io.api.core.v1.PodTemplate`
const POD_TEMPLATE: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "template", Msg(POD_TEMPLATE_SPEC), Val)];

/// `k8s.io.api.core.v1.PodTemplateSpec`
const POD_TEMPLATE_SPEC: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(POD_SPEC), Val)];

/// `k8s.io.api.core.v1.ReplicationController`
const REPLICATION_CONTROLLER: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(REPLICATION_CONTROLLER_SPEC), Val),
    f(3, "status", Msg(REPLICATION_CONTROLLER_STATUS), Val),
];

/// `k8s.io.api.core.v1.ReplicationControllerSpec`
const REPLICATION_CONTROLLER_SPEC: Fields = &[
    f(1, "replicas", I32, Ptr),
    f(4, "minReadySeconds", I32, Omit),
    f(2, "selector", Map(&Str), Omit),
    f(3, "template", Msg(POD_TEMPLATE_SPEC), Ptr),
];

/// `k8s.io.api.core.v1.ReplicationControllerStatus`
const REPLICATION_CONTROLLER_STATUS: Fields = &[
    f(1, "replicas", I32, Val),
    f(2, "fullyLabeledReplicas", I32, Omit),
    f(4, "readyReplicas", I32, Omit),
    f(5, "availableReplicas", I32, Omit),
    f(3, "observedGeneration", I64, Omit),
    f(6, "conditions", List(&Msg(REPLICATION_CONTROLLER_CONDITION)), Omit),
];

/// `k8s.io.api.core.v1.ReplicationControllerCondition`
const REPLICATION_CONTROLLER_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastTransitionTime", Time, Val),
    f(4, "reason", Str, Omit),
    f(5, "message", Str, Omit),
];

/// `k8s.io.api.core.v1.LimitRange`
const LIMIT_RANGE: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(LIMIT_RANGE_SPEC), Val)];

/// `k8s.io.api.core.v1.LimitRangeSpec`
const LIMIT_RANGE_SPEC: Fields = &[f(1, "limits", List(&Msg(LIMIT_RANGE_ITEM)), Null)];

/// `k8s.io.api.core.v1.LimitRangeItem`
const LIMIT_RANGE_ITEM: Fields = &[
    f(1, "type", Str, Val),
    f(2, "max", Map(&Quantity), Omit),
    f(3, "min", Map(&Quantity), Omit),
    f(4, "default", Map(&Quantity), Omit),
    f(5, "defaultRequest", Map(&Quantity), Omit),
    f(6, "maxLimitRequestRatio", Map(&Quantity), Omit),
];

/// `k8s.io.api.apps.v1.Deployment`
const DEPLOYMENT: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(DEPLOYMENT_SPEC), Val),
    f(3, "status", Msg(DEPLOYMENT_STATUS), Val),
];

/// `k8s.io.api.apps.v1.DeploymentSpec`
const DEPLOYMENT_SPEC: Fields = &[
    f(1, "replicas", I32, Ptr),
    f(2, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(3, "template", Msg(POD_TEMPLATE_SPEC), Val),
    f(4, "strategy", Msg(DEPLOYMENT_STRATEGY), Val),
    f(5, "minReadySeconds", I32, Omit),
    f(6, "revisionHistoryLimit", I32, Ptr),
    f(7, "paused", Bool, Omit),
    f(9, "progressDeadlineSeconds", I32, Ptr),
];

/// `k8s.io.api.apps.v1.DeploymentStrategy`
const DEPLOYMENT_STRATEGY: Fields =
    &[f(1, "type", Str, Omit), f(2, "rollingUpdate", Msg(ROLLING_UPDATE_DEPLOYMENT), Ptr)];

/// `k8s.io.api.apps.v1.RollingUpdateDeployment`
const ROLLING_UPDATE_DEPLOYMENT: Fields =
    &[f(1, "maxUnavailable", IntOrString, Ptr), f(2, "maxSurge", IntOrString, Ptr)];

/// `k8s.io.api.apps.v1.DeploymentStatus`
const DEPLOYMENT_STATUS: Fields = &[
    f(1, "observedGeneration", I64, Omit),
    f(2, "replicas", I32, Omit),
    f(3, "updatedReplicas", I32, Omit),
    f(7, "readyReplicas", I32, Omit),
    f(4, "availableReplicas", I32, Omit),
    f(5, "unavailableReplicas", I32, Omit),
    f(9, "terminatingReplicas", I32, Ptr),
    f(6, "conditions", List(&Msg(DEPLOYMENT_CONDITION)), Omit),
    f(8, "collisionCount", I32, Ptr),
];

/// `k8s.io.api.apps.v1.DeploymentCondition`
const DEPLOYMENT_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(6, "lastUpdateTime", Time, Val),
    f(7, "lastTransitionTime", Time, Val),
    f(4, "reason", Str, Omit),
    f(5, "message", Str, Omit),
];

/// `k8s.io.api.apps.v1.ReplicaSet`
const REPLICA_SET: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(REPLICA_SET_SPEC), Val),
    f(3, "status", Msg(REPLICA_SET_STATUS), Val),
];

/// `k8s.io.api.apps.v1.ReplicaSetSpec`
const REPLICA_SET_SPEC: Fields = &[
    f(1, "replicas", I32, Ptr),
    f(4, "minReadySeconds", I32, Omit),
    f(2, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(3, "template", Msg(POD_TEMPLATE_SPEC), Val),
];

/// `k8s.io.api.apps.v1.ReplicaSetStatus`
const REPLICA_SET_STATUS: Fields = &[
    f(1, "replicas", I32, Val),
    f(2, "fullyLabeledReplicas", I32, Omit),
    f(4, "readyReplicas", I32, Omit),
    f(5, "availableReplicas", I32, Omit),
    f(7, "terminatingReplicas", I32, Ptr),
    f(3, "observedGeneration", I64, Omit),
    f(6, "conditions", List(&Msg(REPLICA_SET_CONDITION)), Omit),
];

/// `k8s.io.api.apps.v1.ReplicaSetCondition`
const REPLICA_SET_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastTransitionTime", Time, Val),
    f(4, "reason", Str, Omit),
    f(5, "message", Str, Omit),
];

/// `k8s.io.api.apps.v1.StatefulSet`
const STATEFUL_SET: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(STATEFUL_SET_SPEC), Val),
    f(3, "status", Msg(STATEFUL_SET_STATUS), Val),
];

/// `k8s.io.api.apps.v1.StatefulSetSpec`
const STATEFUL_SET_SPEC: Fields = &[
    f(1, "replicas", I32, Ptr),
    f(2, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(3, "template", Msg(POD_TEMPLATE_SPEC), Val),
    f(4, "volumeClaimTemplates", List(&Msg(PERSISTENT_VOLUME_CLAIM)), Omit),
    f(5, "serviceName", Str, Val),
    f(6, "podManagementPolicy", Str, Omit),
    f(7, "updateStrategy", Msg(STATEFUL_SET_UPDATE_STRATEGY), Val),
    f(8, "revisionHistoryLimit", I32, Ptr),
    f(9, "minReadySeconds", I32, Omit),
    f(10, "persistentVolumeClaimRetentionPolicy", Msg(STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY), Ptr),
    f(11, "ordinals", Msg(STATEFUL_SET_ORDINALS), Ptr),
];

/// `k8s.io.api.apps.v1.StatefulSetUpdateStrategy`
const STATEFUL_SET_UPDATE_STRATEGY: Fields =
    &[f(1, "type", Str, Omit), f(2, "rollingUpdate", Msg(ROLLING_UPDATE_STATEFUL_SET_STRATEGY), Ptr)];

/// `k8s.io.api.apps.v1.RollingUpdateStatefulSetStrategy`
const ROLLING_UPDATE_STATEFUL_SET_STRATEGY: Fields =
    &[f(1, "partition", I32, Ptr), f(2, "maxUnavailable", IntOrString, Ptr)];

/// `k8s.io.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy`
const STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY: Fields =
    &[f(1, "whenDeleted", Str, Omit), f(2, "whenScaled", Str, Omit)];

/// `k8s.io.api.apps.v1.StatefulSetOrdinals`
const STATEFUL_SET_ORDINALS: Fields = &[f(1, "start", I32, Val)];

/// `k8s.io.api.apps.v1.StatefulSetStatus`
const STATEFUL_SET_STATUS: Fields = &[
    f(1, "observedGeneration", I64, Omit),
    f(2, "replicas", I32, Val),
    f(3, "readyReplicas", I32, Omit),
    f(4, "currentReplicas", I32, Omit),
    f(5, "updatedReplicas", I32, Omit),
    f(6, "currentRevision", Str, Omit),
    f(7, "updateRevision", Str, Omit),
    f(9, "collisionCount", I32, Ptr),
    f(10, "conditions", List(&Msg(STATEFUL_SET_CONDITION)), Omit),
    f(11, "availableReplicas", I32, Val),
];

/// `k8s.io.api.apps.v1.StatefulSetCondition`
const STATEFUL_SET_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastTransitionTime", Time, Val),
    f(4, "reason", Str, Omit),
    f(5, "message", Str, Omit),
];

/// `k8s.io.api.apps.v1.DaemonSet`
const DAEMON_SET: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(DAEMON_SET_SPEC), Val),
    f(3, "status", Msg(DAEMON_SET_STATUS), Val),
];

/// `k8s.io.api.apps.v1.DaemonSetSpec`
const DAEMON_SET_SPEC: Fields = &[
    f(1, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(2, "template", Msg(POD_TEMPLATE_SPEC), Val),
    f(3, "updateStrategy", Msg(DAEMON_SET_UPDATE_STRATEGY), Val),
    f(4, "minReadySeconds", I32, Omit),
    f(6, "revisionHistoryLimit", I32, Ptr),
];

/// `k8s.io.api.apps.v1.DaemonSetUpdateStrategy`
const DAEMON_SET_UPDATE_STRATEGY: Fields =
    &[f(1, "type", Str, Omit), f(2, "rollingUpdate", Msg(ROLLING_UPDATE_DAEMON_SET), Ptr)];

/// `k8s.io.api.apps.v1.RollingUpdateDaemonSet`
const ROLLING_UPDATE_DAEMON_SET: Fields =
    &[f(1, "maxUnavailable", IntOrString, Ptr), f(2, "maxSurge", IntOrString, Ptr)];

/// `k8s.io.api.apps.v1.DaemonSetStatus`
const DAEMON_SET_STATUS: Fields = &[
    f(1, "currentNumberScheduled", I32, Val),
    f(2, "numberMisscheduled", I32, Val),
    f(3, "desiredNumberScheduled", I32, Val),
    f(4, "numberReady", I32, Val),
    f(5, "observedGeneration", I64, Omit),
    f(6, "updatedNumberScheduled", I32, Omit),
    f(7, "numberAvailable", I32, Omit),
    f(8, "numberUnavailable", I32, Omit),
    f(9, "collisionCount", I32, Ptr),
    f(10, "conditions", List(&Msg(DAEMON_SET_CONDITION)), Omit),
];

/// `k8s.io.api.apps.v1.DaemonSetCondition`
const DAEMON_SET_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastTransitionTime", Time, Val),
    f(4, "reason", Str, Omit),
    f(5, "message", Str, Omit),
];

/// `k8s.io.api.batch.v1.Job`
const JOB: Fields =
    &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(JOB_SPEC), Val), f(3, "status", Msg(JOB_STATUS), Val)];

/// `k8s.io.api.batch.v1.JobSpec`
const JOB_SPEC: Fields = &[
    f(1, "parallelism", I32, Ptr),
    f(2, "completions", I32, Ptr),
    f(3, "activeDeadlineSeconds", I64, Ptr),
    f(11, "podFailurePolicy", Msg(POD_FAILURE_POLICY), Ptr),
    f(16, "successPolicy", Msg(SUCCESS_POLICY), Ptr),
    f(7, "backoffLimit", I32, Ptr),
    f(12, "backoffLimitPerIndex", I32, Ptr),
    f(13, "maxFailedIndexes", I32, Ptr),
    f(4, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(5, "manualSelector", Bool, Ptr),
    f(6, "template", Msg(POD_TEMPLATE_SPEC), Val),
    f(8, "ttlSecondsAfterFinished", I32, Ptr),
    f(9, "completionMode", Str, Ptr),
    f(10, "suspend", Bool, Ptr),
    f(14, "podReplacementPolicy", Str, Ptr),
    f(15, "managedBy", Str, Ptr),
];

/// `k8s.io.api.batch.v1.PodFailurePolicy`
const POD_FAILURE_POLICY: Fields = &[f(1, "rules", List(&Msg(POD_FAILURE_POLICY_RULE)), Null)];

/// `k8s.io.api.batch.v1.PodFailurePolicyRule`
const POD_FAILURE_POLICY_RULE: Fields = &[
    f(1, "action", Str, Val),
    f(2, "onExitCodes", Msg(POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT), Ptr),
    f(3, "onPodConditions", List(&Msg(POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN)), Omit),
];

/// `k8s.io.api.batch.v1.PodFailurePolicyOnExitCodesRequirement`
const POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT: Fields =
    &[f(1, "containerName", Str, Ptr), f(2, "operator", Str, Val), f(3, "values", List(&I32), Null)];

/// `k8s.io.api.batch.v1.PodFailurePolicyOnPodConditionsPattern`
const POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN: Fields = &[f(1, "type", Str, Val), f(2, "status", Str, Val)];

/// `k8s.io.api.batch.v1.SuccessPolicy`
const SUCCESS_POLICY: Fields = &[f(1, "rules", List(&Msg(SUCCESS_POLICY_RULE)), Null)];

/// `k8s.io.api.batch.v1.SuccessPolicyRule`
const SUCCESS_POLICY_RULE: Fields = &[f(1, "succeededIndexes", Str, Ptr), f(2, "succeededCount", I32, Ptr)];

/// `k8s.io.api.batch.v1.JobStatus`
const JOB_STATUS: Fields = &[
    f(1, "conditions", List(&Msg(JOB_CONDITION)), Omit),
    f(2, "startTime", Time, Ptr),
    f(3, "completionTime", Time, Ptr),
    f(4, "active", I32, Omit),
    f(5, "succeeded", I32, Omit),
    f(6, "failed", I32, Omit),
    f(11, "terminating", I32, Ptr),
    f(7, "completedIndexes", Str, Omit),
    f(10, "failedIndexes", Str, Ptr),
    f(8, "uncountedTerminatedPods", Msg(UNCOUNTED_TERMINATED_PODS), Ptr),
    f(9, "ready", I32, Ptr),
];

/// `k8s.io.api.batch.v1.JobCondition`
const JOB_CONDITION: Fields = &[
    f(1, "type", Str, Val),
    f(2, "status", Str, Val),
    f(3, "lastProbeTime", Time, Val),
    f(4, "lastTransitionTime", Time, Val),
    f(5, "reason", Str, Omit),
    f(6, "message", Str, Omit),
];

/// `k8s.io.api.batch.v1.UncountedTerminatedPods`
const UNCOUNTED_TERMINATED_PODS: Fields = &[f(1, "succeeded", List(&Str), Omit), f(2, "failed", List(&Str), Omit)];

/// `k8s.io.api.batch.v1.CronJob`
const CRON_JOB: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(CRON_JOB_SPEC), Val),
    f(3, "status", Msg(CRON_JOB_STATUS), Val),
];

/// `k8s.io.api.batch.v1.CronJobSpec`
const CRON_JOB_SPEC: Fields = &[
    f(1, "schedule", Str, Val),
    f(8, "timeZone", Str, Ptr),
    f(2, "startingDeadlineSeconds", I64, Ptr),
    f(3, "concurrencyPolicy", Str, Omit),
    f(4, "suspend", Bool, Ptr),
    f(5, "jobTemplate", Msg(JOB_TEMPLATE_SPEC), Val),
    f(6, "successfulJobsHistoryLimit", I32, Ptr),
    f(7, "failedJobsHistoryLimit", I32, Ptr),
];

/// `k8s.io.api.batch.v1.JobTemplateSpec`
const JOB_TEMPLATE_SPEC: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "spec", Msg(JOB_SPEC), Val)];

/// `k8s.io.api.batch.v1.CronJobStatus`
const CRON_JOB_STATUS: Fields = &[
    f(1, "active", List(&Msg(OBJECT_REFERENCE)), Omit),
    f(4, "lastScheduleTime", Time, Ptr),
    f(5, "lastSuccessfulTime", Time, Ptr),
];

/// `k8s.io.api.autoscaling.v1.Scale`
const SCALE: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SCALE_SPEC), Val),
    f(3, "status", Msg(SCALE_STATUS), Val),
];

/// `k8s.io.api.autoscaling.v1.ScaleSpec`
const SCALE_SPEC: Fields = &[f(1, "replicas", I32, Omit)];

/// `k8s.io.api.autoscaling.v1.ScaleStatus`
const SCALE_STATUS: Fields = &[f(1, "replicas", I32, Val), f(2, "selector", Str, Omit)];

/// `k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler`
const HORIZONTAL_POD_AUTOSCALER: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(HORIZONTAL_POD_AUTOSCALER_SPEC), Val),
    f(3, "status", Msg(HORIZONTAL_POD_AUTOSCALER_STATUS), Val),
];

/// `k8s.io.api.autoscaling.v1.HorizontalPodAutoscalerSpec`
const HORIZONTAL_POD_AUTOSCALER_SPEC: Fields = &[
    f(1, "scaleTargetRef", Msg(CROSS_VERSION_OBJECT_REFERENCE), Val),
    f(2, "minReplicas", I32, Ptr),
    f(3, "maxReplicas", I32, Val),
    f(4, "targetCPUUtilizationPercentage", I32, Ptr),
];

/// `k8s.io.api.autoscaling.v1.CrossVersionObjectReference`
const CROSS_VERSION_OBJECT_REFERENCE: Fields =
    &[f(1, "kind", Str, Val), f(2, "name", Str, Val), f(3, "apiVersion", Str, Omit)];

/// `k8s.io.api.autoscaling.v1.HorizontalPodAutoscalerStatus`
const HORIZONTAL_POD_AUTOSCALER_STATUS: Fields = &[
    f(1, "observedGeneration", I64, Ptr),
    f(2, "lastScaleTime", Time, Ptr),
    f(3, "currentReplicas", I32, Val),
    f(4, "desiredReplicas", I32, Val),
    f(5, "currentCPUUtilizationPercentage", I32, Ptr),
];

/// `k8s.io.api.authorization.v1.SelfSubjectAccessReview`
const SELF_SUBJECT_ACCESS_REVIEW: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SELF_SUBJECT_ACCESS_REVIEW_SPEC), Val),
    f(3, "status", Msg(SUBJECT_ACCESS_REVIEW_STATUS), Val),
];

/// `k8s.io.api.authorization.v1.SelfSubjectAccessReviewSpec`
const SELF_SUBJECT_ACCESS_REVIEW_SPEC: Fields = &[
    f(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES), Ptr),
    f(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES), Ptr),
];

/// `k8s.io.api.authorization.v1.ResourceAttributes`
const RESOURCE_ATTRIBUTES: Fields = &[
    f(1, "namespace", Str, Omit),
    f(2, "verb", Str, Omit),
    f(3, "group", Str, Omit),
    f(4, "version", Str, Omit),
    f(5, "resource", Str, Omit),
    f(6, "subresource", Str, Omit),
    f(7, "name", Str, Omit),
    f(8, "fieldSelector", Msg(FIELD_SELECTOR_ATTRIBUTES), Ptr),
    f(9, "labelSelector", Msg(LABEL_SELECTOR_ATTRIBUTES), Ptr),
];

/// `k8s.io.api.authorization.v1.FieldSelectorAttributes`
const FIELD_SELECTOR_ATTRIBUTES: Fields =
    &[f(1, "rawSelector", Str, Omit), f(2, "requirements", List(&Msg(FIELD_SELECTOR_REQUIREMENT)), Omit)];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement`
const FIELD_SELECTOR_REQUIREMENT: Fields =
    &[f(1, "key", Str, Val), f(2, "operator", Str, Val), f(3, "values", List(&Str), Omit)];

/// `k8s.io.api.authorization.v1.LabelSelectorAttributes`
const LABEL_SELECTOR_ATTRIBUTES: Fields =
    &[f(1, "rawSelector", Str, Omit), f(2, "requirements", List(&Msg(LABEL_SELECTOR_REQUIREMENT)), Omit)];

/// `k8s.io.api.authorization.v1.NonResourceAttributes`
const NON_RESOURCE_ATTRIBUTES: Fields = &[f(1, "path", Str, Omit), f(2, "verb", Str, Omit)];

/// `k8s.io.api.authorization.v1.SubjectAccessReviewStatus`
const SUBJECT_ACCESS_REVIEW_STATUS: Fields = &[
    f(1, "allowed", Bool, Val),
    f(4, "denied", Bool, Omit),
    f(2, "reason", Str, Omit),
    f(3, "evaluationError", Str, Omit),
];

/// `k8s.io.api.authorization.v1.SelfSubjectRulesReview`
const SELF_SUBJECT_RULES_REVIEW: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SELF_SUBJECT_RULES_REVIEW_SPEC), Val),
    f(3, "status", Msg(SUBJECT_RULES_REVIEW_STATUS), Val),
];

/// `k8s.io.api.authorization.v1.SelfSubjectRulesReviewSpec`
const SELF_SUBJECT_RULES_REVIEW_SPEC: Fields = &[f(1, "namespace", Str, Omit)];

/// `k8s.io.api.authorization.v1.SubjectRulesReviewStatus`
const SUBJECT_RULES_REVIEW_STATUS: Fields = &[
    f(1, "resourceRules", List(&Msg(RESOURCE_RULE)), Null),
    f(2, "nonResourceRules", List(&Msg(NON_RESOURCE_RULE)), Null),
    f(3, "incomplete", Bool, Val),
    f(4, "evaluationError", Str, Omit),
];

/// `k8s.io.api.authorization.v1.ResourceRule`
const RESOURCE_RULE: Fields = &[
    f(1, "verbs", List(&Str), Null),
    f(2, "apiGroups", List(&Str), Omit),
    f(3, "resources", List(&Str), Omit),
    f(4, "resourceNames", List(&Str), Omit),
];

/// `k8s.io.api.authorization.v1.NonResourceRule`
const NON_RESOURCE_RULE: Fields = &[f(1, "verbs", List(&Str), Null), f(2, "nonResourceURLs", List(&Str), Omit)];

/// `k8s.io.api.authorization.v1.SubjectAccessReview`
const SUBJECT_ACCESS_REVIEW: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SUBJECT_ACCESS_REVIEW_SPEC), Val),
    f(3, "status", Msg(SUBJECT_ACCESS_REVIEW_STATUS), Val),
];

/// `k8s.io.api.authorization.v1.SubjectAccessReviewSpec`
const SUBJECT_ACCESS_REVIEW_SPEC: Fields = &[
    f(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES), Ptr),
    f(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES), Ptr),
    f(3, "user", Str, Omit),
    f(4, "groups", List(&Str), Omit),
    f(5, "extra", Map(&StrList), Omit),
    f(6, "uid", Str, Omit),
];

/// `k8s.io.api.authorization.v1.LocalSubjectAccessReview`
const LOCAL_SUBJECT_ACCESS_REVIEW: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(SUBJECT_ACCESS_REVIEW_SPEC), Val),
    f(3, "status", Msg(SUBJECT_ACCESS_REVIEW_STATUS), Val),
];

/// `k8s.io.api.authentication.v1.SelfSubjectReview`
const SELF_SUBJECT_REVIEW: Fields =
    &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "status", Msg(SELF_SUBJECT_REVIEW_STATUS), Val)];

/// `k8s.io.api.authentication.v1.SelfSubjectReviewStatus`
const SELF_SUBJECT_REVIEW_STATUS: Fields = &[f(1, "userInfo", Msg(USER_INFO), Val)];

/// `k8s.io.api.authentication.v1.UserInfo`
const USER_INFO: Fields = &[
    f(1, "username", Str, Omit),
    f(2, "uid", Str, Omit),
    f(3, "groups", List(&Str), Omit),
    f(4, "extra", Map(&StrList), Omit),
];

/// `k8s.io.api.authentication.v1.TokenRequest`
const TOKEN_REQUEST: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(TOKEN_REQUEST_SPEC), Val),
    f(3, "status", Msg(TOKEN_REQUEST_STATUS), Val),
];

/// `k8s.io.api.authentication.v1.TokenRequestSpec`
const TOKEN_REQUEST_SPEC: Fields = &[
    f(1, "audiences", List(&Str), Null),
    f(4, "expirationSeconds", I64, Ptr),
    f(3, "boundObjectRef", Msg(BOUND_OBJECT_REFERENCE), Ptr),
];

/// `k8s.io.api.authentication.v1.BoundObjectReference`
const BOUND_OBJECT_REFERENCE: Fields =
    &[f(1, "kind", Str, Omit), f(2, "apiVersion", Str, Omit), f(3, "name", Str, Omit), f(4, "uid", Str, Omit)];

/// `k8s.io.api.authentication.v1.TokenRequestStatus`
const TOKEN_REQUEST_STATUS: Fields = &[f(1, "token", Str, Val), f(2, "expirationTimestamp", Time, Val)];

/// `k8s.io.api.authentication.v1.TokenReview`
const TOKEN_REVIEW: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(TOKEN_REVIEW_SPEC), Val),
    f(3, "status", Msg(TOKEN_REVIEW_STATUS), Val),
];

/// `k8s.io.api.authentication.v1.TokenReviewSpec`
const TOKEN_REVIEW_SPEC: Fields = &[f(1, "token", Str, Omit), f(2, "audiences", List(&Str), Omit)];

/// `k8s.io.api.authentication.v1.TokenReviewStatus`
const TOKEN_REVIEW_STATUS: Fields = &[
    f(1, "authenticated", Bool, Omit),
    f(2, "user", Msg(USER_INFO), Val),
    f(4, "audiences", List(&Str), Omit),
    f(3, "error", Str, Omit),
];

/// `k8s.io.api.policy.v1.Eviction`
const EVICTION: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "deleteOptions", Msg(DELETE_OPTIONS), Ptr)];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions`
const DELETE_OPTIONS: Fields = &[
    f(1, "gracePeriodSeconds", I64, Ptr),
    f(2, "preconditions", Msg(PRECONDITIONS), Ptr),
    f(3, "orphanDependents", Bool, Ptr),
    f(4, "propagationPolicy", Str, Ptr),
    f(5, "dryRun", List(&Str), Omit),
    f(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool, Ptr),
];

/// `k8s.io.apimachinery.pkg.apis.meta.v1.Preconditions`
const PRECONDITIONS: Fields = &[f(1, "uid", Str, Ptr), f(2, "resourceVersion", Str, Ptr)];

/// `k8s.io.api.policy.v1.PodDisruptionBudget`
const POD_DISRUPTION_BUDGET: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(POD_DISRUPTION_BUDGET_SPEC), Val),
    f(3, "status", Msg(POD_DISRUPTION_BUDGET_STATUS), Val),
];

/// `k8s.io.api.policy.v1.PodDisruptionBudgetSpec`
const POD_DISRUPTION_BUDGET_SPEC: Fields = &[
    f(1, "minAvailable", IntOrString, Ptr),
    f(2, "selector", Msg(LABEL_SELECTOR), Ptr),
    f(3, "maxUnavailable", IntOrString, Ptr),
    f(4, "unhealthyPodEvictionPolicy", Str, Ptr),
];

/// `k8s.io.api.policy.v1.PodDisruptionBudgetStatus`
const POD_DISRUPTION_BUDGET_STATUS: Fields = &[
    f(1, "observedGeneration", I64, Omit),
    f(2, "disruptedPods", Map(&Time), Omit),
    f(3, "disruptionsAllowed", I32, Val),
    f(4, "currentHealthy", I32, Val),
    f(5, "desiredHealthy", I32, Val),
    f(6, "expectedPods", I32, Val),
    f(7, "conditions", List(&Msg(CONDITION)), Omit),
];

/// `k8s.io.api.rbac.v1.Role`
const ROLE: Fields = &[f(1, "metadata", Msg(OBJECT_META), Val), f(2, "rules", List(&Msg(POLICY_RULE)), Null)];

/// `k8s.io.api.rbac.v1.PolicyRule`
const POLICY_RULE: Fields = &[
    f(1, "verbs", List(&Str), Null),
    f(2, "apiGroups", List(&Str), Omit),
    f(3, "resources", List(&Str), Omit),
    f(4, "resourceNames", List(&Str), Omit),
    f(5, "nonResourceURLs", List(&Str), Omit),
];

/// `k8s.io.api.rbac.v1.ClusterRole`
const CLUSTER_ROLE: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "rules", List(&Msg(POLICY_RULE)), Null),
    f(3, "aggregationRule", Msg(AGGREGATION_RULE), Ptr),
];

/// `k8s.io.api.rbac.v1.AggregationRule`
const AGGREGATION_RULE: Fields = &[f(1, "clusterRoleSelectors", List(&Msg(LABEL_SELECTOR)), Omit)];

/// `k8s.io.api.rbac.v1.RoleBinding`
const ROLE_BINDING: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "subjects", List(&Msg(SUBJECT)), Omit),
    f(3, "roleRef", Msg(ROLE_REF), Val),
];

/// `k8s.io.api.rbac.v1.Subject`
const SUBJECT: Fields =
    &[f(1, "kind", Str, Val), f(2, "apiGroup", Str, Omit), f(3, "name", Str, Val), f(4, "namespace", Str, Omit)];

/// `k8s.io.api.rbac.v1.RoleRef`
const ROLE_REF: Fields = &[f(1, "apiGroup", Str, Val), f(2, "kind", Str, Val), f(3, "name", Str, Val)];

/// `k8s.io.api.rbac.v1.ClusterRoleBinding`
const CLUSTER_ROLE_BINDING: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "subjects", List(&Msg(SUBJECT)), Omit),
    f(3, "roleRef", Msg(ROLE_REF), Val),
];

/// `k8s.io.api.networking.v1.Ingress`
const INGRESS: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "spec", Msg(INGRESS_SPEC), Val),
    f(3, "status", Msg(INGRESS_STATUS), Val),
];

/// `k8s.io.api.networking.v1.IngressSpec`
const INGRESS_SPEC: Fields = &[
    f(4, "ingressClassName", Str, Ptr),
    f(1, "defaultBackend", Msg(INGRESS_BACKEND), Ptr),
    f(2, "tls", List(&Msg(INGRESS_TLS)), Omit),
    f(3, "rules", List(&Msg(INGRESS_RULE)), Omit),
];

/// `k8s.io.api.networking.v1.IngressBackend`
const INGRESS_BACKEND: Fields =
    &[f(4, "service", Msg(INGRESS_SERVICE_BACKEND), Ptr), f(3, "resource", Msg(TYPED_LOCAL_OBJECT_REFERENCE), Ptr)];

/// `k8s.io.api.networking.v1.IngressServiceBackend`
const INGRESS_SERVICE_BACKEND: Fields = &[f(1, "name", Str, Val), f(2, "port", Msg(SERVICE_BACKEND_PORT), Val)];

/// `k8s.io.api.networking.v1.ServiceBackendPort`
const SERVICE_BACKEND_PORT: Fields = &[f(1, "name", Str, Omit), f(2, "number", I32, Omit)];

/// `k8s.io.api.networking.v1.IngressTLS`
const INGRESS_TLS: Fields = &[f(1, "hosts", List(&Str), Omit), f(2, "secretName", Str, Omit)];

/// `k8s.io.api.networking.v1.IngressRule`
const INGRESS_RULE: Fields = &[f(1, "host", Str, Omit), f(2, "", Msg(INGRESS_RULE_VALUE), Inline)];

/// `k8s.io.api.networking.v1.IngressRuleValue`
const INGRESS_RULE_VALUE: Fields = &[f(1, "http", Msg(HTTP_INGRESS_RULE_VALUE), Ptr)];

/// `k8s.io.api.networking.v1.HTTPIngressRuleValue`
const HTTP_INGRESS_RULE_VALUE: Fields = &[f(1, "paths", List(&Msg(HTTP_INGRESS_PATH)), Null)];

/// `k8s.io.api.networking.v1.HTTPIngressPath`
const HTTP_INGRESS_PATH: Fields =
    &[f(1, "path", Str, Omit), f(3, "pathType", Str, Ptr), f(2, "backend", Msg(INGRESS_BACKEND), Val)];

/// `k8s.io.api.networking.v1.IngressStatus`
const INGRESS_STATUS: Fields = &[f(1, "loadBalancer", Msg(INGRESS_LOAD_BALANCER_STATUS), Val)];

/// `k8s.io.api.networking.v1.IngressLoadBalancerStatus`
const INGRESS_LOAD_BALANCER_STATUS: Fields = &[f(1, "ingress", List(&Msg(INGRESS_LOAD_BALANCER_INGRESS)), Omit)];

/// `k8s.io.api.networking.v1.IngressLoadBalancerIngress`
const INGRESS_LOAD_BALANCER_INGRESS: Fields =
    &[f(1, "ip", Str, Omit), f(2, "hostname", Str, Omit), f(4, "ports", List(&Msg(INGRESS_PORT_STATUS)), Omit)];

/// `k8s.io.api.networking.v1.IngressPortStatus`
const INGRESS_PORT_STATUS: Fields = &[f(1, "port", I32, Val), f(2, "protocol", Str, Val), f(3, "error", Str, Ptr)];

/// `k8s.io.api.scheduling.v1.PriorityClass`
const PRIORITY_CLASS: Fields = &[
    f(1, "metadata", Msg(OBJECT_META), Val),
    f(2, "value", I32, Val),
    f(3, "globalDefault", Bool, Omit),
    f(4, "description", Str, Omit),
    f(5, "preemptionPolicy", Str, Ptr),
];
