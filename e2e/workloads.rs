//! End to end with stock kubectl and real containerd: Deployments roll out, roll back and
//! scale; deletion cascades; namespaces empty; Jobs complete; unschedulable pods wait (issue 4);
//! claims get local-path volumes that outlive their pods.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn deployment(name: &str, replicas: u32, image: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxUnavailable: 0, maxSurge: 1}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {image}
        command: ["sh", "-c", "mkdir -p /www; hostname > /www/index.html; exec httpd -f -p 8080 -h /www"]
        readinessProbe:
          httpGet: {{path: /, port: 8080}}
          periodSeconds: 1
"#
    )
}

fn pods_of(s: &Server, app: &str) -> Vec<Value> {
    s.json(&["get", "pods", "-l", &format!("app={app}")])["items"].as_array().cloned().unwrap_or_default()
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

#[test]
fn deployment_rolls_out_updates_rolls_back_and_scales() {
    let s = Server::start_node();
    s.ok_stdin(&["apply", "-f", "-"], &deployment("web", 3, IMAGE));
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let pods = pods_of(&s, "web");
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| p["status"]["phase"] == "Running" && ready(p)), "{pods:?}");
    // set image rolls out with maxUnavailable=0: never fewer than 3 ready.
    s.ok(&["set", "image", "deployment/web", "web=127.0.0.1:5000/busybox:latest"]);
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let rs = s.json(&["get", "rs", "-l", "app=web"]);
    assert_eq!(rs["items"].as_array().map(Vec::len), Some(2), "two ReplicaSets after an update");
    assert_eq!(
        s.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]),
        "127.0.0.1:5000/busybox:latest"
    );
    // rollout undo returns to the previous ReplicaSet.
    s.ok(&["rollout", "undo", "deployment/web"]);
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    assert_eq!(s.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]), IMAGE);
    let history = s.ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('3'), "{history}");
    // Scale to 0, then 2.
    s.ok(&["scale", "deployment/web", "--replicas=0"]);
    eventually(Duration::from_secs(60), "no pods", || pods_of(&s, "web").is_empty().then_some(()));
    s.ok(&["scale", "deployment/web", "--replicas=2"]);
    s.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    eventually(Duration::from_secs(60), "2 ready pods", || {
        let p = pods_of(&s, "web");
        (p.len() == 2 && p.iter().all(ready)).then_some(())
    });
    let events = s.ok(&["get", "events", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}"]);
    for r in ["ScalingReplicaSet", "SuccessfulCreate", "Scheduled", "Started"] {
        assert!(events.lines().any(|l| l == r), "missing {r} event");
    }
}

#[test]
fn deleting_a_deployment_cascades_in_background_and_foreground() {
    let s = Server::start_node();
    s.ok_stdin(&["apply", "-f", "-"], &deployment("bg", 2, IMAGE));
    s.ok(&["rollout", "status", "deployment/bg", "--timeout=180s"]);
    s.ok(&["delete", "deployment", "bg"]);
    eventually(Duration::from_secs(60), "background cascade", || {
        let rs = s.json(&["get", "rs", "-l", "app=bg"])["items"].as_array().map(Vec::len).unwrap_or(0);
        (rs == 0 && pods_of(&s, "bg").is_empty()).then_some(())
    });
    s.ok_stdin(&["apply", "-f", "-"], &deployment("fg", 2, IMAGE));
    s.ok(&["rollout", "status", "deployment/fg", "--timeout=180s"]);
    s.ok(&["delete", "deployment", "fg", "--cascade=foreground", "--wait=true", "--timeout=120s"]);
    // Foreground: the owner goes last, so once it is gone so are its dependents.
    assert_eq!(s.json(&["get", "rs", "-l", "app=fg"])["items"].as_array().map(Vec::len), Some(0));
    eventually(Duration::from_secs(30), "pods gone", || pods_of(&s, "fg").is_empty().then_some(()));
}

#[test]
fn deleting_a_namespace_with_workloads_empties_it() {
    let s = Server::start_node();
    s.ok(&["create", "namespace", "shop"]);
    s.ok_stdin(&["apply", "-n", "shop", "-f", "-"], &deployment("cart", 2, IMAGE));
    s.ok(&["create", "configmap", "settings", "-n", "shop", "--from-literal=a=b"]);
    s.ok(&["expose", "deployment", "cart", "-n", "shop", "--port=80", "--target-port=8080"]);
    s.ok(&["rollout", "status", "deployment/cart", "-n", "shop", "--timeout=180s"]);
    s.ok(&["delete", "namespace", "shop", "--wait=true", "--timeout=180s"]);
    let out = s.kubectl(&["get", "namespace", "shop"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
    let left = s.ok(&["get", "pods,rs,deploy,svc,cm", "-n", "shop", "-o", "name"]);
    assert!(left.trim().is_empty(), "left behind: {left}");
}

#[test]
fn a_job_runs_to_completion() {
    let s = Server::start_node();
    let job = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: count}}\nspec:\n  completions: 2\n  parallelism: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: {IMAGE}\n        command: [\"sh\", \"-c\", \"echo counted\"]\n"
    );
    s.ok_stdin(&["apply", "-f", "-"], &job);
    s.ok(&["wait", "--for=condition=complete", "job/count", "--timeout=180s"]);
    let j = s.json(&["get", "job", "count"]);
    assert_eq!(j["status"]["succeeded"], 2);
    let table = s.ok(&["get", "job", "count"]);
    assert!(table.contains("Complete") && table.contains("2/2"), "{table}");
    let pod = s.ok(&["get", "pods", "-l", "job-name=count", "-o", "jsonpath={.items[0].metadata.name}"]);
    assert_eq!(s.ok(&["logs", &pod]).trim(), "counted");
}

#[test]
fn a_pod_requesting_more_cpu_than_the_node_has_stays_pending_with_failed_scheduling() {
    let s = Server::start_node();
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: greedy}}\nspec:\n  containers:\n  - name: c\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n    resources:\n      requests: {{cpu: \"1000\"}}\n"
    );
    s.ok_stdin(&["apply", "-f", "-"], &pod);
    let p = eventually(Duration::from_secs(60), "PodScheduled=False", || {
        let p = s.json(&["get", "pod", "greedy"]);
        let c = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PodScheduled")?.clone();
        (c["status"] == "False").then_some(c)
    });
    assert_eq!(p["reason"], "Unschedulable");
    assert!(p["message"].as_str().unwrap_or("").contains("Insufficient cpu"), "{p}");
    let events = eventually(Duration::from_secs(30), "FailedScheduling event", || {
        let e = s.ok(&[
            "get",
            "events",
            "--field-selector=involvedObject.name=greedy,reason=FailedScheduling",
            "-o",
            "name",
        ]);
        (!e.trim().is_empty()).then_some(e)
    });
    assert!(!events.is_empty());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(s.ok(&["get", "pod", "greedy", "-o", "jsonpath={.status.phase}"]), "Pending");
    let describe = s.ok(&["describe", "pod", "greedy"]);
    assert!(describe.contains("FailedScheduling") && describe.contains("Insufficient cpu"), "{describe}");
}

/// The ClusterRole aggregation controller fills the default aggregated roles (`admin` takes
/// `edit`, which takes `view`), and a role labelled to aggregate into `view` reaches all three.
#[test]
fn aggregated_cluster_roles_hold_the_rules_of_the_roles_they_select() {
    let s = Server::start_node();
    let resources = |role: &str| s.ok(&["get", "clusterrole", role, "-o", "jsonpath={.rules[*].resources}"]);
    eventually(Duration::from_secs(60), "aggregated default roles", || {
        let (view, edit, admin) = (resources("view"), resources("edit"), resources("admin"));
        (view.contains("\"pods\"")
            && !view.contains("secrets")
            && edit.contains("\"secrets\"")
            && edit.contains("\"pods\"")
            && admin.contains("\"rolebindings\"")
            && admin.contains("\"secrets\""))
        .then_some(())
    });
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: node-viewer\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get, list]\n",
    );
    eventually(Duration::from_secs(60), "the labelled role in view, edit and admin", || {
        ["view", "edit", "admin"].iter().all(|r| resources(r).contains("\"nodes\"")).then_some(())
    });
}

/// A Deployment of `replicas` pods each requesting `request` of CPU, running `command`.
fn cpu_deployment(name: &str, replicas: u32, request: &str, limit: &str, command: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: {IMAGE}
        command: ["sh", "-c", "{command}"]
        resources:
          requests: {{cpu: {request}}}
          limits: {{cpu: {limit}}}
"#
    )
}

fn spec_replicas(s: &Server, deployment: &str) -> i64 {
    s.json(&["get", "deployment", deployment])["spec"]["replicas"].as_i64().unwrap_or(-1)
}

fn hpa_condition(hpa: &Value, t: &str) -> (String, String) {
    let c = hpa["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == t).cloned());
    let field = |f: &str| c.as_ref().and_then(|c| c[f].as_str()).unwrap_or("").to_string();
    (field("status"), field("reason"))
}

#[test]
fn horizontal_pod_autoscalers_scale_deployments_up_and_down_on_cpu() {
    let s = Server::start_node();
    // Up: one pod spinning at its 100m limit uses 500% of its 20m request; the target is 50%,
    // so the HPA asks for 10 and gets its maximum, 3, in one step.
    s.ok_stdin(&["apply", "-f", "-"], &cpu_deployment("burn", 1, "20m", "100m", "while :; do :; done"));
    s.ok(&["autoscale", "deployment", "burn", "--cpu-percent=50", "--min=1", "--max=3"]);
    eventually(Duration::from_secs(150), "the HPA to scale burn to 3", || {
        (spec_replicas(&s, "burn") == 3).then_some(())
    });
    let hpa = eventually(Duration::from_secs(60), "the HPA to report 3 replicas and its CPU use", || {
        let hpa = s.json(&["get", "hpa", "burn"]);
        let used = hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"].as_i64();
        (hpa["status"]["desiredReplicas"] == 3 && used.is_some_and(|u| u > 50)).then_some(hpa)
    });
    assert_eq!(hpa_condition(&hpa, "ScalingActive"), ("True".into(), "ValidMetricFound".into()), "{hpa}");
    assert_eq!(hpa_condition(&hpa, "AbleToScale").0, "True", "{hpa}");
    assert!(hpa["status"]["lastScaleTime"].is_string(), "{hpa}");
    let events =
        s.ok(&["get", "events", "--field-selector", "involvedObject.name=burn,reason=SuccessfulRescale", "-o", "json"]);
    assert!(
        events.contains("New size: 3; reason: cpu resource utilization (percentage of request) above target"),
        "{events}"
    );
    let table = s.ok(&["get", "hpa", "burn", "--no-headers"]);
    let cols: Vec<&str> = table.split_whitespace().collect();
    // NAME REFERENCE TARGETS(2 words) MINPODS MAXPODS REPLICAS AGE
    assert_eq!(&cols[..2], ["burn", "Deployment/burn"], "{table}");
    assert!(cols[2] == "cpu:" && cols[3].ends_with("%/50%") && !cols[3].starts_with("<unknown>"), "{table}");
    assert_eq!(&cols[4..6], ["1", "3"], "{table}");
    // The v1 view carries the current utilization, as upstream's.
    let v1: Value = serde_json::from_str(&s.ok(&[
        "get",
        "--raw",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/burn",
    ]))
    .expect("json");
    assert!(v1["status"]["currentCPUUtilizationPercentage"].as_i64().is_some_and(|u| u > 50), "{v1}");

    // Down: three idle pods, with a zero scale-down stabilization window: down to the minimum.
    s.ok_stdin(&["apply", "-f", "-"], &cpu_deployment("idle", 3, "100m", "100m", "sleep 3600"));
    s.ok(&["rollout", "status", "deployment/idle", "--timeout=120s"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: idle}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: idle}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
      policies: [{type: Percent, value: 100, periodSeconds: 15}]
"#,
    );
    eventually(Duration::from_secs(150), "the HPA to scale idle down to 1", || {
        (spec_replicas(&s, "idle") == 1).then_some(())
    });
    let events =
        s.ok(&["get", "events", "--field-selector", "involvedObject.name=idle,reason=SuccessfulRescale", "-o", "json"]);
    assert!(events.contains("New size: 1; reason: All metrics below target"), "{events}");
    let hpa = eventually(Duration::from_secs(60), "the HPA to report the minimum", || {
        let hpa = s.json(&["get", "hpa", "idle"]);
        (hpa["status"]["desiredReplicas"] == 1 && hpa_condition(&hpa, "ScalingLimited").1 == "TooFewReplicas")
            .then_some(hpa)
    });
    assert_eq!(hpa_condition(&hpa, "ScalingLimited").0, "True", "{hpa}");
    let described = s.ok(&["describe", "hpa", "idle"]);
    assert!(described.contains("SuccessfulRescale") && described.contains("ScalingActive"), "{described}");
}

fn volume_pod(name: &str, claim: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {IMAGE}\n    command: [\"sh\", \"-c\", \"{command}\"]\n    volumeMounts: [{{name: data, mountPath: /data}}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim}}}\n"
    )
}

#[test]
fn persistent_volume_claims_get_local_path_volumes_that_outlive_their_pods() {
    let s = Server::start_node();
    let claim = |name: &str| {
        format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 64Mi}}}}\n")
    };
    // A pod whose claim does not exist is not scheduled: it waits, with upstream's reason, and
    // runs once the claim is there.
    s.ok_stdin(&["apply", "-f", "-"], &volume_pod("early", "later", "echo early > /data/greeting"));
    let why = eventually(Duration::from_secs(60), "the scheduler to explain", || {
        let m =
            s.ok(&["get", "pod", "early", "-o", "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}"]);
        (!m.is_empty()).then_some(m)
    });
    assert_eq!(why, "0/1 nodes are available: persistentvolumeclaim \"later\" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.");
    assert_eq!(s.ok(&["get", "pod", "early", "-o", "jsonpath={.spec.nodeName}"]), "");
    s.ok_stdin(&["apply", "-f", "-"], &claim("later"));
    s.ok(&["wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/early", "--timeout=180s"]);
    assert_eq!(s.ok(&["get", "pvc", "later", "-o", "jsonpath={.status.phase}"]), "Bound");
    s.ok(&["delete", "pod", "early"]);
    s.ok(&["delete", "pvc", "later"]);

    s.ok_stdin(&["apply", "-f", "-"], &claim("data"));
    assert_eq!(s.ok(&["get", "pvc", "data", "-o", "jsonpath={.spec.storageClassName}"]), "local-path");
    // The class waits for the first consumer: no volume yet.
    assert_eq!(s.ok(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"]), "Pending");
    s.ok_stdin(&["apply", "-f", "-"], &volume_pod("writer", "data", "echo hello > /data/greeting"));
    s.ok(&["wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/writer", "--timeout=180s"]);
    let pvc = s.json(&["get", "pvc", "data"]);
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    let node = s.ok(&["get", "pod", "writer", "-o", "jsonpath={.spec.nodeName}"]);
    assert_eq!(pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"], node.as_str());
    let pv_name = pvc["spec"]["volumeName"].as_str().unwrap_or_default().to_string();
    let pv = s.json(&["get", "pv", &pv_name]);
    assert_eq!(pv["spec"]["claimRef"]["name"], "data");
    assert_eq!(pv["spec"]["storageClassName"], "local-path");
    assert_eq!(pv["status"]["phase"], "Bound");
    let dir = std::path::PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap_or_default());
    assert!(dir.starts_with(s.data_dir().join("storage")), "{}", dir.display());
    assert_eq!(std::fs::read_to_string(dir.join("greeting")).ok().as_deref(), Some("hello\n"), "written on the host");
    // Another pod finds what the first wrote.
    s.ok_stdin(&["apply", "-f", "-"], &volume_pod("reader", "data", "cat /data/greeting"));
    s.ok(&["wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/reader", "--timeout=180s"]);
    assert_eq!(s.ok(&["logs", "reader"]).trim(), "hello");
    // Deleting the claim deletes its volume and the data (reclaim policy Delete).
    s.ok(&["delete", "pod", "writer", "reader"]);
    s.ok(&["delete", "pvc", "data"]);
    eventually(Duration::from_secs(60), "the volume and its directory to go", || {
        (!s.kubectl(&["get", "pv", &pv_name]).status.success() && !dir.exists()).then_some(())
    });

    // A StatefulSet's claim templates get volumes the same way.
    let set = format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db}}\nspec:\n  replicas: 1\n  serviceName: db\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    metadata: {{labels: {{app: db}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: c\n        image: {IMAGE}\n        command: [\"sh\", \"-c\", \"hostname > /var/db/owner; exec sleep 3600\"]\n        volumeMounts: [{{name: state, mountPath: /var/db}}]\n  volumeClaimTemplates:\n  - metadata: {{name: state}}\n    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 16Mi}}}}}}\n"
    );
    s.ok_stdin(&["apply", "-f", "-"], &set);
    s.ok(&["rollout", "status", "statefulset/db", "--timeout=180s"]);
    assert_eq!(s.ok(&["get", "pvc", "state-db-0", "-o", "jsonpath={.status.phase}"]), "Bound");
    let pv = s.ok(&["get", "pvc", "state-db-0", "-o", "jsonpath={.spec.volumeName}"]);
    let path = s.ok(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"]);
    let owner = eventually(Duration::from_secs(30), "db-0 to write its file", || {
        std::fs::read_to_string(std::path::Path::new(&path).join("owner")).ok()
    });
    assert_eq!(owner.trim(), "db-0");
}
