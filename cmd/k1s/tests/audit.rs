//! The audit log against a real `k1s server --disable-agent`, driven with stock kubectl and
//! curl: `--audit-policy-file` decides what is recorded and how much; `--audit-log-path` gets
//! one JSON line per event and stage (upstream's `audit.k8s.io/v1` `Event`), rotated by
//! `--audit-log-maxsize`/`-maxbackup`; PodSecurity's and a ValidatingAdmissionPolicy's audit
//! annotations land in the events; a webhook gets batched `EventList`s, and a webhook that is
//! down slows nothing; a malformed policy stops the server, naming the file and the key.

mod common;

use common::{eventually, server_refuses, Server};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: "", resources: [secrets]}]
- level: Request
  resources: [{group: "", resources: [configmaps]}]
- level: Metadata
  resources: [{group: "", resources: [pods, namespaces, serviceaccounts]}]
"#;

/// A folder for the audit files, outside the server's own.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files { dir: tempfile::tempdir().expect("tempdir") }
    }
    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).expect("write");
        p
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn flag(name: &str, value: &Path) -> String {
    format!("--{name}={}", value.display())
}

/// Every event in the log file so far.
fn events(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect()
}

/// The events for which `pred` holds, once there are `n` of them.
fn wait_for(log: &Path, n: usize, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    eventually(Duration::from_secs(10), what, || {
        let found: Vec<Value> = events(log).into_iter().filter(|e| pred(e)).collect();
        (found.len() >= n).then_some(found)
    })
}

fn is(e: &Value, verb: &str, resource: &str, stage: &str) -> bool {
    e["verb"] == verb && e["objectRef"]["resource"] == resource && e["stage"] == stage
}

/// curl with the admin certificate, `headers` added; the reply's headers and body.
fn curl_with_headers(s: &Server, method: &str, path: &str, headers: &[&str]) -> (String, String) {
    let tls = s.data_dir().join("server/tls");
    let mut c = Command::new("curl");
    c.args(["-sS", "-D", "/dev/stderr", "-X", method, "--cacert"])
        .arg(tls.join("server-ca.crt"))
        .arg("--cert")
        .arg(tls.join("client-admin.crt"))
        .arg("--key")
        .arg(tls.join("client-admin.key"));
    for h in headers {
        c.args(["-H", h]);
    }
    let out = c.arg(format!("https://127.0.0.1:{}{path}", s.port)).output().expect("curl");
    (String::from_utf8_lossy(&out.stderr).into_owned(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_configmap_create_is_recorded_at_request_level_and_secrets_at_none_are_not() {
    let f = Files::new();
    let policy = f.write("policy.yaml", POLICY);
    let log = f.path("logs/audit.log");
    let s = Server::start_with(&[&flag("audit-policy-file", &policy), &flag("audit-log-path", &log)]);

    s.ok(&["create", "configmap", "audited", "--from-literal=colour=blue", "-n", "default"]);
    s.ok(&["create", "secret", "generic", "hidden", "--from-literal=password=hunter2", "-n", "default"]);
    let done = wait_for(&log, 1, "the configmap create's ResponseComplete event", |e| {
        is(e, "create", "configmaps", "ResponseComplete")
    });
    let ev = &done[0];
    assert_eq!(ev["kind"], "Event");
    assert_eq!(ev["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(ev["level"], "Request");
    assert_eq!(ev["user"]["username"], "system:admin");
    assert!(ev["user"]["groups"].as_array().is_some_and(|g| g.iter().any(|g| g == "system:masters")), "{ev}");
    assert_eq!(ev["objectRef"]["namespace"], "default");
    assert_eq!(ev["objectRef"]["name"], "audited", "a create's name comes from its object");
    assert_eq!(ev["objectRef"]["apiVersion"], "v1");
    assert_eq!(ev["responseStatus"]["code"], 201);
    assert_eq!(ev["requestObject"]["kind"], "ConfigMap");
    assert_eq!(ev["requestObject"]["data"]["colour"], "blue");
    assert!(ev.get("responseObject").is_none(), "no response object below RequestResponse: {ev}");
    assert_eq!(ev["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert!(ev["userAgent"].as_str().is_some_and(|u| u.starts_with("kubectl")), "{ev}");
    assert!(ev["requestURI"].as_str().is_some_and(|u| u.starts_with("/api/v1/namespaces/default/configmaps")));
    assert_eq!(ev["annotations"]["authorization.k8s.io/decision"], "allow");
    // The RequestReceived stage of the same request, with the same ID and arrival time.
    let received = wait_for(&log, 1, "the RequestReceived event", |e| {
        is(e, "create", "configmaps", "RequestReceived") && e["auditID"] == ev["auditID"]
    });
    assert_eq!(received[0]["requestReceivedTimestamp"], ev["requestReceivedTimestamp"]);
    assert_eq!(received[0]["stageTimestamp"], ev["requestReceivedTimestamp"]);
    assert!(received[0].get("responseStatus").is_none());
    // Secrets are at None: nothing about them, not even their values.
    let all = events(&log);
    assert!(!all.iter().any(|e| e["objectRef"]["resource"] == "secrets"), "a secret was audited");
    assert!(!std::fs::read_to_string(&log).expect("log").contains("hunter2"));

    // The reply's Audit-Id is the event's; a client may choose it.
    let (head, _) = curl_with_headers(&s, "GET", "/api/v1/namespaces/default/configmaps/audited", &[]);
    let id = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("audit-id: ").map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no Audit-Id header:\n{head}"));
    wait_for(&log, 1, "the get's event by its Audit-Id", |e| e["auditID"] == id.as_str() && e["verb"] == "get");
    let (head, _) = curl_with_headers(&s, "GET", "/version", &["Audit-ID: chosen-by-me"]);
    assert!(head.to_ascii_lowercase().contains("audit-id: chosen-by-me"), "{head}");

    // A refusal: the user, whom they impersonated, the decision and the Status.
    let out = s.kubectl(&["get", "configmap", "audited", "-n", "default", "--as=mallory"]);
    assert!(!out.status.success());
    let refused = wait_for(&log, 1, "the forbidden get", |e| {
        is(e, "get", "configmaps", "ResponseComplete") && e["impersonatedUser"]["username"] == "mallory"
    });
    let ev = &refused[0];
    assert_eq!(ev["user"]["username"], "system:admin");
    assert_eq!(ev["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(ev["responseStatus"]["code"], 403);
    assert_eq!(ev["responseStatus"]["reason"], "Forbidden");
    assert_eq!(ev["responseStatus"]["status"], "Failure");
    assert!(ev["responseStatus"].get("kind").is_none(), "{ev}");

    // A watch is long-running: ResponseStarted when it starts, ResponseComplete when it ends.
    let (_, _) = curl_with_headers(&s, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1", &[]);
    let watch = wait_for(&log, 2, "the watch's two stages", |e| {
        e["verb"] == "watch" && matches!(e["stage"].as_str(), Some("ResponseStarted" | "ResponseComplete"))
    });
    assert_eq!(watch[0]["stage"], "ResponseStarted");
    assert_eq!(watch[1]["stage"], "ResponseComplete");
    assert_eq!(watch[0]["auditID"], watch[1]["auditID"]);
    assert_eq!(watch[1]["responseStatus"]["code"], 200);
    let lines = std::fs::read_to_string(&log).expect("log");
    assert!(lines.ends_with('\n') && lines.lines().all(|l| !l.is_empty()));
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&log).expect("log").permissions().mode() & 0o777, 0o600);
}

#[test]
fn admissions_audit_annotations_land_in_the_events() {
    let f = Files::new();
    let policy = f.write("policy.yaml", POLICY);
    let log = f.path("audit.log");
    let s = Server::start_with(&[&flag("audit-policy-file", &policy), &flag("audit-log-path", &log)]);
    s.ok(&["create", "namespace", "watched"]);
    s.ok(&["label", "namespace", "watched", "pod-security.kubernetes.io/audit=restricted"]);
    // No controllers run: the namespace's default ServiceAccount is made by hand.
    s.ok(&["create", "serviceaccount", "default", "-n", "watched"]);
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: loud}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    securityContext: {privileged: true}\n";
    s.ok_stdin(&["create", "-n", "watched", "-f", "-"], pod);
    let found = wait_for(&log, 1, "the pod create's event", |e| is(e, "create", "pods", "ResponseComplete"));
    let ev = &found[0];
    assert_eq!(ev["level"], "Metadata");
    assert_eq!(ev["objectRef"]["name"], "loud");
    assert_eq!(ev["responseStatus"]["code"], 201);
    assert!(ev.get("requestObject").is_none(), "no body at Metadata: {ev}");
    let violations = ev["annotations"]["pod-security.kubernetes.io/audit-violations"].as_str().unwrap_or_default();
    assert!(
        violations.starts_with(r#"would violate PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)"#),
        "{ev}"
    );
    assert_eq!(ev["annotations"]["pod-security.kubernetes.io/enforce-policy"], "privileged:latest");
    assert!(!s.logs().contains("PodSecurity audit annotation"), "annotations go to the audit log, not the server's");

    // A ValidatingAdmissionPolicy's `Audit` action and its `auditAnnotations`.
    s.ok_stdin(&["apply", "-f", "-"], VAP);
    let mut i = 0;
    let ev = eventually(Duration::from_secs(20), "the policy's annotations", || {
        i += 1;
        let name = format!("unlabelled-{i}");
        s.ok(&["create", "configmap", &name, "-n", "default"]);
        let evs = wait_for(&log, 1, "the configmap create", |e| {
            is(e, "create", "configmaps", "ResponseComplete") && e["objectRef"]["name"] == name.as_str()
        });
        evs.into_iter().find(|e| e["annotations"].get("labelled/name").is_some())
    });
    let name = ev["objectRef"]["name"].as_str().expect("name");
    assert_eq!(ev["annotations"]["labelled/name"], format!("configmap {name}"));
    let failure = ev["annotations"]["validation.policy.admission.k8s.io/validation_failure"].as_str().expect("failure");
    assert_eq!(
        serde_json::from_str::<Value>(failure).expect("json"),
        serde_json::json!([{"message": "configmaps need a team label", "policy": "labelled", "binding": "labelled",
                            "expressionIndex": 0, "validationActions": ["Audit"]}])
    );
}

const VAP: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: labelled}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: configmaps need a team label
  auditAnnotations:
  - key: name
    valueExpression: "'configmap ' + object.metadata.name"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: labelled}
spec:
  policyName: labelled
  validationActions: [Audit]
"#;

#[test]
fn a_tiny_maxsize_rotates_the_log_and_keeps_maxbackup_backups() {
    let f = Files::new();
    let policy = f.write(
        "policy.yaml",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: RequestResponse\n  resources: [{group: \"\", resources: [configmaps]}]\n",
    );
    let log = f.path("audit.log");
    let s = Server::start_with(&[
        &flag("audit-policy-file", &policy),
        &flag("audit-log-path", &log),
        "--audit-log-maxsize=1",
        "--audit-log-maxbackup=2",
    ]);
    // Each create's event holds its ~200 KB object twice (request and response): a 1 MB file
    // takes two events.
    let big = f.write("big.txt", &"x".repeat(200 * 1024));
    for i in 0..9 {
        s.ok(&["create", "configmap", &format!("big-{i}"), &format!("--from-file=data={}", big.display())]);
    }
    let backups = eventually(Duration::from_secs(10), "two backups", || {
        let mut names: Vec<String> = std::fs::read_dir(f.dir.path())
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("audit-") && n.ends_with(".log"))
            .collect();
        names.sort();
        (names.len() == 2).then_some(names)
    });
    for b in &backups {
        // lumberjack's name: audit-2006-01-02T15-04-05.000.log, in UTC.
        let stamp = &b["audit-".len()..b.len() - ".log".len()];
        assert_eq!(stamp.len(), 23, "{b}");
        assert_eq!(&stamp[10..11], "T", "{b}");
        let path = f.path(b);
        assert!(std::fs::metadata(&path).expect("backup").len() <= 1024 * 1024, "{b} is over the maximum");
        let evs = events(&path);
        assert!(!evs.is_empty() && evs.iter().all(|e| e["kind"] == "Event"), "{b}");
    }
    // 9 creates at ~2 a file: more files were made than kept.
    let kept: usize = backups.iter().map(|b| events(&f.path(b)).len()).sum::<usize>() + events(&log).len();
    assert!(kept < 9, "old backups were not removed ({kept} events kept)");
    assert!(events(&log).iter().any(|e| e["objectRef"]["name"] == "big-8"), "the newest event is in the current file");
}

#[test]
fn batch_mode_records_every_event_and_a_graceful_stop_writes_out_the_queue() {
    let f = Files::new();
    let policy = f.write("policy.yaml", POLICY);
    let log = f.path("audit.log");
    let mut s = Server::start_with(&[
        &flag("audit-policy-file", &policy),
        &flag("audit-log-path", &log),
        "--audit-log-mode=batch",
    ]);
    let names: Vec<String> = (0..30).map(|i| format!("batched-{i}")).collect();
    let manifests: String = names
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}, namespace: default}}\n---\n"))
        .collect();
    s.ok_stdin(&["apply", "-f", "-"], &manifests);
    let created = wait_for(&log, 30, "30 create events", |e| is(e, "create", "configmaps", "ResponseComplete"));
    for n in &names {
        assert!(created.iter().any(|e| e["objectRef"]["name"] == n.as_str()), "{n} is not recorded");
    }
    // Each event is whole and at its level, both stages written.
    let received = events(&log).into_iter().filter(|e| is(e, "create", "configmaps", "RequestReceived")).count();
    assert!(received >= 30, "{received} RequestReceived events");
    assert!(created.iter().all(|e| e["level"] == "Request" && e["requestObject"]["kind"] == "ConfigMap"));
    // The last events before a stop are not lost.
    s.ok(&["delete", "configmap", "batched-0", "-n", "default"]);
    s.stop();
    let deleted = events(&log).into_iter().filter(|e| is(e, "delete", "configmaps", "ResponseComplete")).count();
    assert_eq!(deleted, 1, "the delete's event was written out before the server stopped");
}

#[test]
fn a_malformed_policy_stops_the_server_naming_the_file_and_the_key() {
    let f = Files::new();
    let policy = f.write("policy.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n");
    let out = server_refuses(&[&flag("audit-policy-file", &policy), &flag("audit-log-path", &f.path("audit.log"))]);
    assert!(out.contains(&policy.display().to_string()), "the file is not named:\n{out}");
    assert!(
        out.contains(r#"rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse""#),
        "{out}"
    );
    let missing = f.path("missing.yaml");
    let out = server_refuses(&[&flag("audit-policy-file", &missing)]);
    assert!(out.contains(&missing.display().to_string()), "{out}");
    let bad_type =
        f.write("types.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  verbs: get\n");
    let out = server_refuses(&[&flag("audit-policy-file", &bad_type), &flag("audit-log-path", &f.path("a.log"))]);
    assert!(out.contains("rules[0].verbs: expected a list, found the string \"get\""), "{out}");
}

/// A plain-HTTP webhook on loopback: the EventLists it was sent.
fn webhook_receiver() -> (u16, std::sync::mpsc::Receiver<Value>) {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().expect("clone"));
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let l = line.trim().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_ok() {
                if let Ok(v) = serde_json::from_slice(&body) {
                    let _ = tx.send(v);
                }
            }
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, rx)
}

fn webhook_kubeconfig(f: &Files, name: &str, port: u16) -> PathBuf {
    f.write(
        name,
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster: {{server: \"http://127.0.0.1:{port}/events\"}}\ncontexts:\n- name: audit\n  context: {{cluster: audit}}\ncurrent-context: audit\n"
        ),
    )
}

#[test]
fn a_webhook_gets_event_lists_and_one_that_is_down_slows_nothing() {
    let f = Files::new();
    let policy = f.write("policy.yaml", POLICY);
    let (port, received) = webhook_receiver();
    let up = webhook_kubeconfig(&f, "up.kubeconfig", port);
    let s = Server::start_with(&[
        &flag("audit-policy-file", &policy),
        &flag("audit-webhook-config-file", &up),
        "--audit-webhook-batch-max-wait=1s",
    ]);
    s.ok(&["create", "configmap", "sent", "-n", "default"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = Vec::new();
    while !seen.iter().any(|e: &Value| is(e, "create", "configmaps", "ResponseComplete")) {
        let left = deadline.saturating_duration_since(Instant::now());
        let list = received.recv_timeout(left).expect("an EventList within 15 s");
        assert_eq!(list["kind"], "EventList");
        assert_eq!(list["apiVersion"], "audit.k8s.io/v1");
        seen.extend(list["items"].as_array().cloned().unwrap_or_default());
    }
    let ev = seen.iter().find(|e| is(e, "create", "configmaps", "ResponseComplete")).expect("event");
    assert_eq!(ev["objectRef"]["name"], "sent");
    assert_eq!(ev["requestObject"]["kind"], "ConfigMap");
    drop(s);

    // Nothing listens on the webhook's port: requests go on as fast as ever.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_port = closed.local_addr().expect("addr").port();
    drop(closed);
    let down = webhook_kubeconfig(&f, "down.kubeconfig", dead_port);
    let s = Server::start_with(&[
        &flag("audit-policy-file", &policy),
        &flag("audit-webhook-config-file", &down),
        "--audit-webhook-batch-max-wait=100ms",
        "--audit-webhook-initial-backoff=100ms",
    ]);
    let started = Instant::now();
    for i in 0..20 {
        s.ok(&["create", "configmap", &format!("c{i}"), "-n", "default"]);
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "20 creates took {took:?} with the webhook down");
    assert_eq!(
        s.ok(&["get", "configmaps", "-n", "default", "-o", "name"]).lines().filter(|l| l.contains("/c")).count(),
        20
    );
    eventually(Duration::from_secs(10), "the failed sends to be logged", || {
        s.logs().contains("sending audit events to the webhook failed").then_some(())
    });
}

#[test]
fn without_a_policy_nothing_is_recorded() {
    let f = Files::new();
    let log = f.path("audit.log");
    let s = Server::start_with(&[&flag("audit-log-path", &log)]);
    s.ok(&["create", "configmap", "unseen", "-n", "default"]);
    // Replies still carry an Audit-Id, as upstream's do.
    let (head, _) = curl_with_headers(&s, "GET", "/api/v1/namespaces/default/configmaps/unseen", &[]);
    assert!(head.to_ascii_lowercase().contains("audit-id: "), "{head}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(events(&log).is_empty(), "events were recorded without a policy");
}
