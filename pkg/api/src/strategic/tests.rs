//! Behaviour tests for the strategic merge patch, against hand-written OpenAPI v3 schemas shaped
//! like upstream's (`allOf: [{$ref}]` properties carrying the patch extensions).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{apply, PatchError, SchemaLookup};

/// Schemas by name, resolving `#/components/schemas/<name>` references.
struct Schemas(HashMap<&'static str, Value>);

impl SchemaLookup for Schemas {
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..8 {
            let reference = current
                .get("$ref")
                .or_else(|| current.get("allOf").and_then(|all| all.get(0)).and_then(|first| first.get("$ref")))
                .and_then(Value::as_str);
            let Some(name) = reference.and_then(|r| r.strip_prefix("#/components/schemas/")) else {
                return current;
            };
            match self.0.get(name) {
                Some(next) => current = next,
                None => return current,
            }
        }
        current
    }
}

fn reference(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("#/components/schemas/{name}")}], "default": {}})
}

fn with(mut schema: Value, extensions: Value) -> Value {
    if let (Some(target), Value::Object(extra)) = (schema.as_object_mut(), extensions) {
        target.extend(extra);
    }
    schema
}

fn merge_list(items: &str, merge_key: &str) -> Value {
    json!({
        "type": "array",
        "items": reference(items),
        "x-kubernetes-patch-merge-key": merge_key,
        "x-kubernetes-patch-strategy": "merge",
    })
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
}

fn schemas() -> Schemas {
    let mut s = HashMap::new();
    s.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": string_map(),
            "annotations": string_map(),
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
            "ownerReferences": merge_list("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", "uid"),
        }}),
    );
    s.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        json!({"type": "object", "properties": {"uid": {"type": "string"}, "name": {"type": "string"}}}),
    );
    s.insert(
        "io.k8s.api.apps.v1.Deployment",
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": reference("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            "spec": reference("io.k8s.api.apps.v1.DeploymentSpec"),
            "status": reference("io.k8s.api.apps.v1.DeploymentStatus"),
        }}),
    );
    s.insert(
        "io.k8s.api.apps.v1.DeploymentSpec",
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "format": "int32"},
            "selector": reference("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
            "template": reference("io.k8s.api.core.v1.PodTemplateSpec"),
            "strategy": with(reference("io.k8s.api.apps.v1.DeploymentStrategy"),
                json!({"x-kubernetes-patch-strategy": "retainKeys"})),
        }}),
    );
    s.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        json!({"type": "object", "properties": {"matchLabels": string_map()}}),
    );
    s.insert(
        "io.k8s.api.apps.v1.DeploymentStrategy",
        json!({"type": "object", "properties": {
            "type": {"type": "string"},
            "rollingUpdate": reference("io.k8s.api.apps.v1.RollingUpdateDeployment"),
        }}),
    );
    s.insert(
        "io.k8s.api.apps.v1.RollingUpdateDeployment",
        json!({"type": "object", "properties": {
            "maxSurge": {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": true},
            "maxUnavailable": {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": true},
        }}),
    );
    s.insert(
        "io.k8s.api.apps.v1.DeploymentStatus",
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "conditions": merge_list("io.k8s.api.apps.v1.DeploymentCondition", "type"),
        }}),
    );
    s.insert(
        "io.k8s.api.apps.v1.DeploymentCondition",
        json!({"type": "object", "properties": {
            "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
        }}),
    );
    s.insert(
        "io.k8s.api.core.v1.PodTemplateSpec",
        json!({"type": "object", "properties": {
            "metadata": reference("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            "spec": reference("io.k8s.api.core.v1.PodSpec"),
        }}),
    );
    s.insert(
        "io.k8s.api.core.v1.PodSpec",
        json!({"type": "object", "properties": {
            "containers": merge_list("io.k8s.api.core.v1.Container", "name"),
            "initContainers": merge_list("io.k8s.api.core.v1.Container", "name"),
            "volumes": with(merge_list("io.k8s.api.core.v1.Volume", "name"),
                json!({"x-kubernetes-patch-strategy": "merge,retainKeys"})),
            "tolerations": {"type": "array", "items": reference("io.k8s.api.core.v1.Toleration"),
                "x-kubernetes-list-type": "atomic"},
            "nodeSelector": string_map(),
        }}),
    );
    s.insert(
        "io.k8s.api.core.v1.Container",
        json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "image": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
            "ports": with(merge_list("io.k8s.api.core.v1.ContainerPort", "containerPort"),
                json!({"x-kubernetes-list-map-keys": ["containerPort", "protocol"], "x-kubernetes-list-type": "map"})),
            "env": merge_list("io.k8s.api.core.v1.EnvVar", "name"),
            "volumeMounts": merge_list("io.k8s.api.core.v1.VolumeMount", "mountPath"),
        }}),
    );
    for (name, fields) in [
        (
            "io.k8s.api.core.v1.ContainerPort",
            json!({"containerPort": {"type": "integer"}, "protocol": {"type": "string"}, "name": {"type": "string"}}),
        ),
        ("io.k8s.api.core.v1.EnvVar", json!({"name": {"type": "string"}, "value": {"type": "string"}})),
        ("io.k8s.api.core.v1.VolumeMount", json!({"name": {"type": "string"}, "mountPath": {"type": "string"}})),
        (
            "io.k8s.api.core.v1.Toleration",
            json!({"key": {"type": "string"}, "operator": {"type": "string"}, "effect": {"type": "string"}}),
        ),
        (
            "io.k8s.api.core.v1.Volume",
            json!({"name": {"type": "string"}, "configMap": {"type": "object"}, "emptyDir": {"type": "object"}, "secret": {"type": "object"}}),
        ),
    ] {
        s.insert(name, json!({"type": "object", "properties": fields}));
    }
    Schemas(s)
}

/// Applies `patch` to `original` with the Deployment schema.
fn patch_deployment(original: Value, patch: Value) -> Result<Value, PatchError> {
    let schemas = schemas();
    let root = schemas.0.get("io.k8s.api.apps.v1.Deployment");
    apply(&original, &patch, root, &schemas)
}

fn ok(original: Value, patch: Value) -> Value {
    patch_deployment(original, patch).expect("patch applies")
}

fn err(original: Value, patch: Value) -> PatchError {
    patch_deployment(original, patch).expect_err("patch is rejected")
}

fn containers(spec: Value) -> Value {
    json!({"spec": {"template": {"spec": {"containers": spec}}}})
}

fn pod_spec(patch: Value) -> Value {
    json!({"spec": {"template": {"spec": patch}}})
}

fn container_names(result: &Value) -> Vec<&str> {
    result["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|items| items.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn null_in_patch_deletes_key() {
    let original = json!({"metadata": {"name": "web", "labels": {"app": "web", "tier": "x"}}});
    let result = ok(original, json!({"metadata": {"labels": {"tier": null, "absent": null}}}));
    assert_eq!(result, json!({"metadata": {"name": "web", "labels": {"app": "web"}}}));
}

#[test]
fn deleting_a_key_keeps_the_order_of_the_others() {
    let original = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}});
    let result = ok(original, json!({"metadata": {"labels": {"a": null}}}));
    let keys: Vec<&String> = result["metadata"]["labels"].as_object().expect("labels").keys().collect();
    assert_eq!(keys, ["b", "c"]);
}

#[test]
fn nested_maps_merge_recursively() {
    let original = json!({"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}}}});
    let patch = json!({"spec": {"replicas": 3, "template": {"metadata": {"annotations": {"a": "b"}}}}});
    assert_eq!(
        ok(original, patch),
        json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}}}})
    );
}

#[test]
fn rollout_restart_patch_adds_template_annotation() {
    let original = pod_spec(json!({"containers": [{"name": "web", "image": "nginx"}]}));
    let patch = json!({"spec": {"template": {"metadata": {"annotations":
        {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}}}}});
    let result = ok(original, patch);
    assert_eq!(
        result["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        "2025-01-01T00:00:00Z"
    );
    assert_eq!(result["spec"]["template"]["spec"]["containers"][0]["image"], "nginx");
}

#[test]
fn containers_merge_by_name_keeping_order_and_appending_new_items() {
    let original = containers(json!([
        {"name": "a", "image": "a:1", "args": ["x"]},
        {"name": "b", "image": "b:1"},
    ]));
    let result = ok(original, containers(json!([{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])));
    assert_eq!(
        result,
        containers(json!([
            {"name": "a", "image": "a:1", "args": ["x"]},
            {"name": "b", "image": "b:2"},
            {"name": "c", "image": "c:1"},
        ]))
    );
}

#[test]
fn patch_order_wins_for_items_named_in_the_patch() {
    // Without $setElementOrder, patch items follow the patch's order and server-only items keep
    // their live position relative to them.
    let original = containers(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let result = ok(original, containers(json!([{"name": "c", "image": "c"}, {"name": "a", "image": "a"}])));
    assert_eq!(container_names(&result), ["b", "c", "a"]);
}

#[test]
fn ports_merge_by_container_port() {
    let original = containers(json!([{"name": "web", "ports": [
        {"containerPort": 80, "protocol": "TCP"},
        {"containerPort": 443, "protocol": "TCP"},
    ]}]));
    let patch = containers(json!([{"name": "web", "ports": [{"containerPort": 443, "name": "https"}]}]));
    assert_eq!(
        ok(original, patch),
        containers(json!([{"name": "web", "ports": [
            {"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 443, "protocol": "TCP", "name": "https"},
        ]}]))
    );
}

#[test]
fn env_entries_merge_by_name_inside_a_matched_container() {
    let original =
        containers(json!([{"name": "web", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]));
    let patch = containers(json!([{"name": "web", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]));
    assert_eq!(
        ok(original, patch),
        containers(json!([{"name": "web", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"},
        ]}]))
    );
}

#[test]
fn conditions_merge_by_type() {
    let original = json!({"status": {"conditions": [
        {"type": "Available", "status": "True"},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
    ]}});
    let patch = json!({"status": {"conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]}});
    assert_eq!(
        ok(original, patch),
        json!({"status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ]}})
    );
}

#[test]
fn patch_delete_directive_removes_list_item() {
    let original = containers(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let result = ok(original, containers(json!([{"name": "b", "$patch": "delete"}])));
    assert_eq!(result, containers(json!([{"name": "a"}, {"name": "c"}])));
}

#[test]
fn patch_delete_directive_without_merge_key_is_rejected() {
    let original = containers(json!([{"name": "a"}]));
    let error = err(original, containers(json!([{"$patch": "delete", "image": "x"}])));
    assert_eq!(
        error,
        PatchError::Invalid("map: map[$patch:delete image:x] does not contain declared merge key: name".into())
    );
    assert_eq!(error.status_code(), 500);
}

#[test]
fn patch_replace_directive_in_list_replaces_whole_list() {
    let original = containers(json!([{"name": "a", "image": "a"}, {"name": "b"}]));
    let patch = containers(json!([{"$patch": "replace"}, {"name": "z", "image": "z"}]));
    assert_eq!(ok(original, patch), containers(json!([{"name": "z", "image": "z"}])));
}

#[test]
fn patch_merge_directive_in_list_is_rejected() {
    let original = containers(json!([{"name": "a"}]));
    let error = err(original, containers(json!([{"$patch": "merge"}, {"name": "a"}])));
    assert_eq!(error, PatchError::Invalid("merging lists cannot yet be specified in the patch".into()));
}

#[test]
fn patch_merge_directive_on_map_is_rejected_as_unknown_patch_type() {
    let original = json!({"metadata": {"labels": {"a": "b"}}});
    let error = err(original, json!({"metadata": {"labels": {"$patch": "merge", "c": "d"}}}));
    assert_eq!(error, PatchError::Invalid("unknown patch type: merge in map: map[$patch:merge c:d]".into()));
}

#[test]
fn unknown_patch_directive_value_is_rejected_with_go_formatting() {
    let original = containers(json!([{"name": "a"}]));
    let error = err(original, containers(json!([{"name": "a", "$patch": 1}])));
    assert_eq!(error, PatchError::Invalid("unknown patch type: %!s(int64=1) in map: map[$patch:1 name:a]".into()));
}

#[test]
fn patch_replace_directive_on_map_replaces_map() {
    let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
    let result = ok(original, json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}));
    assert_eq!(result, json!({"metadata": {"labels": {"c": "3"}}}));
}

#[test]
fn patch_delete_directive_on_map_empties_map() {
    let original = json!({"metadata": {"name": "x", "labels": {"a": "1"}}});
    let result = ok(original, json!({"metadata": {"labels": {"$patch": "delete"}}}));
    assert_eq!(result, json!({"metadata": {"name": "x", "labels": {}}}));
}

#[test]
fn patch_directive_at_top_level_applies_to_whole_object() {
    let original = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}});
    assert_eq!(
        ok(original.clone(), json!({"$patch": "replace", "spec": {"replicas": 2}})),
        json!({"spec": {"replicas": 2}})
    );
    assert_eq!(ok(original, json!({"$patch": "delete"})), json!({}));
}

#[test]
fn primitive_merge_list_unions_values() {
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    let result = ok(original, json!({"metadata": {"finalizers": ["b", "c"]}}));
    assert_eq!(result, json!({"metadata": {"finalizers": ["a", "b", "c"]}}));
}

#[test]
fn new_patch_items_leading_the_patch_go_before_server_only_items() {
    // Upstream inserts a server-only item before a patch item only when both are live and the
    // server-only one comes first; `c` is new, so it leads.
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    let result = ok(original, json!({"metadata": {"finalizers": ["c", "a"]}}));
    assert_eq!(result, json!({"metadata": {"finalizers": ["c", "a", "b"]}}));
}

#[test]
fn delete_from_primitive_list_removes_values() {
    let original = json!({"metadata": {"finalizers": ["a", "b", "c", "b"]}});
    let result = ok(original, json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "z"]}}));
    assert_eq!(result, json!({"metadata": {"finalizers": ["a", "c"]}}));
}

#[test]
fn delete_from_primitive_list_without_field_name_is_rejected() {
    let original = json!({"metadata": {"finalizers": ["a"]}});
    let error = err(original, json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}));
    assert_eq!(error, PatchError::Invalid("invalid patch format of primitive list".into()));
    assert_eq!(error.status_code(), 400);
}

#[test]
fn delete_from_primitive_list_and_set_element_order_combine() {
    // What kubectl sends when a finalizer is removed from the applied configuration.
    let original = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let patch =
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"], "$setElementOrder/finalizers": ["c", "a"]}});
    assert_eq!(ok(original, patch), json!({"metadata": {"finalizers": ["c", "a"]}}));
}

#[test]
fn set_element_order_reorders_merged_list() {
    let original = containers(json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]));
    let patch = pod_spec(json!({
        "$setElementOrder/containers": [{"name": "b"}, {"name": "c"}, {"name": "a"}],
        "containers": [{"name": "c", "image": "c"}],
    }));
    assert_eq!(
        ok(original, patch),
        containers(json!([{"name": "b", "image": "b"}, {"name": "c", "image": "c"}, {"name": "a", "image": "a"}]))
    );
}

#[test]
fn set_element_order_alone_reorders_live_list() {
    let original = containers(json!([{"name": "a"}, {"name": "b"}]));
    let patch = pod_spec(json!({"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}));
    assert_eq!(container_names(&ok(original, patch)), ["b", "a"]);
}

#[test]
fn set_element_order_keeps_server_only_items_at_their_live_positions() {
    // `s` exists only on the server; it stays between `a` and `b` as it was live.
    let original = containers(json!([{"name": "a"}, {"name": "s"}, {"name": "b"}]));
    let patch = pod_spec(json!({
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "n"}],
        "containers": [{"name": "n"}],
    }));
    assert_eq!(container_names(&ok(original, patch)), ["a", "s", "b", "n"]);
}

#[test]
fn set_element_order_applies_to_nested_lists_of_matched_items() {
    let original =
        containers(json!([{"name": "web", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]));
    let patch = containers(json!([{
        "name": "web",
        "$setElementOrder/env": [{"name": "B"}, {"name": "A"}],
        "env": [{"name": "A", "value": "9"}],
    }]));
    assert_eq!(
        ok(original, patch),
        containers(json!([{"name": "web", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "9"}]}]))
    );
}

#[test]
fn set_element_order_after_delete_and_add_orders_like_upstream() {
    // Upstream orders server-only items by the live list as seen through a Go slice that the
    // merge modified in place: deleting `x` shifts `y z` left and the new item `n` fills the freed
    // slot, so the live order it uses is `y z n` and `z` lands before `n`.
    let original = containers(json!([{"name": "x"}, {"name": "y", "image": "y"}, {"name": "z", "image": "z"}]));
    let patch = pod_spec(json!({
        "$setElementOrder/containers": [{"name": "y"}, {"name": "n"}],
        "containers": [{"name": "n"}, {"name": "x", "$patch": "delete"}],
    }));
    assert_eq!(
        ok(original, patch),
        containers(json!([{"name": "y", "image": "y"}, {"name": "z", "image": "z"}, {"name": "n"}]))
    );
}

#[test]
fn set_element_order_mismatching_patch_list_is_rejected() {
    let original = containers(json!([{"name": "a"}, {"name": "b"}]));
    let patch = pod_spec(json!({
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"name": "b", "image": "x"}],
    }));
    assert_eq!(
        err(original, patch),
        PatchError::Invalid(
            "The order in patch list:\n[map[image:x name:b]]\n doesn't match $setElementOrder list:\n[map[name:a]]\n"
                .into()
        )
    );
}

#[test]
fn set_element_order_directive_with_bad_key_is_rejected() {
    let original = containers(json!([{"name": "a"}]));
    let error = err(original, pod_spec(json!({"$setElementOrder": [{"name": "a"}]})));
    assert_eq!(error, PatchError::Invalid("invalid patch format of setElementOrder list".into()));
    assert_eq!(error.status_code(), 400);
}

#[test]
fn set_element_order_items_without_merge_key_are_rejected() {
    let original = containers(json!([{"name": "a"}]));
    let error = err(original, pod_spec(json!({"$setElementOrder/containers": ["a"]})));
    assert_eq!(error, PatchError::Invalid("value for key 0 is not a map".into()));
}

#[test]
fn retain_keys_clears_unlisted_keys() {
    let original = json!({"spec": {"replicas": 1, "strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}});
    assert_eq!(ok(original, patch), json!({"spec": {"replicas": 1, "strategy": {"type": "Recreate"}}}));
}

#[test]
fn retain_keys_in_list_items_switch_volume_sources() {
    let original = pod_spec(
        json!({"volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "secret": {"secretName": "s"}}]}),
    );
    let patch = pod_spec(json!({
        "$setElementOrder/volumes": [{"name": "data"}, {"name": "cfg"}],
        "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}, "name": "data"}],
    }));
    assert_eq!(
        ok(original, patch),
        pod_spec(
            json!({"volumes": [{"name": "data", "configMap": {"name": "cm"}}, {"name": "cfg", "secret": {"secretName": "s"}}]})
        )
    );
}

#[test]
fn retain_keys_rejects_patch_field_not_listed() {
    let original = json!({"spec": {"strategy": {"type": "RollingUpdate"}}});
    let error = err(original, json!({"spec": {"strategy": {"$retainKeys": ["rollingUpdate"], "type": "Recreate"}}}));
    assert_eq!(error, PatchError::Invalid("invalid patch format of retainKeys".into()));
    assert_eq!(error.status_code(), 400);
}

#[test]
fn retain_keys_that_is_not_a_list_is_rejected() {
    let original = json!({"spec": {"strategy": {"type": "RollingUpdate"}}});
    let error = err(original, json!({"spec": {"strategy": {"$retainKeys": "type"}}}));
    assert_eq!(error, PatchError::Invalid("invalid patch format of retainKeys".into()));
}

#[test]
fn lists_without_merge_strategy_are_replaced_atomically() {
    let original = pod_spec(json!({
        "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
        "containers": [{"name": "web", "args": ["--a", "--b"]}],
    }));
    let patch = pod_spec(json!({
        "tolerations": [{"key": "c", "operator": "Exists"}],
        "containers": [{"name": "web", "args": ["--c"]}],
    }));
    assert_eq!(
        ok(original, patch),
        pod_spec(json!({
            "tolerations": [{"key": "c", "operator": "Exists"}],
            "containers": [{"name": "web", "args": ["--c"]}],
        }))
    );
}

#[test]
fn fields_without_schema_merge_like_json_merge_patch() {
    let schemas = schemas();
    let original = json!({"spec": {"items": [{"name": "a", "x": 1}], "nested": {"keep": 1, "drop": 2}}});
    let patch = json!({"spec": {"items": [{"name": "b"}], "nested": {"drop": null, "add": 3}}});
    let expected = json!({"spec": {"items": [{"name": "b"}], "nested": {"keep": 1, "add": 3}}});
    assert_eq!(apply(&original, &patch, None, &schemas), Ok(expected.clone()));
    // Unknown fields of a known schema behave the same.
    let root = schemas.0.get("io.k8s.api.apps.v1.Deployment");
    let original = json!({"spec": {"extra": original["spec"].clone()}});
    let patch = json!({"spec": {"extra": patch["spec"].clone()}});
    assert_eq!(apply(&original, &patch, root, &schemas), Ok(json!({"spec": {"extra": expected["spec"].clone()}})));
}

#[test]
fn added_fields_drop_nested_nulls_and_directive_maps() {
    let original = json!({"spec": {"replicas": 1}});
    let patch = pod_spec(json!({"containers": [{"name": "a", "image": null}, {"name": "gone", "$patch": "delete"}]}));
    assert_eq!(
        ok(original, patch),
        json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a"}]}}}})
    );
}

#[test]
fn value_of_another_type_replaces_the_original() {
    let original = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1}}}});
    let patch = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": "50%"}}}});
    assert_eq!(ok(original, patch), json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": "50%"}}}}));
}

#[test]
fn merge_key_missing_from_patch_item_is_rejected() {
    let original = containers(json!([{"name": "web", "image": "nginx"}]));
    let error = err(original, containers(json!([{"image": "nginx:1.27"}])));
    assert_eq!(
        error,
        PatchError::Invalid("map: map[image:nginx:1.27] does not contain declared merge key: name".into())
    );
}

#[test]
fn merge_key_missing_from_live_item_is_rejected() {
    let original = containers(json!([{"image": "orphan"}, {"name": "web"}]));
    let error = err(original, containers(json!([{"name": "web", "image": "x"}])));
    assert_eq!(error, PatchError::Invalid("map: map[image:orphan] does not contain declared merge key: name".into()));
}

#[test]
fn mixed_element_types_in_merge_list_are_rejected() {
    let original = json!({"metadata": {"finalizers": ["a"]}});
    let error = err(original, json!({"metadata": {"finalizers": [1]}}));
    assert_eq!(error, PatchError::Invalid("list element types are not identical: [[a] [1]]".into()));
}

#[test]
fn lists_of_lists_are_rejected_as_unprocessable() {
    let original = json!({"metadata": {"finalizers": [["a"]]}});
    let error = err(original, json!({"metadata": {"finalizers": [["b"]]}}));
    assert_eq!(error, PatchError::Invalid("lists of lists are not supported".into()));
    assert_eq!(error.status_code(), 422);
}

#[test]
fn unexpected_patch_strategy_is_rejected() {
    let mut schemas = schemas();
    schemas.0.insert(
        "broken",
        json!({"type": "object", "properties": {"list": {"type": "array", "x-kubernetes-patch-strategy": "merge,replace"}}}),
    );
    let root = schemas.0.get("broken").cloned();
    let result = apply(&json!({"list": [1]}), &json!({"list": [2]}), root.as_ref(), &schemas);
    assert_eq!(result, Err(PatchError::Invalid("unexpected patch strategy: [merge replace]".into())));
}

#[test]
fn merge_list_of_maps_without_merge_key_is_rejected() {
    let original = pod_spec(json!({"tolerations": [{"key": "a"}]}));
    let error = err(original, pod_spec(json!({"$deleteFromPrimitiveList/tolerations": [{"key": "a"}]})));
    assert_eq!(error, PatchError::Invalid("cannot merge lists without merge key for struct".into()));
}

#[test]
fn null_patch_changes_nothing_and_non_object_patch_is_rejected() {
    let original = json!({"metadata": {"name": "x"}});
    assert_eq!(ok(original.clone(), Value::Null), original);
    let error = err(original, json!(["x"]));
    assert_eq!(
        error,
        PatchError::Invalid("json: cannot unmarshal array into Go value of type map[string]interface {}".into())
    );
    assert_eq!(error.status_code(), 400);
}

/// The Deployment `kubectl apply` (client v1.32) patches in the end-to-end test.
fn live_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\",\"x\":\"y\"},\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"image\":\"nginx:1.25\",\"name\":\"web\",\"ports\":[{\"containerPort\":80}]},{\"image\":\"busybox:1.36\",\"name\":\"sidecar\"}]}}}}\n"
            },
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "generation": 1,
            "labels": {"app": "web", "x": "y"},
            "name": "web",
            "namespace": "default",
            "resourceVersion": "1234",
            "uid": "0b6f4a8e-5b1c-4c9f-9a43-2b0c3f2d1e77"
        },
        "spec": {
            "progressDeadlineSeconds": 600,
            "replicas": 2,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "image": "nginx:1.25",
                            "imagePullPolicy": "IfNotPresent",
                            "name": "web",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"
                        },
                        {
                            "image": "busybox:1.36",
                            "imagePullPolicy": "IfNotPresent",
                            "name": "sidecar",
                            "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30
                }
            }
        },
        "status": {
            "availableReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
            ],
            "observedGeneration": 1,
            "readyReplicas": 2,
            "replicas": 2,
            "updatedReplicas": 2
        }
    })
}

#[test]
fn kubectl_apply_patch_changes_image_and_removes_label_end_to_end() {
    let new_last_applied = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\"},\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"image\":\"nginx:1.27\",\"name\":\"web\",\"ports\":[{\"containerPort\":80}]},{\"image\":\"busybox:1.36\",\"name\":\"sidecar\"}]}}}}\n";
    // Byte for byte what kubectl 1.32 `apply` sends (keys sorted, as Go marshals maps).
    let body = format!(
        "{{\"metadata\":{{\"annotations\":{{\"kubectl.kubernetes.io/last-applied-configuration\":{}}},\"labels\":{{\"x\":null}}}},\"spec\":{{\"template\":{{\"spec\":{{\"$setElementOrder/containers\":[{{\"name\":\"web\"}},{{\"name\":\"sidecar\"}}],\"containers\":[{{\"image\":\"nginx:1.27\",\"name\":\"web\"}}]}}}}}}}}",
        serde_json::to_string(new_last_applied).expect("string encodes")
    );
    let patch: Value = serde_json::from_str(&body).expect("patch parses");

    let result = ok(live_deployment(), patch);

    let mut expected = live_deployment();
    expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = json!(new_last_applied);
    expected["metadata"]["labels"] = json!({"app": "web"});
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    assert_eq!(result, expected);
    // Untouched live fields keep their place; the container order is the one kubectl asked for.
    assert_eq!(container_names(&result), ["web", "sidecar"]);
    let top: Vec<&String> = result.as_object().expect("object").keys().collect();
    assert_eq!(top, ["apiVersion", "kind", "metadata", "spec", "status"]);
}
