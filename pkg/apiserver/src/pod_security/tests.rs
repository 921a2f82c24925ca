//! The plugin against a real store: refusal, warnings, exemptions, update rules, namespaces.

use super::*;
use crate::auth::UserInfo;
use k1s_api::ResourceInfo;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    plugin: PodSecurity,
    user: UserInfo,
}

async fn fixture(config: Config) -> Fixture {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
    let plugin = PodSecurity::new(store.clone(), config);
    Fixture { _dir: dir, store, plugin, user: UserInfo::new("alice", &[]) }
}

fn info(group: &str, resource: &str) -> &'static ResourceInfo {
    k1s_api::resources::find(group, "v1", resource).expect("resource")
}

impl Fixture {
    async fn namespace(&self, name: &str, labels: Value) {
        let ns = json!({"metadata": {"name": name, "labels": labels}});
        self.store.create(&format!("/registry/namespaces/{name}"), ns.to_string().into()).await.expect("ns");
    }

    async fn pod(&self, ns: &str, pod: &Value) {
        let name = pod["metadata"]["name"].as_str().expect("name");
        self.store.create(&format!("/registry/pods/{ns}/{name}"), pod.to_string().into()).await.expect("pod");
    }

    /// Runs the plugin; the refusal's message or the warnings.
    async fn run(
        &self,
        op: Operation,
        resource: &'static ResourceInfo,
        sub: Option<&str>,
        ns: Option<&str>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, String> {
        let mut obj = obj.clone();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let attrs = Attributes {
            operation: op,
            resource,
            subresource: sub,
            namespace: ns,
            name: &name,
            user: &self.user,
            object: Some(&mut obj),
            old_object: old,
            dry_run: false,
            warnings: Default::default(),
            audit_annotations: None,
            write: None,
        };
        match self.plugin.validate(&attrs).await {
            Ok(()) => Ok(attrs.take_warnings()),
            Err(e) => {
                assert_eq!((e.code, e.reason), (403, "Forbidden"));
                Err(e.message)
            }
        }
    }
}

impl Fixture {
    /// Runs the plugin on an audited create: the audit annotations it made.
    async fn annotations(&self, resource: &'static ResourceInfo, ns: &str, obj: &Value) -> Vec<(String, String)> {
        let mut obj = obj.clone();
        let attrs = Attributes {
            operation: Operation::Create,
            resource,
            subresource: None,
            namespace: Some(ns),
            name: "p",
            user: &self.user,
            object: Some(&mut obj),
            old_object: None,
            dry_run: false,
            warnings: Default::default(),
            audit_annotations: Some(Default::default()),
            write: None,
        };
        let _ = self.plugin.validate(&attrs).await;
        attrs.take_audit_annotations()
    }
}

fn privileged_pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}})
}

const PRIVILEGED: &str = r#"privileged (container "c" must not set securityContext.privileged=true)"#;

#[tokio::test]
async fn enforce_refuses_pods_and_only_warns_for_templates() {
    let f = fixture(Config::default()).await;
    f.namespace("team", json!({"pod-security.kubernetes.io/enforce": "baseline"})).await;
    let pods = info("", "pods");
    let e = f.run(Operation::Create, pods, None, Some("team"), &privileged_pod("p"), None).await.expect_err("refused");
    assert_eq!(e, format!(r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": {PRIVILEGED}"#));
    let deploy = json!({"metadata": {"name": "d"}, "spec": {"template": privileged_pod("")}});
    let w = f.run(Operation::Create, info("apps", "deployments"), None, Some("team"), &deploy, None).await;
    assert_eq!(w, Ok(vec![format!(r#"would violate PodSecurity "baseline:latest": {PRIVILEGED}"#)]));
    // Status and scale do not carry a template worth checking.
    let w = f.run(Operation::Update, info("apps", "deployments"), Some("scale"), Some("team"), &deploy, None).await;
    assert_eq!(w, Ok(vec![]));
}

#[tokio::test]
async fn exempt_namespaces_users_and_runtime_classes_are_not_checked() {
    let config = Config {
        defaults: Policy {
            enforce: policy::LevelVersion { level: Level::Restricted, version: policy::Version::Latest },
            ..Policy::default()
        },
        exemptions: Exemptions {
            usernames: vec!["alice".into()],
            namespaces: vec!["kube-system".into()],
            runtime_classes: vec!["kata".into()],
        },
    };
    let mut f = fixture(config).await;
    f.namespace("team", json!({})).await;
    let pods = info("", "pods");
    let pod = privileged_pod("p");
    assert_eq!(f.run(Operation::Create, pods, None, Some("kube-system"), &pod, None).await, Ok(vec![]));
    assert_eq!(f.run(Operation::Create, pods, None, Some("team"), &pod, None).await, Ok(vec![]), "user alice");
    f.user = UserInfo::new("bob", &[]);
    assert!(f.run(Operation::Create, pods, None, Some("team"), &pod, None).await.is_err(), "defaults: restricted");
    let mut kata = pod.clone();
    kata["spec"]["runtimeClassName"] = json!("kata");
    assert_eq!(f.run(Operation::Create, pods, None, Some("team"), &kata, None).await, Ok(vec![]));
}

#[tokio::test]
async fn pod_updates_are_checked_only_when_images_or_ephemeral_containers_change() {
    let f = fixture(Config::default()).await;
    f.namespace("team", json!({"pod-security.kubernetes.io/enforce": "baseline"})).await;
    let pods = info("", "pods");
    let old = privileged_pod("p");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(f.run(Operation::Update, pods, None, Some("team"), &relabelled, Some(&old)).await, Ok(vec![]));
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("busybox:2");
    assert!(f.run(Operation::Update, pods, None, Some("team"), &new_image, Some(&old)).await.is_err());
    assert_eq!(f.run(Operation::Update, pods, Some("status"), Some("team"), &new_image, Some(&old)).await, Ok(vec![]));
    let ok = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let mut debug = ok.clone();
    debug["spec"]["ephemeralContainers"] =
        json!([{"name": "dbg", "image": "busybox", "securityContext": {"privileged": true}}]);
    let e = f.run(Operation::Update, pods, Some("ephemeralcontainers"), Some("team"), &debug, Some(&ok)).await;
    assert!(e.expect_err("refused").contains(r#"container "dbg" must not set securityContext.privileged=true"#));
}

#[tokio::test]
async fn namespace_labels_must_parse_and_tightening_warns_about_existing_pods() {
    let f = fixture(Config::default()).await;
    let namespaces = info("", "namespaces");
    let bad = json!({"metadata": {"name": "team", "labels": {"pod-security.kubernetes.io/enforce": "strict"}}});
    let e = f.plugin.validate_namespace_for_test(&f, Operation::Create, &bad, None).await.expect_err("invalid");
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        r#"Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
    );
    f.namespace("team", json!({})).await;
    for name in ["b", "a", "c"] {
        f.pod("team", &privileged_pod(name)).await;
    }
    f.pod(
        "team",
        &json!({"metadata": {"name": "d"}, "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    let old = json!({"metadata": {"name": "team"}});
    let new = json!({"metadata": {"name": "team", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}});
    let w = f.run(Operation::Update, namespaces, None, None, &new, Some(&old)).await.expect("allowed");
    assert_eq!(
        w,
        [
            r#"existing pods in namespace "team" violate the new PodSecurity enforce level "baseline:latest""#,
            "a (and 2 other pods): privileged",
            "d: host namespaces",
        ]
    );
    // Relaxing, or keeping, the level does not look at pods.
    let w = f.run(Operation::Update, namespaces, None, None, &old, Some(&new)).await.expect("allowed");
    assert!(w.is_empty());
}

impl PodSecurity {
    async fn validate_namespace_for_test(
        &self,
        f: &Fixture,
        op: Operation,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut obj = obj.clone();
        let attrs = Attributes {
            operation: op,
            resource: info("", "namespaces"),
            subresource: None,
            namespace: None,
            name: "team",
            user: &f.user,
            object: Some(&mut obj),
            old_object: old,
            dry_run: false,
            warnings: Default::default(),
            audit_annotations: None,
            write: None,
        };
        self.validate(&attrs).await
    }
}

#[tokio::test]
async fn audit_violations_and_the_enforced_policy_annotate_the_audit_event() {
    let f = fixture(Config::default()).await;
    f.namespace("team", json!({"pod-security.kubernetes.io/audit": "baseline"})).await;
    f.namespace("open", json!({})).await;
    let pods = info("", "pods");
    let got = f.annotations(pods, "team", &privileged_pod("p")).await;
    assert_eq!(
        got,
        vec![
            ("pod-security.kubernetes.io/enforce-policy".to_string(), "privileged:latest".to_string()),
            (
                "pod-security.kubernetes.io/audit-violations".to_string(),
                format!(r#"would violate PodSecurity "baseline:latest": {PRIVILEGED}"#)
            ),
        ]
    );
    let got = f.annotations(pods, "open", &privileged_pod("p")).await;
    assert_eq!(got, vec![("pod-security.kubernetes.io/enforce-policy".to_string(), "privileged:latest".to_string())]);
    let got = f.annotations(pods, "kube-system", &privileged_pod("p")).await;
    assert_eq!(got, vec![("pod-security.kubernetes.io/exempt".to_string(), "namespace".to_string())]);
    // Not audited: nothing is recorded (nor evaluated for the audit level).
    assert_eq!(f.run(Operation::Create, pods, None, Some("team"), &privileged_pod("p"), None).await, Ok(vec![]));
}
