//! One module per API group (`core`, `apps`, `batch`, …) with each resource's defaulting and
//! validation as a [`crate::Strategy`], plus the shared pieces they are built from: pod specs,
//! containers, volumes, probes, quantities, ports, label selectors, value formats.

pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod containers;
pub mod core;
pub mod cron;
pub mod discovery;
pub mod formats;
pub mod label_selector;
pub mod limits;
pub mod networking;
pub mod persistent_volumes;
pub mod pod;
pub mod pod_spec;
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
}
