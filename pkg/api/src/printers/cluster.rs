//! Printers for networking, RBAC, storage, scheduling, coordination, certificates and admission kinds.

use super::{
    arr, at, bool_at, col, core_api::load_balancer_addresses, docs, format_label_selector, human_nanos, int_at,
    opt_int, quantity_ptr, str_at, str_or, wide, Obj, Printer, AGE, NAME,
};
use serde_json::Value;

// ---- networking.k8s.io ----

pub(super) static INGRESS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Class",
            "string",
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
        col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let rules = arr(v, &["spec", "rules"]);
        // Upstream's formatHosts: up to three non-empty hosts, `*` when none; ` + N more...` once a rule
        // follows the third host.
        let (mut hosts, mut more) = (Vec::new(), false);
        for rule in rules {
            if hosts.len() == 3 {
                more = true;
                break;
            }
            match str_at(rule, &["host"]) {
                "" => {}
                host => hosts.push(host),
            }
        }
        let hosts = match (hosts.is_empty(), more) {
            (true, _) => "*".to_string(),
            (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - 3),
            (false, false) => hosts.join(","),
        };
        let ports = if arr(v, &["spec", "tls"]).is_empty() { "80" } else { "80, 443" };
        vec![
            o.name().into(),
            at(v, &["spec", "ingressClassName"]).and_then(Value::as_str).unwrap_or("<none>").into(),
            hosts.into(),
            load_balancer_addresses(arr(v, &["status", "loadBalancer", "ingress"])).join(",").into(),
            ports.into(),
            o.age().into(),
        ]
    },
};

pub(super) static INGRESS_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col("Controller", "string", "Controller that is responsible for handling this class"),
        col("Parameters", "string", "A reference to a resource with additional parameters"),
        AGE,
    ],
    cells: |o| {
        let parameters = match at(o.v, &["spec", "parameters"]) {
            None => "<none>".to_string(),
            Some(p) => {
                let kind = match at(p, &["apiGroup"]).and_then(Value::as_str) {
                    Some(group) => format!("{}.{group}", str_at(p, &["kind"])),
                    None => str_at(p, &["kind"]).to_string(),
                };
                format!("{kind}/{}", str_at(p, &["name"]))
            }
        };
        vec![o.name().into(), str_at(o.v, &["spec", "controller"]).into(), parameters.into(), o.age().into()]
    },
};

pub(super) static NETWORK_POLICY: Printer = Printer {
    columns: &[NAME, col("Pod-Selector", "string", docs::NETPOL_POD_SELECTOR), AGE],
    cells: |o| {
        // podSelector is not a pointer upstream: a missing one is the empty selector.
        let empty = Value::Object(serde_json::Map::new());
        let selector = at(o.v, &["spec", "podSelector"]).unwrap_or(&empty);
        vec![o.name().into(), format_label_selector(Some(selector)).into(), o.age().into()]
    },
};

pub(super) static SERVICE_CIDR: Printer = Printer {
    columns: &[NAME, col("CIDRs", "string", docs::SERVICECIDR_CIDRS), AGE],
    cells: |o| {
        let cidrs: Vec<&str> = arr(o.v, &["spec", "cidrs"]).iter().filter_map(Value::as_str).collect();
        vec![o.name().into(), cidrs.join(",").into(), o.age().into()]
    },
};

/// Upstream's IPAddress rows also carry an Age cell that has no column (kubectl never shows it); it is left
/// out so that rows stay as long as the columns.
pub(super) static IP_ADDRESS: Printer = Printer {
    columns: &[NAME, col("ParentRef", "string", docs::IPADDRESS_PARENT_REF)],
    cells: |o| {
        let parent = match at(o.v, &["spec", "parentRef"]) {
            None => "<none>".to_string(),
            Some(p) => {
                let (group, resource) = (str_at(p, &["group"]), str_at(p, &["resource"]));
                let mut s =
                    if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") }.to_lowercase();
                if let Some(ns) = at(p, &["namespace"]).and_then(Value::as_str).filter(|ns| !ns.is_empty()) {
                    s = format!("{s}/{ns}");
                }
                format!("{s}/{}", str_at(p, &["name"]))
            }
        };
        vec![o.name().into(), parent.into()]
    },
};

// ---- rbac.authorization.k8s.io ----

macro_rules! binding_printer {
    ($name:ident, $role_doc:expr, $what:literal) => {
        pub(super) static $name: Printer = Printer {
            columns: &[
                NAME,
                col("Role", "string", $role_doc),
                AGE,
                wide("Users", "string", concat!("Users in the ", $what)),
                wide("Groups", "string", concat!("Groups in the ", $what)),
                wide("ServiceAccounts", "string", concat!("ServiceAccounts in the ", $what)),
            ],
            cells: binding_cells,
        };
    };
}

binding_printer!(ROLE_BINDING, docs::ROLEBINDING_ROLE_REF, "roleBinding");
binding_printer!(CLUSTER_ROLE_BINDING, docs::CLUSTERROLEBINDING_ROLE_REF, "clusterRoleBinding");

fn binding_cells(o: &Obj) -> Vec<Value> {
    let v = o.v;
    let role = format!("{}/{}", str_at(v, &["roleRef", "kind"]), str_at(v, &["roleRef", "name"]));
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in arr(v, &["subjects"]) {
        let name = str_at(s, &["name"]);
        match str_at(s, &["kind"]) {
            "ServiceAccount" => sas.push(format!("{}/{name}", str_at(s, &["namespace"]))),
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            _ => {}
        }
    }
    vec![
        o.name().into(),
        role.into(),
        o.age().into(),
        users.join(", ").into(),
        groups.join(", ").into(),
        sas.join(", ").into(),
    ]
}

// ---- storage.k8s.io ----

pub(super) static STORAGE_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col("Provisioner", "string", docs::STORAGECLASS_PROVISIONER),
        col("ReclaimPolicy", "string", docs::STORAGECLASS_RECLAIM_POLICY),
        col("VolumeBindingMode", "string", docs::STORAGECLASS_BINDING_MODE),
        col("AllowVolumeExpansion", "string", docs::STORAGECLASS_ALLOW_EXPANSION),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let is_default =
            ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
                .iter()
                .any(|a| str_at(v, &["metadata", "annotations", a]) == "true");
        let name = if is_default { format!("{} (default)", o.name()) } else { o.name().to_string() };
        vec![
            name.into(),
            str_at(v, &["provisioner"]).into(),
            str_or(v, &["reclaimPolicy"], "Delete").into(),
            str_or(v, &["volumeBindingMode"], "Immediate").into(),
            bool_at(v, &["allowVolumeExpansion"]).unwrap_or(false).into(),
            o.age().into(),
        ]
    },
};

pub(super) static VOLUME_ATTRIBUTES_CLASS: Printer = Printer {
    columns: &[NAME, col("DriverName", "string", docs::VAC_DRIVER_NAME), AGE],
    cells: |o| vec![o.name().into(), str_at(o.v, &["driverName"]).into(), o.age().into()],
};

pub(super) static VOLUME_ATTACHMENT: Printer = Printer {
    columns: &[
        NAME,
        super::ColumnDefinition {
            name: "Attacher",
            type_: "string",
            format: "name",
            description: docs::VA_ATTACHER,
            priority: 0,
        },
        col("PV", "string", docs::VA_PERSISTENT_VOLUME_NAME),
        col("Node", "string", docs::VA_NODE_NAME),
        col("Attached", "boolean", docs::VA_ATTACHED),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        vec![
            o.name().into(),
            str_at(v, &["spec", "attacher"]).into(),
            str_at(v, &["spec", "source", "persistentVolumeName"]).into(),
            str_at(v, &["spec", "nodeName"]).into(),
            bool_at(v, &["status", "attached"]).unwrap_or(false).into(),
            o.age().into(),
        ]
    },
};

pub(super) static CSI_DRIVER: Printer = Printer {
    columns: &[
        NAME,
        col("AttachRequired", "boolean", docs::CSIDRIVER_ATTACH_REQUIRED),
        col("PodInfoOnMount", "boolean", docs::CSIDRIVER_POD_INFO_ON_MOUNT),
        col("StorageCapacity", "boolean", docs::CSIDRIVER_STORAGE_CAPACITY),
        col("TokenRequests", "string", docs::CSIDRIVER_TOKEN_REQUESTS),
        col("RequiresRepublish", "boolean", docs::CSIDRIVER_REQUIRES_REPUBLISH),
        col("Modes", "string", docs::CSIDRIVER_MODES),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let flag = |f: &str, default: bool| bool_at(v, &["spec", f]).unwrap_or(default);
        let tokens = match at(v, &["spec", "tokenRequests"]).and_then(Value::as_array) {
            Some(t) => t.iter().map(|t| str_at(t, &["audience"])).collect::<Vec<_>>().join(","),
            None => "<unset>".to_string(),
        };
        // volumeLifecycleModes defaults to [Persistent].
        let modes: Vec<&str> = arr(v, &["spec", "volumeLifecycleModes"]).iter().filter_map(Value::as_str).collect();
        let modes = if modes.is_empty() { "Persistent".to_string() } else { modes.join(",") };
        vec![
            o.name().into(),
            flag("attachRequired", true).into(),
            flag("podInfoOnMount", false).into(),
            flag("storageCapacity", false).into(),
            tokens.into(),
            flag("requiresRepublish", false).into(),
            modes.into(),
            o.age().into(),
        ]
    },
};

pub(super) static CSI_NODE: Printer = Printer {
    columns: &[
        NAME,
        col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
        AGE,
    ],
    cells: |o| vec![o.name().into(), arr(o.v, &["spec", "drivers"]).len().into(), o.age().into()],
};

pub(super) static CSI_STORAGE_CAPACITY: Printer = Printer {
    columns: &[
        NAME,
        col("StorageClassName", "string", docs::CSISC_STORAGE_CLASS_NAME),
        col("Capacity", "string", docs::CSISC_CAPACITY),
    ],
    cells: |o| {
        let capacity = match at(o.v, &["capacity"]) {
            Some(_) => quantity_ptr(o.v, &["capacity"]),
            None => "<unset>".to_string(),
        };
        vec![o.name().into(), str_at(o.v, &["storageClassName"]).into(), capacity.into()]
    },
};

// ---- scheduling, node, coordination ----

pub(super) static PRIORITY_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col("Value", "integer", docs::PRIORITYCLASS_VALUE),
        col("Global-Default", "boolean", docs::PRIORITYCLASS_GLOBAL_DEFAULT),
        AGE,
        col("PreemptionPolicy", "string", docs::PRIORITYCLASS_PREEMPTION_POLICY),
    ],
    cells: |o| {
        vec![
            o.name().into(),
            int_at(o.v, &["value"]).into(),
            bool_at(o.v, &["globalDefault"]).unwrap_or(false).into(),
            o.age().into(),
            str_or(o.v, &["preemptionPolicy"], "PreemptLowerPriority").into(),
        ]
    },
};

/// Upstream describes the Handler column with a key ObjectMeta does not have: the description is empty.
pub(super) static RUNTIME_CLASS: Printer = Printer {
    columns: &[NAME, col("Handler", "string", ""), AGE],
    cells: |o| vec![o.name().into(), str_at(o.v, &["handler"]).into(), o.age().into()],
};

pub(super) static LEASE: Printer = Printer {
    columns: &[NAME, col("Holder", "string", docs::LEASE_HOLDER_IDENTITY), AGE],
    cells: |o| vec![o.name().into(), str_at(o.v, &["spec", "holderIdentity"]).into(), o.age().into()],
};

// ---- certificates.k8s.io ----

pub(super) static CERTIFICATE_SIGNING_REQUEST: Printer = Printer {
    columns: &[
        NAME,
        AGE,
        col("SignerName", "string", docs::CSR_SIGNER_NAME),
        col("Requestor", "string", docs::CSR_REQUEST),
        col("RequestedDuration", "string", docs::CSR_EXPIRATION_SECONDS),
        col("Condition", "string", docs::CSR_CONDITIONS),
    ],
    cells: |o| {
        let v = o.v;
        let conditions = arr(v, &["status", "conditions"]);
        let has = |ty: &str| conditions.iter().any(|c| str_at(c, &["type"]) == ty);
        let mut status = if has("Denied") {
            "Denied"
        } else if has("Approved") {
            "Approved"
        } else {
            "Pending"
        }
        .to_string();
        if has("Failed") {
            status.push_str(",Failed");
        }
        if !str_at(v, &["status", "certificate"]).is_empty() {
            status.push_str(",Issued");
        }
        let duration = opt_int(v, &["spec", "expirationSeconds"])
            .map_or_else(|| "<none>".to_string(), |s| human_nanos(i128::from(s) * 1_000_000_000));
        vec![
            o.name().into(),
            o.age().into(),
            str_or(v, &["spec", "signerName"], "<none>").into(),
            str_at(v, &["spec", "username"]).into(),
            duration.into(),
            status.into(),
        ]
    },
};

// ---- apiregistration.k8s.io ----

/// Upstream's APIService table (`kube-aggregator/pkg/registry/apiservice/etcd`): the Service as
/// `namespace/name` (`Local` without one) and the `Available` condition, with its reason when it
/// is not `True`.
pub(super) static API_SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col("Service", "string", "The reference to the service that hosts this API endpoint."),
        col("Available", "string", "Whether this service is available."),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let service = match at(v, &["spec", "service"]) {
            Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
            None => "Local".to_string(),
        };
        let available = match arr(v, &["status", "conditions"]).iter().find(|c| str_at(c, &["type"]) == "Available") {
            None => "Unknown".to_string(),
            Some(c) => match (str_at(c, &["status"]), str_at(c, &["reason"])) {
                ("True", _) => "True".to_string(),
                (status, "") => status.to_string(),
                (status, reason) => format!("{status} ({reason})"),
            },
        };
        vec![o.name().into(), service.into(), available.into(), o.age().into()]
    },
};

// ---- admissionregistration.k8s.io ----

pub(super) static WEBHOOK_CONFIGURATION: Printer = Printer {
    columns: &[
        NAME,
        col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
        AGE,
    ],
    cells: |o| vec![o.name().into(), arr(o.v, &["webhooks"]).len().into(), o.age().into()],
};

fn param_kind(v: &Value) -> String {
    match at(v, &["spec", "paramKind"]) {
        Some(p) => format!("{}/{}", str_at(p, &["apiVersion"]), str_at(p, &["kind"])),
        None => "<unset>".to_string(),
    }
}

const PARAM_KIND: super::ColumnDefinition =
    col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy");

pub(super) static VALIDATING_ADMISSION_POLICY: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        PARAM_KIND,
        AGE,
    ],
    cells: |o| {
        vec![o.name().into(), arr(o.v, &["spec", "validations"]).len().into(), param_kind(o.v).into(), o.age().into()]
    },
};

pub(super) static MUTATING_ADMISSION_POLICY: Printer = Printer {
    columns: &[
        NAME,
        col("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration"),
        PARAM_KIND,
        AGE,
    ],
    cells: |o| {
        vec![o.name().into(), arr(o.v, &["spec", "mutations"]).len().into(), param_kind(o.v).into(), o.age().into()]
    },
};

pub(super) static ADMISSION_POLICY_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
        col("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
        AGE,
    ],
    cells: |o| {
        let param = match at(o.v, &["spec", "paramRef"]) {
            None => "<unset>".to_string(),
            Some(p) => match (str_at(p, &["name"]), str_at(p, &["namespace"])) {
                ("", _) => at(p, &["selector"]).map_or_else(|| "<unset>".to_string(), go_label_selector_string),
                (name, "") => format!("*/{name}"),
                (name, ns) => format!("{ns}/{name}"),
            },
        };
        vec![o.name().into(), str_at(o.v, &["spec", "policyName"]).into(), param.into(), o.age().into()]
    },
};

/// The generated Go `(*LabelSelector).String()` (`&LabelSelector{MatchLabels:map[string]string{a: b,},…}`).
fn go_label_selector_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k, v.as_str().unwrap_or_default())).collect())
        .unwrap_or_default();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: String = arr(sel, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = arr(e, &["values"]).iter().filter_map(Value::as_str).collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!("&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")
}

#[cfg(test)]
mod tests {
    use super::super::{columns, row, tests::now};
    use serde_json::{json, Value};

    fn cells(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        row(group, kind, &obj, now())
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2026-11-29T18:00:00Z"})
    }

    #[test]
    fn ingresses_print_class_hosts_address_and_ports() {
        let spaced = json!({"spec": {"rules": [{"host": "a"}, {}, {}, {"host": "b"}, {"host": "c"}]}});
        assert_eq!(cells("networking.k8s.io", "Ingress", spaced)[2], json!("a,b,c"));
        let ing = json!({"metadata": meta("web"), "spec": {"ingressClassName": "traefik",
            "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}, {}, {"host": "c.example.com"}, {"host": "d.example.com"}],
            "tls": [{"hosts": ["a.example.com"]}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.10"}, {"ip": "192.168.1.10"}]}}});
        assert_eq!(
            cells("networking.k8s.io", "Ingress", ing),
            [
                json!("web"),
                json!("traefik"),
                json!("a.example.com,b.example.com,c.example.com + 2 more..."),
                json!("192.168.1.10"),
                json!("80, 443"),
                json!("3h")
            ]
        );
        let bare = json!({"metadata": meta("any"), "spec": {"defaultBackend": {}}});
        assert_eq!(
            cells("networking.k8s.io", "Ingress", bare)[1..5],
            [json!("<none>"), json!("*"), json!(""), json!("80")]
        );
        let class = json!({"metadata": meta("traefik"), "spec": {"controller": "traefik.io/ingress-controller",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "ext"}}});
        assert_eq!(
            cells("networking.k8s.io", "IngressClass", class)[1..3],
            [json!("traefik.io/ingress-controller"), json!("IngressParameters.k8s.example.com/ext")]
        );
    }

    #[test]
    fn network_policies_cidrs_and_ip_addresses() {
        let np = json!({"metadata": meta("deny"), "spec": {"podSelector": {}}});
        assert_eq!(cells("networking.k8s.io", "NetworkPolicy", np), [json!("deny"), json!("<none>"), json!("3h")]);
        let np = json!({"metadata": meta("db"), "spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
        assert_eq!(cells("networking.k8s.io", "NetworkPolicy", np)[1], json!("role=db"));
        let cidr = json!({"metadata": meta("kubernetes"), "spec": {"cidrs": ["10.43.0.0/16", "fd00:43::/112"]}});
        assert_eq!(cells("networking.k8s.io", "ServiceCIDR", cidr)[1], json!("10.43.0.0/16,fd00:43::/112"));
        let ip = json!({"metadata": meta("10.43.0.1"), "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}});
        assert_eq!(
            cells("networking.k8s.io", "IPAddress", ip),
            [json!("10.43.0.1"), json!("services/default/kubernetes")]
        );
    }

    #[test]
    fn role_bindings_print_role_and_subjects() {
        let rb = json!({"metadata": meta("admins"), "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "ops"}, {"kind": "User", "name": "bob"},
                {"kind": "ServiceAccount", "namespace": "ci", "name": "deployer"}]});
        assert_eq!(
            cells("rbac.authorization.k8s.io", "RoleBinding", rb),
            [
                json!("admins"),
                json!("ClusterRole/admin"),
                json!("3h"),
                json!("alice, bob"),
                json!("ops"),
                json!("ci/deployer")
            ]
        );
        let cols: Vec<_> = columns("rbac.authorization.k8s.io", "ClusterRoleBinding")
            .iter()
            .map(|c| (c.name, c.priority, c.description))
            .collect();
        assert_eq!(cols[3], ("Users", 1, "Users in the clusterRoleBinding"));
    }

    #[test]
    fn storage_classes_attachments_and_csi() {
        let sc = json!({"metadata": {"name": "local-path", "creationTimestamp": "2026-11-29T18:00:00Z",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path",
            "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            cells("storage.k8s.io", "StorageClass", sc),
            [
                json!("local-path (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("3h")
            ]
        );
        let va = json!({"metadata": meta("csi-123"), "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": true}});
        assert_eq!(
            cells("storage.k8s.io", "VolumeAttachment", va)[1..5],
            [json!("ebs.csi.aws.com"), json!("pv-1"), json!("n1"), json!(true)]
        );
        let driver = json!({"metadata": meta("csi.example.com"), "spec": {"tokenRequests": [{"audience": "vault"}, {"audience": "gcp"}]}});
        assert_eq!(
            cells("storage.k8s.io", "CSIDriver", driver)[1..7],
            [json!(true), json!(false), json!(false), json!("vault,gcp"), json!(false), json!("Persistent")]
        );
        let node = json!({"metadata": meta("n1"), "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(cells("storage.k8s.io", "CSINode", node)[1], json!(2));
        let cap = json!({"metadata": meta("c"), "storageClassName": "fast", "capacity": "2048Mi"});
        assert_eq!(cells("storage.k8s.io", "CSIStorageCapacity", cap), [json!("c"), json!("fast"), json!("2Gi")]);
        assert_eq!(cells("storage.k8s.io", "CSIStorageCapacity", json!({}))[2], json!("<unset>"));
        let vac = json!({"metadata": meta("gold"), "driverName": "csi.example.com"});
        assert_eq!(
            cells("storage.k8s.io", "VolumeAttributesClass", vac),
            [json!("gold"), json!("csi.example.com"), json!("3h")]
        );
    }

    #[test]
    fn priority_runtime_classes_and_leases() {
        let pc = json!({"metadata": meta("system-node-critical"), "value": 2000001000, "globalDefault": false});
        assert_eq!(
            cells("scheduling.k8s.io", "PriorityClass", pc),
            [
                json!("system-node-critical"),
                json!(2000001000),
                json!(false),
                json!("3h"),
                json!("PreemptLowerPriority")
            ]
        );
        let rc = json!({"metadata": meta("gvisor"), "handler": "runsc"});
        assert_eq!(cells("node.k8s.io", "RuntimeClass", rc), [json!("gvisor"), json!("runsc"), json!("3h")]);
        let lease =
            json!({"metadata": meta("k1s-0"), "spec": {"holderIdentity": "k1s-0_1234", "leaseDurationSeconds": 40}});
        assert_eq!(cells("coordination.k8s.io", "Lease", lease), [json!("k1s-0"), json!("k1s-0_1234"), json!("3h")]);
    }

    #[test]
    fn certificate_signing_requests() {
        let csr = json!({"metadata": meta("node-csr-abc"), "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "username": "system:node:n1", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        assert_eq!(
            cells("certificates.k8s.io", "CertificateSigningRequest", csr),
            [
                json!("node-csr-abc"),
                json!("3h"),
                json!("kubernetes.io/kube-apiserver-client-kubelet"),
                json!("system:node:n1"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        let denied = json!({"status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]}});
        let c = cells("certificates.k8s.io", "CertificateSigningRequest", denied);
        assert_eq!(
            (c[2].clone(), c[4].clone(), c[5].clone()),
            (json!("<none>"), json!("<none>"), json!("Denied,Failed"))
        );
    }

    #[test]
    fn api_services_print_their_service_and_availability() {
        let local = json!({"metadata": meta("v1.apps"), "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            cells("apiregistration.k8s.io", "APIService", local),
            vec![json!("v1.apps"), json!("Local"), json!("True"), json!("3h")]
        );
        let remote = json!({"metadata": meta("v1beta1.metrics.k8s.io"),
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        let c = cells("apiregistration.k8s.io", "APIService", remote);
        assert_eq!(c[1..3], [json!("kube-system/metrics-server"), json!("False (MissingEndpoints)")]);
        let no_reason = json!({"spec": {}, "status": {"conditions": [{"type": "Available", "status": "False"}]}});
        assert_eq!(cells("apiregistration.k8s.io", "APIService", no_reason)[2], json!("False"));
        assert_eq!(cells("apiregistration.k8s.io", "APIService", json!({"spec": {}}))[2], json!("Unknown"));
        let names: Vec<&str> = columns("apiregistration.k8s.io", "APIService").iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Service", "Available", "Age"]);
    }

    #[test]
    fn admission_configuration_kinds() {
        let wh = json!({"metadata": meta("hooks"), "webhooks": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(cells("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", wh)[1], json!(2));
        let vap = json!({"metadata": meta("p"), "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": "true"}]}});
        assert_eq!(
            cells("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", vap)[1..3],
            [json!(1), json!("v1/ConfigMap")]
        );
        let binding = |param: Value| {
            cells(
                "admissionregistration.k8s.io",
                "ValidatingAdmissionPolicyBinding",
                json!({"metadata": meta("b"), "spec": {"policyName": "p", "paramRef": param}}),
            )[2]
            .clone()
        };
        assert_eq!(binding(json!({"name": "cfg", "namespace": "ns"})), json!("ns/cfg"));
        assert_eq!(binding(json!({"name": "cfg"})), json!("*/cfg"));
        assert_eq!(
            binding(json!({"selector": {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]}})),
            json!("&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}")
        );
        assert_eq!(binding(Value::Null), json!("<unset>"));
    }
}
