//! Scenario tests of server-side apply and update tracking on a hand-written Deployment schema.

use super::schema::tests::TestLookup;
use super::*;
use serde_json::json;

const T1: &str = "2024-05-01T10:00:00Z";
const T2: &str = "2024-05-01T11:00:00Z";
const T3: &str = "2024-05-01T12:00:00Z";

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn lookup() -> TestLookup {
    let string = json!({"type": "string"});
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    TestLookup(json!({
        "Deployment": {"type": "object", "properties": {
            "apiVersion": string, "kind": string,
            "metadata": r("ObjectMeta"),
            "spec": {"allOf": [r("DeploymentSpec")]},
            "status": r("DeploymentStatus"),
        }},
        "ObjectMeta": {"type": "object", "properties": {
            "name": string, "namespace": string, "uid": string, "resourceVersion": string,
            "generation": {"type": "integer"}, "creationTimestamp": string,
            "labels": string_map, "annotations": string_map,
            "finalizers": {"type": "array", "items": string, "x-kubernetes-list-type": "set"},
            "managedFields": {"type": "array", "items": {"type": "object"}},
        }},
        "DeploymentSpec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "paused": {"type": "boolean"},
            "selector": {"allOf": [r("LabelSelector")]},
            "template": r("PodTemplateSpec"),
        }},
        "LabelSelector": {"type": "object", "x-kubernetes-map-type": "atomic",
            "properties": {"matchLabels": string_map}},
        "PodTemplateSpec": {"type": "object", "properties": {"metadata": r("ObjectMeta"), "spec": r("PodSpec")}},
        "PodSpec": {"type": "object", "properties": {
            "containers": {"type": "array", "items": r("Container"),
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            "volumes": {"type": "array", "items": r("Volume"),
                "x-kubernetes-patch-strategy": "merge,retainKeys", "x-kubernetes-patch-merge-key": "name"},
        }},
        "Container": {"type": "object", "properties": {
            "name": string, "image": string,
            "args": {"type": "array", "items": string},
            "ports": {"type": "array", "items": r("ContainerPort"),
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
        }},
        "ContainerPort": {"type": "object", "properties": {
            "containerPort": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"},
        }},
        "Volume": {"type": "object", "properties": {"name": string, "emptyDir": {"type": "object"}}},
        "DeploymentStatus": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    }))
}

fn manager<'a>(name: &'a str, operation: Operation, time: &'a str) -> Manager<'a> {
    Manager { name, operation, api_version: "apps/v1", subresource: None, time }
}

fn ssa(live: Option<&Value>, cfg: &Value, name: &str, force: bool, time: &str) -> Result<Value, ApplyError> {
    let lookup = lookup();
    let m = manager(name, Operation::Apply, time);
    apply(live, cfg, &m, force, &r("Deployment"), &lookup, RESET_STATUS)
}

fn update(old: Option<&Value>, new: Value, name: &str, time: &str) -> Value {
    let lookup = lookup();
    let mut new = new;
    let m = manager(name, Operation::Update, time);
    track_update(old, &mut new, &m, &r("Deployment"), &lookup, RESET_STATUS);
    new
}

/// The managedFields entry of `name` with `operation`.
fn entry<'v>(obj: &'v Value, name: &str, operation: &str) -> Option<&'v Value> {
    obj["metadata"]["managedFields"].as_array()?.iter().find(|e| e["manager"] == name && e["operation"] == operation)
}

fn fields_of<'v>(obj: &'v Value, name: &str, operation: &str) -> &'v Value {
    entry(obj, name, operation).map(|e| &e["fieldsV1"]).unwrap_or(&Value::Null)
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    })
}

/// A live object as the store would hold it after `obj` was created.
fn stored(mut obj: Value) -> Value {
    obj["metadata"]["uid"] = json!("6a1c0f3e");
    obj["metadata"]["resourceVersion"] = json!("1");
    obj["metadata"]["creationTimestamp"] = json!(T1);
    obj
}

#[test]
fn create_via_apply_owns_exactly_the_applied_fields() {
    let obj = ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("apply");
    assert_eq!(obj["spec"]["replicas"], 3);
    let entries = obj["metadata"]["managedFields"].as_array().expect("managedFields");
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(
        (e["manager"].as_str(), e["operation"].as_str(), e["apiVersion"].as_str(), e["time"].as_str()),
        (Some("kubectl"), Some("Apply"), Some("apps/v1"), Some(T1))
    );
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e.get("subresource").is_none());
    assert_eq!(
        serde_json::to_string(&e["fieldsV1"]).expect("json"),
        concat!(
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"#,
            r#""f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"#,
            r#""k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"#,
            r#""k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}"#
        )
    );
}

#[test]
fn reapplying_an_identical_config_returns_the_live_object_unchanged() {
    let cfg = deployment(3, "nginx:1");
    let live = stored(ssa(None, &cfg, "kubectl", false, T1).expect("create"));
    let again = ssa(Some(&live), &cfg, "kubectl", false, T2).expect("re-apply");
    assert_eq!(again, live);
    assert_eq!(entry(&again, "kubectl", "Apply").map(|e| &e["time"]), Some(&json!(T1)));
}

#[test]
fn changing_a_field_owned_by_an_update_manager_conflicts_unless_forced() {
    let created = update(None, deployment(3, "nginx:1"), "kubectl-client-side-apply", T1);
    let live = stored(created);
    assert!(fields_of(&live, "kubectl-client-side-apply", "Update")["f:spec"]["f:replicas"].is_object());

    let err = ssa(Some(&live), &deployment(5, "nginx:1"), "kubectl", false, T2).expect_err("conflict");
    assert_eq!(
        err,
        ApplyError::Conflicts(vec![Conflict {
            manager: "kubectl-client-side-apply".into(),
            operation: Operation::Update,
            api_version: "apps/v1".into(),
            subresource: None,
            field: ".spec.replicas".into(),
        }])
    );
    assert_eq!(
        err.message(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
    let ApplyError::Conflicts(cs) = &err else { unreachable!() };
    assert_eq!(cs[0].message(), r#"conflict with "kubectl-client-side-apply" using apps/v1"#);

    let forced = ssa(Some(&live), &deployment(5, "nginx:1"), "kubectl", true, T2).expect("force");
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(fields_of(&forced, "kubectl", "Apply")["f:spec"]["f:replicas"].is_object());
    let csa = fields_of(&forced, "kubectl-client-side-apply", "Update");
    assert!(csa["f:spec"].get("f:replicas").is_none());
    assert!(csa["f:spec"]["f:template"].is_object(), "other fields stay with the update manager");
}

#[test]
fn conflicts_with_several_managers_are_grouped_per_manager() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "alpha", false, T1).expect("alpha"));
    let mut cfg = deployment(3, "nginx:1");
    cfg["spec"]["paused"] = json!(false);
    let live = update(Some(&live), cfg, "beta", T2);
    let mut cfg = deployment(4, "nginx:2");
    cfg["spec"]["paused"] = json!(true);
    let err = ssa(Some(&live), &cfg, "gamma", false, T3).expect_err("conflicts");
    assert_eq!(
        err.message(),
        concat!(
            "Apply failed with 3 conflicts: conflicts with \"alpha\":\n",
            "- .spec.replicas\n",
            "- .spec.template.spec.containers[name=\"web\"].image\n",
            "conflicts with \"beta\" using apps/v1:\n",
            "- .spec.paused"
        )
    );
}

#[test]
fn dropping_a_field_from_the_config_removes_it() {
    let mut cfg = deployment(3, "nginx:1");
    cfg["metadata"]["labels"]["tier"] = json!("front");
    cfg["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["--v=2"]);
    let live = stored(ssa(None, &cfg, "kubectl", false, T1).expect("create"));

    let mut cfg = deployment(3, "nginx:1");
    cfg["spec"].as_object_mut().expect("spec").shift_remove("replicas");
    let after = ssa(Some(&live), &cfg, "kubectl", false, T2).expect("re-apply");
    assert_eq!(after["metadata"]["labels"], json!({"app": "web"}));
    assert!(after["spec"].get("replicas").is_none());
    assert!(after["spec"]["template"]["spec"]["containers"][0].get("args").is_none());
    assert_eq!(after["metadata"]["uid"], "6a1c0f3e", "untracked fields stay");
    assert_eq!(entry(&after, "kubectl", "Apply").map(|e| &e["time"]), Some(&json!(T2)));
}

#[test]
fn dropped_fields_another_manager_owns_stay() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "alpha", false, T1).expect("alpha"));
    let beta_cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3}});
    let live = ssa(Some(&live), &beta_cfg, "beta", false, T2).expect("beta shares replicas");
    for m in ["alpha", "beta"] {
        assert!(fields_of(&live, m, "Apply")["f:spec"]["f:replicas"].is_object(), "{m} owns replicas");
    }

    let mut cfg = deployment(3, "nginx:1");
    cfg["spec"].as_object_mut().expect("spec").shift_remove("replicas");
    let after = ssa(Some(&live), &cfg, "alpha", false, T3).expect("alpha drops replicas");
    assert_eq!(after["spec"]["replicas"], 3);
    assert!(fields_of(&after, "alpha", "Apply")["f:spec"].get("f:replicas").is_none());

    let err = ssa(
        Some(&after),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 4}}),
        "alpha",
        false,
        T3,
    )
    .expect_err("beta owns replicas now");
    assert_eq!(err.message(), r#"Apply failed with 1 conflict: conflict with "beta": .spec.replicas"#);
}

#[test]
fn containers_merge_by_name_across_appliers() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "alpha", false, T1).expect("alpha"));
    let sidecar = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy:1"}]}}}});
    let live = ssa(Some(&live), &sidecar, "beta", false, T2).expect("beta adds a container");
    let names: Vec<&Value> =
        live["spec"]["template"]["spec"]["containers"].as_array().expect("list").iter().map(|c| &c["name"]).collect();
    assert_eq!(names, [&json!("web"), &json!("proxy")]);
    let beta = fields_of(&live, "beta", "Apply");
    assert_eq!(
        beta["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({r#"k:{"name":"proxy"}"#: {".": {}, "f:image": {}, "f:name": {}}})
    );

    // alpha re-applies its own container with a new image: beta's container is untouched.
    let live = ssa(Some(&live), &deployment(3, "nginx:2"), "alpha", false, T3).expect("alpha updates");
    let containers = &live["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(containers[1], json!({"name": "proxy", "image": "envoy:1"}));

    // beta stops applying its container: it is removed.
    let empty = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": []}}}});
    let live = ssa(Some(&live), &empty, "beta", false, T3).expect("beta drops its container");
    assert_eq!(live["spec"]["template"]["spec"]["containers"].as_array().map(Vec::len), Some(1));
    assert!(entry(&live, "beta", "Apply").is_none(), "beta owns nothing any more");
}

#[test]
fn merge_key_lists_without_list_type_merge_by_key() {
    let with_volume = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"volumes": [{"name": name, "emptyDir": {}}]}}}})
    };
    let live = stored(ssa(None, &with_volume("a"), "alpha", false, T1).expect("alpha"));
    let live = ssa(Some(&live), &with_volume("b"), "beta", false, T2).expect("beta");
    assert_eq!(
        live["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}])
    );
    assert!(fields_of(&live, "beta", "Apply")["f:spec"]["f:template"]["f:spec"]["f:volumes"]
        .get(r#"k:{"name":"b"}"#)
        .is_some());
}

#[test]
fn fields_v1_encodes_keys_set_values_and_self_markers() {
    let lookup = lookup();
    let obj = json!({"metadata": {"name": "x", "finalizers": ["example.com/a"]},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80, "protocol": "UDP"}]}]}}}});
    assert_eq!(
        serde_json::to_string(&fields_v1(&obj, &r("Deployment"), &lookup)).expect("json"),
        concat!(
            r#"{"f:metadata":{"f:finalizers":{"v:\"example.com/a\"":{}},"f:name":{}},"#,
            r#""f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{},"#,
            r#""f:ports":{"k:{\"containerPort\":80,\"protocol\":\"UDP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}}}}}"#
        )
    );
}

#[test]
fn updates_take_fields_from_appliers_and_ignore_reset_fields() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(7);
    scaled["status"] = json!({"replicas": 7});
    scaled["metadata"]["resourceVersion"] = json!("2");
    let after = update(Some(&live), scaled, "kube-controller", T2);
    let e = entry(&after, "kube-controller", "Update").expect("update entry");
    assert_eq!(e["time"], T2);
    assert_eq!(e["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(fields_of(&after, "kubectl", "Apply")["f:spec"].get("f:replicas").is_none());

    // A write that changes nothing keeps the manager's entry as it was.
    let mut same = after.clone();
    same["metadata"]["resourceVersion"] = json!("3");
    let again = update(Some(&after), same, "kube-controller", T3);
    assert_eq!(entry(&again, "kube-controller", "Update").map(|e| &e["time"]), Some(&json!(T2)));
}

#[test]
fn updates_removing_fields_drop_them_from_every_manager() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let mut edited = live.clone();
    edited["metadata"]["labels"] = json!({});
    let after = update(Some(&live), edited, "kubectl-edit", T2);
    assert!(fields_of(&after, "kubectl", "Apply")["f:metadata"].is_null());
    assert!(entry(&after, "kubectl-edit", "Update").is_none(), "removing fields owns nothing");
}

#[test]
fn existing_objects_without_managed_fields_stay_untracked_on_update() {
    let live = stored(deployment(3, "nginx:1"));
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(4);
    let after = update(Some(&live), edited, "kubectl-edit", T2);
    assert!(after["metadata"].get("managedFields").is_none());
}

#[test]
fn sending_empty_managed_fields_clears_them() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let mut edited = live.clone();
    edited["metadata"]["managedFields"] = json!([]);
    let after = update(Some(&live), edited, "kubectl-edit", T2);
    assert!(after["metadata"].get("managedFields").is_none());
}

#[test]
fn applying_to_an_untracked_object_conflicts_with_before_first_apply() {
    let live = stored(deployment(3, "nginx:1"));
    let err = ssa(Some(&live), &deployment(4, "nginx:1"), "kubectl", false, T2).expect_err("conflict");
    assert_eq!(
        err.message(),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn kubectl_takes_over_fields_of_its_last_applied_configuration() {
    let mut cfg = deployment(3, "nginx:1");
    let last = build_last_applied(&cfg);
    cfg["metadata"]["annotations"] = json!({(LAST_APPLIED): last});
    let live = stored(update(None, cfg, "kubectl-client-side-apply", T1));

    let after = ssa(Some(&live), &deployment(5, "nginx:1"), "kubectl", false, T2).expect("migration");
    assert_eq!(after["spec"]["replicas"], 5);
    assert!(fields_of(&after, "kubectl", "Apply")["f:spec"]["f:replicas"].is_object());
    let annotation = after["metadata"]["annotations"][LAST_APPLIED].as_str().expect("annotation");
    assert!(annotation.starts_with(r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels""#));
    assert!(annotation.ends_with("}\n"));
    assert_eq!(serde_json::from_str::<Value>(annotation).expect("json")["spec"]["replicas"], 5);

    // Another applier gets no such allowance.
    let err = ssa(Some(&live), &deployment(5, "nginx:1"), "helm", false, T2).expect_err("conflict");
    assert!(matches!(err, ApplyError::Conflicts(ref cs) if cs.len() == 1));
}

#[test]
fn status_in_an_applied_config_is_not_owned() {
    let mut cfg = deployment(3, "nginx:1");
    cfg["status"] = json!({"replicas": 3});
    let obj = ssa(None, &cfg, "kubectl", false, T1).expect("apply");
    assert!(fields_of(&obj, "kubectl", "Apply").get("f:status").is_none());
}

#[test]
fn explicit_null_removes_the_value_and_keeps_ownership() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let mut cfg = deployment(3, "nginx:1");
    cfg["spec"]["replicas"] = Value::Null;
    let after = ssa(Some(&live), &cfg, "kubectl", false, T2).expect("apply");
    assert!(after["spec"].get("replicas").is_none());
    assert!(fields_of(&after, "kubectl", "Apply")["f:spec"]["f:replicas"].is_object());
}

#[test]
fn an_applied_config_without_a_name_keeps_the_live_objects() {
    // The name comes from the URL (the handler checks it as upstream's `checkName`); apply
    // itself neither needs it nor owns it.
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let mut no_name = deployment(4, "nginx:1");
    no_name["metadata"].as_object_mut().expect("meta").shift_remove("name");
    let after = ssa(Some(&live), &no_name, "kube", true, T2).expect("apply");
    assert_eq!(after["metadata"]["name"], live["metadata"]["name"]);
    assert_eq!(after["spec"]["replicas"], 4);
    assert!(fields_of(&after, "kube", "Apply")["f:metadata"].get("f:name").is_none());
}

#[test]
fn invalid_applied_configs_are_rejected() {
    let mut no_kind = deployment(3, "nginx:1");
    no_kind.as_object_mut().expect("obj").shift_remove("kind");
    assert!(matches!(ssa(None, &no_kind, "kubectl", false, T1), Err(ApplyError::Invalid(_))));

    let mut wrong_version = deployment(3, "nginx:1");
    wrong_version["apiVersion"] = json!("apps/v1beta2");
    assert_eq!(
        ssa(None, &wrong_version, "kubectl", false, T1).map_err(|e| e.message()),
        Err("Incorrect version specified in apply patch. Specified patch version: apps/v1beta2, expected: apps/v1"
            .to_string())
    );

    let mut dup = deployment(3, "nginx:1");
    dup["spec"]["template"]["spec"]["containers"] = json!([{"name": "a"}, {"name": "a"}]);
    assert_eq!(
        ssa(None, &dup, "kubectl", false, T1).map_err(|e| e.message()),
        Err(concat!(
            "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): ",
            ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
        )
        .to_string())
    );

    let mut with_managed = deployment(3, "nginx:1");
    with_managed["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        ssa(None, &with_managed, "kubectl", false, T1).map_err(|e| e.message()),
        Err("metadata.managedFields must be nil".to_string())
    );
}

#[test]
fn subresource_writes_get_their_own_entry() {
    let live = stored(ssa(None, &deployment(3, "nginx:1"), "kubectl", false, T1).expect("create"));
    let lookup = lookup();
    let mut new = live.clone();
    new["status"] = json!({"replicas": 3});
    let m = Manager { subresource: Some("status"), ..manager("kube-controller-manager", Operation::Update, T2) };
    track_update(Some(&live), &mut new, &m, &r("Deployment"), &lookup, &[&["spec"], &["metadata", "labels"]]);
    let e = entry(&new, "kube-controller-manager", "Update").expect("entry");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
    assert_eq!(new["metadata"]["managedFields"][0]["manager"], "kubectl", "apply entries sort first");
}

#[test]
fn creating_with_update_owns_every_set_field_with_markers_for_added_containers() {
    let created = update(None, deployment(3, "nginx:1"), "kubectl-create", T1);
    let e = entry(&created, "kubectl-create", "Update").expect("entry");
    assert_eq!(e["time"], T1);
    assert_eq!(
        serde_json::to_string(&e["fieldsV1"]).expect("json"),
        concat!(
            r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"#,
            r#""f:template":{".":{},"f:metadata":{".":{},"f:labels":{".":{},"f:app":{}}},"#,
            r#""f:spec":{".":{},"f:containers":{".":{},"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"#,
            r#""f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}"#
        )
    );
}

/// A create records, through its own walk, exactly what the general comparison of `{}` with
/// the new object records, key order included.
#[test]
fn creates_record_what_the_general_comparison_records() {
    let lookup = lookup();
    let root = r("Deployment");
    let mut dup = deployment(1, "a");
    dup["spec"]["template"]["spec"]["containers"] = json!([{"name": "x", "image": "1"}, {"name": "x", "image": "2"}]);
    let objects = [
        deployment(3, "nginx:1"),
        dup,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bare"}}),
        json!({"kind": "Deployment", "metadata": {"name": "n", "finalizers": ["b", "a"], "annotations": {}},
            "spec": null, "status": {"replicas": 2}}),
        json!({"metadata": {"name": "n", "uid": "u", "generation": 3, "labels": {"z": "1", "a": null}},
            "spec": {}, "unknown": {"deep": [1, {"x": 2}]}}),
        json!({"metadata": {}, "spec": {"paused": true, "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": [{"name": "c", "args": ["-x", "-x"],
                "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w"}]}}}}),
        json!({"metadata": {"name": "n"}, "spec": "not a struct"}),
        json!({"metadata": {"name": "n"}, "spec": {"template": {"spec": {"containers": [{"image": "keyless"}, 7]}}}}),
        json!({"apiVersion": "apps/v1", "metadata": {"name": "n", "managedFields": [{"manager": "x"}],
            "resourceVersion": "5", "labels": {}}, "status": {}, "extra": [{"a": 1}], "spec": {"replicas": 0}}),
        json!({"metadata": "not a map", "status": {"conditions": 1}}),
        json!({"metadata": {"name": "n", "finalizers": [], "ownerReferences": []}, "extra": [],
            "spec": {"template": {"spec": {"containers": [], "volumes": []}}}}),
        json!({"metadata": null, "spec": {}, "status": null}),
    ];
    let typed = typed::Typed::new(schema::Types::new(&lookup), schema::Ty::Schema(&root));
    let id = ManagerId::new("m", Operation::Update, "apps/v1", None);
    // A /status endpoint's resets reach into objects (as a Deployment's `spec` and
    // `metadata.labels`); deeper ones too.
    let nested: &[&[&str]] = &[&["spec"], &["metadata", "labels"], &["spec", "template", "spec", "containers"]];
    let resets = [RESET_STATUS, RESET_NONE, nested, &[&["spec", "replicas"], &["metadata", "finalizers"]]];
    for (obj, reset) in objects.iter().flat_map(|o| resets.map(|r| (o, r))) {
        let mut fast = obj.clone();
        assert!(record_create(&typed, &mut fast, reset, &id, &manager("m", Operation::Update, T1)));
        let mut slow = obj.clone();
        if let Some(md) = slow.get_mut("metadata").and_then(Value::as_object_mut) {
            md.remove("managedFields");
        }
        let updater = updater::Updater { typed, ignored: reset_set(reset), api_version: "apps/v1" };
        let mut managers = managed::Managers::new();
        updater.record_update(&json!({}), &slow, &mut managers, &id, T1);
        managed::store(&mut slow, &managers);
        assert_eq!(
            serde_json::to_string(&fast["metadata"]["managedFields"]).expect("json"),
            serde_json::to_string(&slow["metadata"]["managedFields"]).expect("json"),
            "{obj}"
        );
    }
}

#[test]
fn creates_of_built_in_kinds_take_the_create_walk() {
    let api = crate::openapi::get();
    let schema = api.kind_schema("", "v1", "ConfigMap").expect("ConfigMap schema");
    let typed = typed::Typed::new(schema::Types::new(api), schema::Ty::Schema(schema));
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "d", "labels": {"app": "x"}}, "data": {"k": "v"}});
    let id = ManagerId::new("m", Operation::Update, "v1", None);
    assert!(record_create(&typed, &mut cm, &[], &id, &manager("m", Operation::Update, T1)));
    assert_eq!(
        cm["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
}
