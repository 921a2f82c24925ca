//! Custom resources with stock kubectl against a real `k1s server --disable-agent`: a
//! CustomResourceDefinition is established, its resources are served in each version with
//! their schema (pruning, defaults, validation), printer columns, status and scale
//! subresources, watch, every patch type kubectl sends, and deleting the definition deletes
//! them; `kubectl explain` reads their schemas from `/openapi/v3`.

mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::time::Duration;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10, description: How big the widget is.}
              color: {type: string, enum: [red, blue], default: red}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3, replicas: 1}
"#;

fn apply(s: &Server, manifest: &str) -> String {
    s.ok_stdin(&["apply", "-f", "-"], manifest)
}

fn rv(s: &Server, what: &str) -> String {
    s.ok(&["get", what, "-o", "jsonpath={.metadata.resourceVersion}"])
}

fn raw(s: &Server, path: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "--raw", path])).expect("JSON")
}

fn established(s: &Server) {
    s.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s"]);
}

#[test]
fn a_definition_serves_its_resources_with_schema_columns_and_subresources() {
    let s = Server::start();
    apply(&s, CRD);
    established(&s);
    let crd = s.json(&["get", "crd", "widgets.example.com"]);
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget", "{crd}");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]), "{crd}");
    let res = s.ok(&["api-resources", "--api-group=example.com"]);
    let line = res.lines().find(|l| l.starts_with("widgets")).expect("listed");
    assert_eq!(line.split_whitespace().collect::<Vec<_>>(), ["widgets", "wd", "example.com/v1", "true", "Widget"]);

    // Create, default, and re-apply unchanged.
    assert!(apply(&s, WIDGET).contains("widget.example.com/w1 created"));
    let w = s.json(&["get", "wd", "w1"]);
    assert_eq!(w["spec"]["color"], "red", "defaulted: {w}");
    assert_eq!(w["metadata"]["generation"], 1, "{w}");
    let before = rv(&s, "widget/w1");
    assert!(apply(&s, WIDGET).contains("unchanged"));
    assert_eq!(rv(&s, "widget/w1"), before);
    assert!(s.ok(&["get", "all", "-o", "name"]).contains("widget.example.com/w1"), "in the all category");

    // Validation and pruning.
    let too_big = s.kubectl_stdin(&["apply", "-f", "-"], &WIDGET.replace("w1", "w9").replace("size: 3", "size: 11"));
    assert!(!too_big.status.success());
    let err = String::from_utf8_lossy(&too_big.stderr);
    assert!(
        err.contains("spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"),
        "{err}"
    );
    let unknown = WIDGET.replace("w1", "w8").replace("replicas: 1", "replicas: 1, shape: round");
    let strict = s.kubectl_stdin(&["apply", "-f", "-"], &unknown);
    assert!(String::from_utf8_lossy(&strict.stderr).contains(r#"unknown field "spec.shape""#), "{strict:?}");
    s.ok_stdin(&["apply", "--validate=false", "-f", "-"], &unknown);
    assert!(s.json(&["get", "wd", "w8"])["spec"].get("shape").is_none(), "pruned");
    assert_eq!(s.ok(&["get", "wd", "-o", "name"]).lines().count(), 2, "w9 was not written");

    // Status goes through /status only; the columns read it.
    let status =
        r#"{"status": {"replicas": 2, "selector": "app=w1", "conditions": [{"type": "Ready", "status": "True"}]}}"#;
    s.ok(&["patch", "wd", "w1", "--subresource=status", "--type=merge", "-p", status]);
    s.ok(&["patch", "wd", "w1", "--type=merge", "-p", r#"{"status": {"replicas": 9}}"#]);
    assert_eq!(s.json(&["get", "wd", "w1"])["status"]["replicas"], 2, "status is not written through the object");
    let table = s.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "READY", "AGE"]);
    let row: Vec<&str> = table.lines().find(|l| l.starts_with("w1 ")).expect("row").split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "3", "True"], "{table}");

    // Scale, as kubectl scale and an HPA use it.
    s.ok(&["scale", "widget/w1", "--replicas=4"]);
    assert_eq!(s.json(&["get", "wd", "w1"])["spec"]["replicas"], 4);
    let scale: Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/apis/example.com/v1/namespaces/default/widgets/w1/scale"]))
            .expect("json");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!((scale["spec"]["replicas"].as_i64(), scale["status"]["replicas"].as_i64()), (Some(4), Some(2)));
    assert_eq!(scale["status"]["selector"], "app=w1");

    // Patches: merge and JSON yes, strategic no (upstream's 415), server-side apply with fields.
    s.ok(&["patch", "wd", "w1", "--type=json", "-p", r#"[{"op": "replace", "path": "/spec/size", "value": 5}]"#]);
    assert_eq!(s.json(&["get", "wd", "w1"])["metadata"]["generation"], 3, "spec changes bump the generation");
    let smp = s.kubectl(&["patch", "wd", "w1", "-p", r#"{"spec": {"size": 6}}"#]);
    assert!(
        String::from_utf8_lossy(&smp.stderr).contains("application/strategic-merge-patch+json is not supported"),
        "{smp:?}"
    );
    s.ok_stdin(&["apply", "--server-side", "-f", "-"], &WIDGET.replace("w1", "w2"));
    let w2 = s.json(&["get", "wd", "w2", "--show-managed-fields"]);
    let managers = w2["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    assert!(
        managers.iter().any(|m| m["manager"] == "kubectl"
            && m["operation"] == "Apply"
            && m["fieldsV1"]["f:spec"]["f:size"].is_object()),
        "{w2}"
    );

    // Every served version reads the same object; the store keeps the storage version.
    let beta: Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/apis/example.com/v1beta1/namespaces/default/widgets/w1"]))
            .expect("json");
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["size"], 5);
    assert_eq!(beta["metadata"]["resourceVersion"], s.json(&["get", "wd", "w1"])["metadata"]["resourceVersion"]);

    // Watch.
    let from = rv(&s, "widget/w2");
    s.ok(&["delete", "wd", "w2"]);
    let (code, events) = s.curl_text(
        "GET",
        &format!("/apis/example.com/v1/namespaces/default/widgets?watch=true&timeoutSeconds=1&resourceVersion={from}"),
        &[],
        None,
    );
    assert_eq!(code, 200);
    let kinds: Vec<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["object"]["metadata"]["name"] == "w2")
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(kinds, ["DELETED"], "{events}");
}

#[test]
fn deleting_a_definition_deletes_its_resources_and_definitions_survive_restarts() {
    let mut s = Server::start();
    apply(&s, CRD);
    established(&s);
    apply(&s, WIDGET);
    s.restart();
    established(&s);
    assert_eq!(s.json(&["get", "wd", "w1"])["spec"]["size"], 3, "served again after a restart");
    // A finalizer holds one widget: the definition waits for it.
    s.ok(&["patch", "wd", "w1", "--type=merge", "-p", r#"{"metadata": {"finalizers": ["example.com/hold"]}}"#]);
    s.ok(&["delete", "crd", "widgets.example.com", "--wait=false"]);
    let crd = eventually(Duration::from_secs(20), "the definition to be terminating", || {
        let crd = s.json(&["get", "crd", "widgets.example.com"]);
        let terminating =
            crd["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Terminating"));
        terminating.then_some(crd)
    });
    assert!(
        crd["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "customresourcecleanup.apiextensions.k8s.io")),
        "{crd}"
    );
    // The cleanup marks the definition Terminating, then deletes its objects: wait for that.
    eventually(Duration::from_secs(20), "the widget to be deleting", || {
        s.json(&["get", "wd", "w1"])["metadata"]["deletionTimestamp"].is_string().then_some(())
    });
    s.ok(&["patch", "wd", "w1", "--type=merge", "-p", r#"{"metadata": {"finalizers": null}}"#]);
    eventually(Duration::from_secs(20), "the definition to go", || {
        (!s.kubectl(&["get", "crd", "widgets.example.com"]).status.success()).then_some(())
    });
    // (kubectl's cached discovery may still name widgets: the list is what fails.)
    assert!(!s.kubectl(&["get", "widgets"]).status.success(), "widgets are no longer served");
    let (code, _) = s.curl("GET", "/apis/example.com/v1", None, None);
    assert_eq!(code, 404, "nor is their group");
    // Defined again, it starts empty.
    apply(&s, CRD);
    established(&s);
    assert_eq!(s.ok(&["get", "wd", "-o", "name"]).trim(), "");
}

#[test]
fn invalid_definitions_get_422_with_their_fields() {
    let s = Server::start();
    let bad = CRD
        .replace("name: widgets.example.com", "name: gadgets.example.com")
        .replace("storage: true", "storage: false");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"
        ),
        "{err}"
    );
    assert!(err.contains("must have exactly one version marked as storage version"), "{err}");
    assert!(!s.kubectl(&["get", "crd", "gadgets.example.com"]).status.success(), "nothing was written");
}

#[test]
fn kubectl_explain_reads_a_definitions_schema_from_openapi_v3() {
    let s = Server::start();
    apply(&s, CRD);
    established(&s);
    let index = raw(&s, "/openapi/v3");
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"].as_str().unwrap_or_default().to_string();
    assert!(url.starts_with("/openapi/v3/apis/example.com/v1?hash="), "{index}");
    assert!(index["paths"]["apis/apps/v1"].is_object(), "the built-in group-versions stay listed");
    let doc = raw(&s, &url);
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(widget["x-kubernetes-group-version-kind"][0]["kind"], "Widget", "{widget}");
    assert_eq!(widget["properties"]["spec"]["properties"]["size"]["maximum"], 10);
    assert!(doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    let list = &doc["components"]["schemas"]["com.example.v1.WidgetList"];
    assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "WidgetList", "{list}");
    let patch = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    let types: Vec<&String> =
        patch["requestBody"]["content"].as_object().map(|c| c.keys().collect()).unwrap_or_default();
    assert!(types.iter().any(|t| *t == "application/merge-patch+json"), "{patch}");
    assert!(
        !types.iter().any(|t| t.contains("strategic")),
        "custom resources take no strategic merge patch: {types:?}"
    );
    assert!(doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status"]["put"].is_object());

    let size = s.ok(&["explain", "widgets.spec.size"]);
    for want in [
        "GROUP:      example.com",
        "KIND:       Widget",
        "VERSION:    v1",
        "FIELD: size <integer>",
        "How big the widget is.",
    ] {
        assert!(size.contains(want), "{want:?} in {size}");
    }
    let spec = s.ok(&["explain", "widget.spec"]);
    assert!(spec.contains("color\t<string>") && spec.contains("size\t<integer> -required-"), "{spec}");
    let meta = s.ok(&["explain", "wd.metadata.labels"]);
    assert!(meta.contains("map[string]string"), "metadata is ObjectMeta: {meta}");
    let v1beta1 = s.ok(&["explain", "widgets", "--api-version=example.com/v1beta1"]);
    assert!(v1beta1.contains("VERSION:    v1beta1"), "{v1beta1}");

    s.ok(&["delete", "crd", "widgets.example.com"]);
    eventually(Duration::from_secs(10), "the document to go with its definition", || {
        raw(&s, "/openapi/v3")["paths"]["apis/example.com/v1"].is_null().then_some(())
    });
    let (code, _) = s.curl("GET", "/openapi/v3/apis/example.com/v1", None, None);
    assert_eq!(code, 404);
}
