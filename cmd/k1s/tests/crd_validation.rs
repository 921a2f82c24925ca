//! CEL validation rules of CustomResourceDefinitions (`x-kubernetes-validations`) with stock
//! kubectl against a real `k1s server --disable-agent`: rules refuse custom resources on create,
//! update (transition rules with `oldSelf`) and status update with their message and field
//! path (422 Invalid), and a rule that does not compile makes the definition invalid; on update,
//! rules and schema constraints are ratcheted: a value left unchanged only warns.

mod common;

use common::Server;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size <= 10", message: "size must be at most 10", fieldPath: ".size"}
            - rule: "!has(self.name) || self.name.lowerAscii() == self.name"
              messageExpression: "'name ' + self.name + ' must be lower case'"
              reason: FieldValueForbidden
            properties:
              size:
                type: integer
                x-kubernetes-validations:
                - {rule: "self >= oldSelf", message: "size may not decrease"}
              name: {type: string}
          status:
            type: object
            x-kubernetes-validations:
            - {rule: "self.ready <= 3", message: "at most 3 ready"}
            properties:
              ready: {type: integer}
"#;

fn gadget(size: i64) -> String {
    format!("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {{name: g1}}\nspec: {{size: {size}}}\n")
}

fn refused(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "refused: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rules_refuse_custom_resources_on_create_update_and_status_update() {
    let s = Server::start();
    s.ok_stdin(&["apply", "-f", "-"], CRD);
    s.ok(&["wait", "--for=condition=Established", "crd/gadgets.example.com", "--timeout=30s"]);

    let err = refused(&s.kubectl_stdin(&["apply", "-f", "-"], &gadget(50)));
    assert!(err.contains("is invalid"), "{err}");
    assert!(err.contains(r#"spec.size: Invalid value: "object": size must be at most 10"#), "{err}");
    assert!(!s.kubectl(&["get", "gadget", "g1"]).status.success(), "nothing was written");

    s.ok_stdin(&["apply", "-f", "-"], &gadget(5));

    // A transition rule: the size may not go down, whether patched or applied.
    let err = refused(&s.kubectl(&["patch", "gadget", "g1", "--type=merge", "-p", r#"{"spec": {"size": 3}}"#]));
    assert!(err.contains(r#"spec.size: Invalid value: "integer": size may not decrease"#), "{err}");
    let err = refused(&s.kubectl_stdin(&["apply", "-f", "-"], &gadget(4)));
    assert!(err.contains("size may not decrease"), "{err}");
    s.ok(&["patch", "gadget", "g1", "--type=merge", "-p", r#"{"spec": {"size": 7}}"#]);
    assert_eq!(s.ok(&["get", "gadget", "g1", "-o", "jsonpath={.spec.size}"]), "7");

    // messageExpression and reason.
    let err = refused(&s.kubectl(&["patch", "gadget", "g1", "--type=merge", "-p", r#"{"spec": {"name": "Big"}}"#]));
    assert!(err.contains("spec: Forbidden: name Big must be lower case"), "{err}");

    // The status subresource is validated too.
    let err = refused(&s.kubectl(&[
        "patch",
        "gadget",
        "g1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"ready": 5}}"#,
    ]));
    assert!(err.contains(r#"status: Invalid value: "object": at most 3 ready"#), "{err}");
    s.ok(&["patch", "gadget", "g1", "--subresource=status", "--type=merge", "-p", r#"{"status": {"ready": 2}}"#]);
    assert_eq!(s.ok(&["get", "gadget", "g1", "-o", "jsonpath={.status.ready}"]), "2");
}

#[test]
fn a_rule_that_does_not_compile_makes_the_definition_invalid() {
    let s = Server::start();
    let bad = CRD.replace(r#"rule: "self.size <= 10""#, r#"rule: "self.size <<""#);
    let err = refused(&s.kubectl_stdin(&["apply", "-f", "-"], &bad));
    assert!(err.contains(r#"The CustomResourceDefinition "gadgets.example.com" is invalid"#), "{err}");
    assert!(
        err.contains(r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.size <<""#),
        "{err}"
    );
    assert!(err.contains("compilation failed: ERROR: <input>:1:"), "{err}");
    let undeclared = CRD.replace(r#"rule: "self.ready <= 3""#, r#"rule: "ready <= 3""#);
    let err = refused(&s.kubectl_stdin(&["apply", "-f", "-"], &undeclared));
    assert!(err.contains("undeclared reference to 'ready'"), "{err}");
    assert!(!s.kubectl(&["get", "crd", "gadgets.example.com"]).status.success(), "nothing was written");

    // The Status is a 422 Invalid.
    let file = s.write_file("bad.yaml", &bad);
    let out = s.kubectl(&["create", "-f", file.to_str().unwrap_or_default(), "-v=6"]);
    let log = refused(&out);
    assert!(log.contains("422"), "{log}");
}

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              name: {type: string}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
"#;

/// The definition once tightened: a rule on `size` and a `maxLength` on `name`.
fn tightened() -> String {
    WIDGETS
        .replace(
            "size: {type: integer}",
            r#"size: {type: integer, x-kubernetes-validations: [{rule: "self <= 5", message: "size must be at most 5"}]}"#,
        )
        .replace("name: {type: string}", "name: {type: string, maxLength: 3}")
}

fn patch(s: &Server, body: &str, dry_run: bool) -> std::process::Output {
    let mut args = vec!["patch", "widget", "w1", "--type=merge", "-p", body];
    if dry_run {
        args.push("--dry-run=server");
    }
    s.kubectl(&args)
}

#[test]
fn tightened_rules_are_ratcheted_on_unchanged_fields() {
    let s = Server::start();
    s.ok_stdin(&["apply", "-f", "-"], WIDGETS);
    s.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 8, name: abcdef, tags: [a]}\n",
    );

    // Tighten the definition; wait until the new rule is enforced (checked with dry runs).
    s.ok_stdin(&["apply", "-f", "-"], &tightened());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while patch(&s, r#"{"spec": {"size": 9}}"#, true).status.success() {
        assert!(std::time::Instant::now() < deadline, "the tightened rule is never enforced");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // An update that leaves size and name alone is accepted: their errors are warnings.
    let out = patch(&s, r#"{"spec": {"tags": ["a", "b"]}}"#, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "accepted: {stderr}");
    assert!(stderr.contains(r#"Warning: spec.size: Invalid value: "integer": size must be at most 5"#), "{stderr}");
    assert!(stderr.contains("Warning: spec.name: Too long"), "{stderr}");
    assert_eq!(s.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.tags}"]), r#"["a","b"]"#);

    // Changing the ratcheted field to another invalid value is refused, with the rule's error.
    let err = refused(&patch(&s, r#"{"spec": {"size": 9}}"#, false));
    assert!(err.contains(r#"spec.size: Invalid value: "integer": size must be at most 5"#), "{err}");
    let err = refused(&patch(&s, r#"{"spec": {"name": "abcdefg"}}"#, false));
    assert!(err.contains("spec.name: Too long"), "{err}");
    assert_eq!(s.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size} {.spec.name}"]), "8 abcdef");

    // A valid value is accepted, and a new object gets no ratcheting.
    s.ok(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec": {"size": 4, "name": "abc"}}"#]);
    let err = refused(&s.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 8}\n",
    ));
    assert!(err.contains("size must be at most 5"), "{err}");
}
