//! One module per API group (`core`, `apps`, `batch`, …) with each resource's defaulting and
//! validation as a [`crate::Strategy`], plus the shared pieces they are built from: pod specs,
//! containers, volumes, probes, quantities, ports, label selectors, value formats.

pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod containers;
pub mod coordination;
pub mod core;
pub mod cron;
pub mod discovery;
pub mod events;
pub mod formats;
pub mod label_selector;
pub mod limits;
pub mod networking;
pub mod persistent_volumes;
pub mod pod;
pub mod pod_spec;
pub mod policy;
pub mod ports;
pub mod probes;
pub mod quantity;
pub mod rbac;
pub mod semantic;
pub mod service;
pub mod volumes;

#[cfg(test)]
mod tests {
    //! The strategies as the API server drives them: JSON in, through the resource table.
    use crate::resources;
    use serde_json::{json, Value};

    fn create(group: &str, resource: &str, body: Value) -> (Value, Vec<String>) {
        let (obj, errs) = create_errors(group, resource, body);
        (obj, errs.iter().map(|e| e.to_string()).collect())
    }

    fn create_errors(group: &str, resource: &str, body: Value) -> (Value, Vec<crate::FieldError>) {
        let info = resources::find(group, "v1", resource).expect("resource");
        let s = &info.strategy;
        let mut obj = s.normalize(body).expect("decodes").object;
        s.prepare_for_create(&mut obj).expect("prepares");
        let errs = s.validate(&obj, None).expect("validates");
        (obj, errs)
    }

    #[test]
    fn pod_create_through_the_table_shows_upstream_defaults() {
        let (pod, errs) = create(
            "",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}],
                            "readinessProbe": {"httpGet": {"port": 80}},
                            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}}),
        );
        assert!(errs.is_empty(), "{errs:?}");
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                   "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(pod["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    }

    #[test]
    fn deployment_selector_mismatch_is_reported_through_the_table() {
        let (_, errs) = create_errors(
            "apps",
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "api"}},
                                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        assert_eq!(errs[0].value, Some(json!({"app": "api"})));
        assert_eq!(errs[0].detail, "`selector` does not match template `labels`");
    }

    #[test]
    fn service_and_namespace_defaults_through_the_table() {
        let (svc, errs) = create(
            "",
            "services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(svc["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
        let (ns, errs) =
            create("", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}));
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team");
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
    }

    #[test]
    fn job_update_through_the_table_rejects_template_changes() {
        let info = resources::find("batch", "v1", "jobs").expect("jobs");
        let s = &info.strategy;
        let body = json!({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": "pi", "namespace": "default", "uid": "u-1"},
                          "spec": {"template": {"spec": {"restartPolicy": "Never",
                                   "containers": [{"name": "pi", "image": "perl"}]}}}});
        let mut old = s.normalize(body).expect("decodes").object;
        s.prepare_for_create(&mut old).expect("prepares");
        assert!(s.validate(&old, None).expect("validates").is_empty());
        assert_eq!(old["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], "u-1");
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5");
        s.prepare_for_update(&mut new, &old).expect("prepares");
        let errs = s.validate(&new, Some(&old)).expect("validates");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template");
    }

    #[test]
    fn generation_is_tracked_by_the_kinds_whose_strategies_bump_it() {
        let mut tracking: Vec<String> = resources::all()
            .iter()
            .filter(|r| r.strategy.tracks_generation())
            .map(|r| format!("{}/{}/{}", r.group, r.version, r.resource))
            .collect();
        tracking.sort();
        let want = [
            "/v1/pods",
            "/v1/replicationcontrollers",
            "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            "apiextensions.k8s.io/v1/customresourcedefinitions",
            "apps/v1/daemonsets",
            "apps/v1/deployments",
            "apps/v1/replicasets",
            "apps/v1/statefulsets",
            "autoscaling/v1/horizontalpodautoscalers",
            "autoscaling/v2/horizontalpodautoscalers",
            "batch/v1/cronjobs",
            "batch/v1/jobs",
            "networking.k8s.io/v1/ingresses",
            "networking.k8s.io/v1/networkpolicies",
            "networking.k8s.io/v1/servicecidrs",
            "policy/v1/poddisruptionbudgets",
        ];
        assert_eq!(tracking, want);
        // Every one of them has a spec to count.
        assert!(resources::all().iter().filter(|r| r.strategy.tracks_generation()).all(|r| r.has_spec));
    }

    #[test]
    fn a_deployments_annotations_count_for_its_generation_and_survive_a_status_update() {
        let s = &resources::find("apps", "v1", "deployments").expect("deployments").strategy;
        let old = json!({"metadata": {"annotations": {"a": "1"}}, "spec": {"replicas": 1}});
        let mut new = old.clone();
        assert!(!s.generation_changed(&new, &old));
        new["metadata"]["annotations"]["a"] = json!("2");
        assert!(s.generation_changed(&new, &old));
        assert!(s.status_update_keeps_annotations());
        let rs = &resources::find("apps", "v1", "replicasets").expect("replicasets").strategy;
        assert!(!rs.generation_changed(&new, &old), "only the spec counts for a ReplicaSet");
        assert!(!rs.status_update_keeps_annotations());
    }

    #[test]
    fn selectable_fields_and_their_values_through_the_table() {
        let field = |group: &str, resource: &str, obj: &Value, f: &str| -> (bool, String) {
            let s = &resources::find(group, "v1", resource).expect("resource").strategy;
            (s.selectable_fields().contains(&f), s.field_value(obj, f))
        };
        let pod = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert_eq!(field("", "pods", &pod, "spec.nodeName"), (true, "n1".into()));
        assert_eq!(field("", "pods", &pod, "spec.hostNetwork"), (true, "false".into()));
        assert_eq!(field("", "pods", &pod, "status.podIP"), (true, String::new()));
        assert_eq!(field("", "nodes", &json!({"spec": {}}), "spec.unschedulable"), (true, "false".into()));
        let ev = json!({"source": {"component": "kubelet"}, "reason": "Pulled"});
        assert_eq!(field("", "events", &ev, "source"), (true, "kubelet".into()));
        assert_eq!(field("", "events", &ev, "reason"), (true, "Pulled".into()));
        assert_eq!(field("", "secrets", &json!({"type": "Opaque"}), "type"), (true, "Opaque".into()));
        assert_eq!(
            field("", "services", &json!({"spec": {"type": "NodePort"}}), "spec.type"),
            (true, "NodePort".into())
        );
        assert!(!field("", "configmaps", &json!({}), "data").0);
        let csr = &resources::find("certificates.k8s.io", "v1", "certificatesigningrequests").expect("csr").strategy;
        assert_eq!(csr.selectable_fields(), ["spec.signerName"]);
    }

    #[test]
    fn the_kinds_an_update_may_create() {
        let mut creating: Vec<String> = resources::all()
            .iter()
            .filter(|r| r.strategy.allow_create_on_update())
            .map(|r| format!("{}/{}", r.group, r.resource))
            .collect();
        creating.sort();
        assert_eq!(
            creating,
            [
                "/endpoints",
                "/events",
                "/limitranges",
                "/resourcequotas",
                "coordination.k8s.io/leases",
                "events.k8s.io/events",
                "rbac.authorization.k8s.io/clusterrolebindings",
                "rbac.authorization.k8s.io/clusterroles",
                "rbac.authorization.k8s.io/rolebindings",
                "rbac.authorization.k8s.io/roles",
            ]
        );
    }

    #[test]
    fn deleting_a_namespace_or_a_definition_plans_its_wait() {
        use crate::deletion::{DeleteOptions, DeletePlan};
        let opts = DeleteOptions::default();
        let ns = &resources::find("", "v1", "namespaces").expect("namespaces").strategy;
        let team = json!({"metadata": {"name": "team"}, "spec": {"finalizers": ["kubernetes"]}});
        assert_eq!(ns.on_delete(&team, &opts).status_phase, Some("Terminating"));
        assert!(ns.deletion_held(&team));
        assert!(!ns.deletion_held(&json!({"metadata": {"name": "team"}, "spec": {"finalizers": []}})));
        let crd = &resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("crds").strategy;
        let w = json!({"metadata": {"name": "widgets.example.com"}});
        assert_eq!(crd.on_delete(&w, &opts).finalizers, [crate::strategies::apiextensions::CLEANUP_FINALIZER]);
        let deleting =
            json!({"metadata": {"name": "widgets.example.com", "deletionTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(crd.on_delete(&deleting, &opts), DeletePlan::default());
        let cm = &resources::find("", "v1", "configmaps").expect("configmaps").strategy;
        assert_eq!(cm.on_delete(&w, &opts), DeletePlan::default());
    }
}
