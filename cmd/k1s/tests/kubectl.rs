//! Stock kubectl against a real `k1s server --disable-agent`: the everyday workflow.

mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

const MANIFEST: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: shop
  labels:
    app: web
data:
  greeting: hello
---
apiVersion: v1
kind: Secret
metadata:
  name: web-secret
  namespace: shop
stringData:
  password: s3cret
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: 127.0.0.1:5000/busybox:1.36
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 80
"#;

fn rvs(s: &Server) -> Vec<String> {
    [
        "namespace/shop",
        "-n=shop configmap/web-config",
        "-n=shop secret/web-secret",
        "-n=shop deployment/web",
        "-n=shop service/web",
    ]
    .iter()
    .map(|what| {
        let mut args: Vec<&str> = vec!["get"];
        args.extend(what.split(' '));
        args.extend(["-o", "jsonpath={.metadata.resourceVersion}"]);
        s.ok(&args)
    })
    .collect()
}

#[test]
fn apply_multi_document_then_reapply_unchanged_keeps_resource_versions() {
    let s = Server::start();
    let f = s.write_file("app.yaml", MANIFEST);
    let out = s.ok(&["apply", "-f", f.to_str().expect("path")]);
    for created in [
        "namespace/shop created",
        "configmap/web-config created",
        "secret/web-secret created",
        "deployment.apps/web created",
        "service/web created",
    ] {
        assert!(out.contains(created), "missing {created:?} in:\n{out}");
    }
    let before = rvs(&s);
    let again = s.ok(&["apply", "-f", f.to_str().expect("path")]);
    assert!(again.contains("deployment.apps/web unchanged"), "{again}");
    assert_eq!(before, rvs(&s), "re-apply of an unchanged manifest wrote something");
    // Defaults the server filled in, as upstream does.
    let d = s.json(&["get", "deploy", "web", "-n", "shop"]);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(d["metadata"]["generation"], 1);
    let secret = s.json(&["get", "secret", "web-secret", "-n", "shop"]);
    assert_eq!(secret["data"]["password"], "czNjcmV0");
    assert_eq!(secret["type"], "Opaque");
    // A changed manifest is applied as a patch and bumps generation.
    let changed = s.write_file("app2.yaml", &MANIFEST.replace("replicas: 2", "replicas: 3"));
    let out = s.ok(&["apply", "-f", changed.to_str().expect("path")]);
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let d = s.json(&["get", "deploy", "web", "-n", "shop"]);
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
}

#[test]
fn server_side_apply_creates_updates_and_reports_conflicts() {
    let s = Server::start();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: default\ndata:\n  a: \"1\"\n  b: \"2\"\n";
    let f = s.write_file("ssa.yaml", cm);
    let out = s.ok(&["apply", "--server-side", "-f", f.to_str().expect("path")]);
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");
    let obj = s.json(&["get", "cm", "ssa", "--show-managed-fields"]);
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");
    // Another manager takes field `a`; applying a different value for it conflicts.
    s.ok(&["patch", "cm", "ssa", "--type=merge", "-p", r#"{"data":{"a":"other"}}"#, "--field-manager=intruder"]);
    let f2 = s.write_file("ssa2.yaml", &cm.replace("a: \"1\"", "a: \"3\""));
    let out = s.kubectl(&["apply", "--server-side", "-f", f2.to_str().expect("path")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("conflict") && err.contains("intruder") && err.contains(".data.a"), "{err}");
    s.ok(&["apply", "--server-side", "--force-conflicts", "-f", f2.to_str().expect("path")]);
    assert_eq!(s.ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.a}"]), "3");
    // Dropping a field from the applied config removes it.
    let f3 = s.write_file(
        "ssa3.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: default\ndata:\n  a: \"3\"\n",
    );
    s.ok(&["apply", "--server-side", "-f", f3.to_str().expect("path")]);
    let obj = s.json(&["get", "cm", "ssa"]);
    assert!(obj["data"].get("b").is_none(), "{obj}");
}

#[test]
fn get_prints_upstream_tables_yaml_wide_all_namespaces_and_selectors() {
    let s = Server::start();
    let f = s.write_file("app.yaml", MANIFEST);
    s.ok(&["apply", "-f", f.to_str().expect("path")]);
    let out = s.ok(&["get", "deployments", "-n", "shop"]);
    let header: Vec<&str> = out.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert!(out.lines().nth(1).expect("row").starts_with("web "), "{out}");
    let wide = s.ok(&["get", "deploy", "-n", "shop", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]);
    assert!(wide.contains("127.0.0.1:5000/busybox:1.36") && wide.contains("app=web"), "{wide}");
    let svc = s.ok(&["get", "svc", "-n", "shop"]);
    let header: Vec<&str> = svc.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]);
    assert!(svc.contains("80/TCP"), "{svc}");
    let all = s.ok(&["get", "configmaps", "-A"]);
    assert!(all.lines().next().expect("header").starts_with("NAMESPACE"), "{all}");
    assert!(all.lines().any(|l| l.starts_with("shop ") && l.contains("web-config")), "{all}");
    let ns = s.ok(&["get", "namespaces"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease", "shop"] {
        assert!(ns.lines().any(|l| l.starts_with(n) && l.contains("Active")), "{n} missing:\n{ns}");
    }
    let yaml = s.ok(&["get", "cm", "web-config", "-n", "shop", "-o", "yaml"]);
    assert!(yaml.contains("greeting: hello") && yaml.contains("resourceVersion:") && yaml.contains("uid:"), "{yaml}");
    s.ok(&["create", "configmap", "other", "-n", "shop", "--from-literal=x=y"]);
    let labelled = s.ok(&["get", "cm", "-n", "shop", "-l", "app=web", "-o", "name"]);
    assert_eq!(labelled.trim(), "configmap/web-config");
    let not_labelled = s.ok(&["get", "cm", "-n", "shop", "-l", "app!=web", "-o", "name"]);
    assert!(not_labelled.contains("configmap/other") && !not_labelled.contains("web-config"), "{not_labelled}");
    // Paging: kubectl asks with limit=500; a small chunk size exercises continue tokens.
    for i in 0..7 {
        s.ok(&["create", "configmap", &format!("page-{i}"), "-n", "shop"]);
    }
    let paged = s.ok(&["get", "cm", "-n", "shop", "--chunk-size=2", "-o", "name"]);
    assert_eq!(paged.lines().filter(|l| l.starts_with("configmap/page-")).count(), 7, "{paged}");
}

#[test]
fn metadata_only_replies_for_get_list_watch_as_client_go_and_kube_rs_ask() {
    let s = Server::start();
    s.ok(&["create", "configmap", "meta", "--from-literal=secret=payload"]);
    s.ok(&["label", "configmap", "meta", "app=web"]);
    let accept = |a: &str| vec![format!("Accept: {a}")];
    let as_metadata = accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    let as_metadata_list = accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
    let cms = "/api/v1/namespaces/default/configmaps";
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).expect(t);

    // GET `path` as `headers` ask: 200 with a `kind` of meta.k8s.io/v1; the reply and its text.
    let get_as = |path: &str, headers: &[String], kind: &str| {
        let (code, text) = s.curl_text("GET", path, headers, None);
        let v = parse(&text);
        assert_eq!(code, 200, "{text}");
        assert_eq!((v["kind"].as_str(), v["apiVersion"].as_str()), (Some(kind), Some("meta.k8s.io/v1")), "{text}");
        (v, text)
    };
    let (one, text) = get_as(&format!("{cms}/meta"), &as_metadata, "PartialObjectMetadata");
    assert_eq!(one["metadata"]["labels"]["app"], "web");
    assert!(one["metadata"]["resourceVersion"].as_str().is_some_and(|rv| !rv.is_empty()), "{one}");
    assert!(one.get("data").is_none() && !text.contains("payload"), "{text}");

    let (list, text) =
        get_as(&format!("{cms}?labelSelector=app%3Dweb"), &as_metadata_list, "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some(), "{list}");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(
        (items[0]["kind"].as_str(), items[0]["metadata"]["name"].as_str()),
        (Some("PartialObjectMetadata"), Some("meta"))
    );
    assert!(!text.contains("payload"), "{text}");

    // Upstream: a list is not a PartialObjectMetadata, an object is not a list, and a conversion
    // that does not exist is not acceptable. Each is a 406 Status.
    for (path, headers) in [
        (cms.to_string(), as_metadata.clone()),
        (format!("{cms}/meta"), as_metadata_list.clone()),
        (format!("{cms}/meta"), accept("application/json;as=Nope;g=meta.k8s.io;v=v1")),
    ] {
        let (code, text) = s.curl_text("GET", &path, &headers, None);
        let status = parse(&text);
        assert_eq!(
            (code, status["kind"].as_str(), status["reason"].as_str()),
            (406, Some("Status"), Some("NotAcceptable")),
            "{path} {headers:?}: {text}"
        );
    }

    // A metadata watch: every event's object is a PartialObjectMetadata, bookmarks too.
    let (code, text) = s.curl_text(
        "GET",
        &format!("{cms}?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2"),
        &as_metadata,
        None,
    );
    assert_eq!(code, 200, "{text}");
    let events: Vec<serde_json::Value> = text.lines().map(parse).collect();
    assert!(events.iter().any(|e| e["type"] == "ADDED" && e["object"]["metadata"]["name"] == "meta"), "{text}");
    assert!(events.iter().any(|e| e["type"] == "BOOKMARK"), "{text}");
    for e in &events {
        assert_eq!(e["object"]["kind"], "PartialObjectMetadata", "{e}");
        assert_eq!(e["object"]["apiVersion"], "meta.k8s.io/v1", "{e}");
    }
    assert!(!text.contains("payload"), "{text}");

    // Live events of a metadata watch (framed from the stored bytes).
    let rv = one["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let (code, text) = std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            s.curl_text("GET", &format!("{cms}?watch=true&resourceVersion={rv}&timeoutSeconds=3"), &as_metadata, None)
        });
        std::thread::sleep(std::time::Duration::from_millis(700));
        s.ok(&["label", "configmap", "meta", "tier=front"]);
        s.ok(&["delete", "configmap", "meta"]);
        watch.join().expect("watch")
    });
    assert_eq!(code, 200, "{text}");
    let events: Vec<serde_json::Value> = text.lines().map(parse).collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["MODIFIED", "DELETED"], "{text}");
    assert_eq!(events[0]["object"]["metadata"]["labels"]["tier"], "front", "{text}");
    for e in &events {
        assert_eq!(e["object"]["kind"], "PartialObjectMetadata", "{e}");
        assert!(e["object"]["metadata"]["resourceVersion"].as_str().is_some_and(|v| v != rv), "{e}");
    }
    assert!(!text.contains("payload"), "{text}");
}

/// Starts `kubectl <args> --watch --output-watch-events`; its output lines arrive on the receiver.
fn spawn_watch(s: &Server, args: &[&str]) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut cmd_args = args.to_vec();
    cmd_args.extend(["--watch", "--output-watch-events"]);
    let mut child =
        s.kubectl_cmd(&cmd_args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("kubectl get -w");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Runs `kubectl get <args> --watch --output-watch-events`, does `act` once the watch is up,
/// and returns the event types seen for object `name` (stops after `want` of them or 20 s).
fn watch_events(s: &Server, args: &[&str], name: &str, want: usize, act: impl FnOnce()) -> Vec<String> {
    let (mut child, rx) = spawn_watch(s, args);
    std::thread::sleep(Duration::from_millis(700));
    act();
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen.len() < want && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            if l.split_whitespace().nth(1) == Some(name) {
                seen.push(l.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn get_watch_sees_added_modified_deleted() {
    let s = Server::start();
    let seen = watch_events(&s, &["get", "configmaps", "-n", "default"], "watched", 3, || {
        s.ok(&["create", "configmap", "watched", "--from-literal=a=1"]);
        s.ok(&["patch", "configmap", "watched", "-p", r#"{"data":{"a":"2"}}"#]);
        s.ok(&["delete", "configmap", "watched"]);
    });
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
}

#[test]
fn watch_sees_every_one_of_concurrent_creates_once() {
    let s = Server::start();
    let names: Vec<String> = (0..24).map(|i| format!("burst-{i:02}")).collect();
    let (mut child, rx) = spawn_watch(&s, &["get", "configmaps", "-l", "burst=yes", "--no-headers"]);
    std::thread::sleep(Duration::from_millis(700));
    // Creates at the same time share commits, so their events reach the watch together.
    std::thread::scope(|scope| {
        for chunk in names.chunks(4) {
            let s = &s;
            scope.spawn(move || {
                for n in chunk {
                    s.ok(&["create", "configmap", n]);
                    s.ok(&["label", "configmap", n, "burst=yes"]);
                }
            });
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen.len() < names.len() && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            let mut f = l.split_whitespace();
            if let (Some("ADDED"), Some(n)) = (f.next(), f.next()) {
                seen.push(n.to_string());
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    while let Ok(l) = rx.try_recv() {
        seen.push(l);
    }
    let _ = child.kill();
    let _ = child.wait();
    seen.sort();
    assert_eq!(seen, names, "each labelled ConfigMap once, as ADDED, and nothing else");
}

#[test]
fn watch_with_selectors_sees_objects_enter_and_leave_them() {
    let s = Server::start();
    // Label selector: relabelling out of it is DELETED, back into it ADDED; changes outside it
    // are not sent.
    let seen = watch_events(&s, &["get", "configmaps", "-l", "tier=web"], "sel", 5, || {
        s.ok(&["create", "configmap", "other", "--from-literal=a=1"]);
        s.ok(&["create", "configmap", "sel", "--from-literal=a=1"]);
        s.ok(&["label", "configmap", "sel", "tier=web"]);
        s.ok(&["patch", "configmap", "sel", "-p", r#"{"data":{"a":"2"}}"#]);
        s.ok(&["label", "configmap", "sel", "tier=db", "--overwrite"]);
        s.ok(&["patch", "configmap", "sel", "-p", r#"{"data":{"a":"3"}}"#]);
        s.ok(&["label", "configmap", "sel", "tier=web", "--overwrite"]);
        s.ok(&["delete", "configmap", "sel"]);
    });
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"]);
    // Field selector on a field outside metadata (a Secret's type).
    let seen = watch_events(&s, &["get", "secrets", "--field-selector", "type=Opaque"], "plain", 2, || {
        s.ok(&[
            "create",
            "secret",
            "docker-registry",
            "plain",
            "--docker-server=r",
            "--docker-username=u",
            "--docker-password=p",
        ]);
        s.ok(&["delete", "secret", "plain"]);
        s.ok(&["create", "secret", "generic", "plain", "--from-literal=a=1"]);
        s.ok(&["delete", "secret", "plain"]);
    });
    assert_eq!(seen, ["ADDED", "DELETED"]);
    // Field selector on the name: only that object's events.
    let seen = watch_events(&s, &["get", "configmaps", "--field-selector", "metadata.name=named"], "named", 3, || {
        s.ok(&["create", "configmap", "unnamed", "--from-literal=a=1"]);
        s.ok(&["create", "configmap", "named", "--from-literal=a=1"]);
        s.ok(&["patch", "configmap", "unnamed", "-p", r#"{"data":{"a":"2"}}"#]);
        s.ok(&["patch", "configmap", "named", "-p", r#"{"data":{"a":"2"}}"#]);
        s.ok(&["delete", "configmap", "unnamed", "named"]);
    });
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
}

#[test]
fn patch_of_every_type_and_edit() {
    let s = Server::start();
    let f = s.write_file("app.yaml", MANIFEST);
    s.ok(&["apply", "-f", f.to_str().expect("path")]);
    s.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "shop",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"busybox:2"}]}}}}"#,
    ]);
    let d = s.json(&["get", "deploy", "web", "-n", "shop"]);
    let containers = d["spec"]["template"]["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "strategic merge must merge containers by name");
    assert_eq!(containers[0]["image"], "busybox:2");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    s.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"front"}}}"#,
    ]);
    assert_eq!(s.ok(&["get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.metadata.labels.tier}"]), "front");
    s.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":5}]"#,
    ]);
    assert_eq!(s.ok(&["get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.spec.replicas}"]), "5");
    // `kubectl edit` with a scripted editor sends a strategic merge patch.
    let out = s
        .kubectl_cmd(&["edit", "configmap", "web-config", "-n", "shop"])
        .env("EDITOR", "sed -i s/greeting:\\ hello/greeting:\\ bye/")
        .output()
        .expect("kubectl edit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(s.ok(&["get", "cm", "web-config", "-n", "shop", "-o", "jsonpath={.data.greeting}"]), "bye");
    // A stale resourceVersion in a patch is a conflict.
    let out = s.kubectl(&[
        "patch",
        "cm",
        "web-config",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"resourceVersion":"1"},"data":{"x":"y"}}"#,
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Conflict"), "{}", String::from_utf8_lossy(&out.stderr));
    // Scale goes through the scale subresource.
    s.ok(&["scale", "deploy", "web", "-n", "shop", "--replicas=1"]);
    assert_eq!(s.ok(&["get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.spec.replicas}"]), "1");
}

#[test]
fn diff_shows_changes_and_nothing_for_unchanged() {
    let s = Server::start();
    let f = s.write_file("app.yaml", MANIFEST);
    s.ok(&["apply", "-f", f.to_str().expect("path")]);
    let same = s.kubectl(&["diff", "-f", f.to_str().expect("path")]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&same.stdout),
        String::from_utf8_lossy(&same.stderr)
    );
    let changed = s.write_file("changed.yaml", &MANIFEST.replace("greeting: hello", "greeting: howdy"));
    let diff = s.kubectl(&["diff", "-f", changed.to_str().expect("path")]);
    assert_eq!(diff.status.code(), Some(1), "{}", String::from_utf8_lossy(&diff.stderr));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(text.contains("-  greeting: hello") && text.contains("+  greeting: howdy"), "{text}");
    // diff is a dry run: nothing changed.
    assert_eq!(s.ok(&["get", "cm", "web-config", "-n", "shop", "-o", "jsonpath={.data.greeting}"]), "hello");
}

#[test]
fn delete_with_wait_and_finalizers() {
    let s = Server::start();
    s.ok(&["create", "configmap", "gone", "--from-literal=a=1"]);
    let out = s.ok(&["delete", "configmap", "gone", "--wait=true", "--timeout=30s"]);
    assert!(out.contains("configmap \"gone\" deleted"), "{out}");
    let missing = s.kubectl(&["get", "configmap", "gone"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("NotFound"));
    // A finalizer holds deletion until removed; --wait returns once it is.
    s.ok_stdin(&["apply", "-f", "-"], "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: default\n  finalizers: [example.com/hold]\n");
    s.ok(&["delete", "configmap", "held", "--wait=false"]);
    let held = s.json(&["get", "configmap", "held"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    let mut waiter = s
        .kubectl_cmd(&["delete", "configmap", "held", "--wait=true", "--timeout=30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wait");
    std::thread::sleep(Duration::from_millis(500));
    s.ok(&["patch", "configmap", "held", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]);
    let status = eventually(Duration::from_secs(30), "delete --wait to return", || waiter.try_wait().ok().flatten());
    assert!(status.success());
    assert!(!s.kubectl(&["get", "configmap", "held"]).status.success());
}

#[test]
fn imperative_create_commands_send_protobuf_and_work() {
    let s = Server::start();
    s.ok(&["create", "namespace", "imperative"]);
    s.ok(&["create", "deployment", "web", "--image=busybox:1.36", "--replicas=2", "--port=80", "-n", "imperative"]);
    s.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        "--from-literal=level=3",
        "-n",
        "imperative",
    ]);
    s.ok(&["create", "secret", "generic", "creds", "--from-literal=user=admin", "-n", "imperative"]);
    s.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "imperative"]);
    let d = s.json(&["get", "deploy", "web", "-n", "imperative"]);
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 80);
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
    assert_eq!(s.ok(&["get", "cm", "settings", "-n", "imperative", "-o", "jsonpath={.data.mode}"]), "fast");
    assert_eq!(s.ok(&["get", "secret", "creds", "-n", "imperative", "-o", "jsonpath={.data.user}"]), "YWRtaW4=");
    let svc = s.json(&["get", "svc", "web", "-n", "imperative"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(s.ok(&["auth", "can-i", "create", "deployments"]).trim(), "yes");
    let whoami = s.ok(&["auth", "whoami"]);
    assert!(whoami.contains("system:admin") && whoami.contains("system:masters"), "{whoami}");
}

#[test]
fn explain_api_resources_and_version() {
    let s = Server::start();
    let explain = s.ok(&["explain", "deployment.spec.replicas"]);
    assert!(explain.contains("FIELD: replicas <integer>"), "{explain}");
    assert!(explain.contains("Number of desired pods"), "{explain}");
    let pod = s.ok(&["explain", "pods.spec.containers"]);
    assert!(pod.contains("image\t<string>") || pod.contains("image <string>") || pod.contains("image\t"), "{pod}");
    let res = s.ok(&["api-resources"]);
    let line = res.lines().find(|l| l.starts_with("deployments")).expect("deployments listed");
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols, ["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    assert!(res.lines().any(|l| l.starts_with("pods ") && l.contains("po")), "{res}");
    let v = s.ok(&["version", "-o", "json"]);
    let v: Value = serde_json::from_str(&v).expect("json");
    assert_eq!(v["serverVersion"]["major"], "1");
    assert_eq!(v["serverVersion"]["minor"], "35");
    let groups = s.ok(&["api-versions"]);
    for gv in ["apps/v1", "batch/v1", "autoscaling/v2", "rbac.authorization.k8s.io/v1", "v1"] {
        assert!(groups.lines().any(|l| l == gv), "{gv} missing");
    }
}

/// `/version` names the build (issue 37): the commit of the checkout it was built from and the
/// time it was built (or `SOURCE_DATE_EPOCH`), and `k1s --version` says the same.
#[test]
fn version_names_the_commit_and_the_build_date() {
    let s = Server::start();
    let v: Value = serde_json::from_str(&s.curl_text("GET", "/version", &[], None).1).expect("json");
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        // Built from this checkout (the build script reruns when HEAD moves).
        Some(head) => {
            assert_eq!(v["gitCommit"], head.as_str(), "{v}");
            assert!(matches!(v["gitTreeState"].as_str(), Some("clean" | "dirty")), "{v}");
        }
        None => assert_eq!(v["gitCommit"], "unknown", "{v}"),
    }
    let date = v["buildDate"].as_str().expect("buildDate");
    // RFC 3339 in UTC (`2006-01-02T15:04:05Z`, which sorts as it reads), between 2026 and now.
    let now = std::process::Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]).output().expect("date");
    let now = String::from_utf8_lossy(&now.stdout).trim().to_string();
    assert!(date.len() == 20 && date.ends_with('Z') && &date[10..11] == "T", "buildDate {date}");
    assert!(date > "2026-01-01T00:00:00Z" && date <= now.as_str(), "buildDate {date}, now {now}");
    let out = std::process::Command::new(common::k1s_bin()).arg("--version").output().expect("k1s --version");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(v["gitCommit"].as_str().unwrap_or("?")) && text.contains(date), "{text}");
}

/// kr8s asks for `GET /version/` before anything else; upstream serves every discovery and
/// non-resource path with a trailing slash as it serves it without one.
#[test]
fn discovery_and_non_resource_paths_are_served_with_a_trailing_slash() {
    let s = Server::start();
    for path in [
        "/version",
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v2",
        "/openapi/v3",
        "/healthz",
        "/livez",
        "/readyz",
        "/metrics",
        "/.well-known/openid-configuration",
        "/openid/v1/jwks",
    ] {
        let (plain, plain_body) = s.curl_text("GET", path, &[], None);
        assert_eq!(plain, 200, "GET {path}: {plain_body}");
        let slashed = format!("{path}/");
        let (code, body) = s.curl_text("GET", &slashed, &[], None);
        assert_eq!(code, 200, "GET {slashed}: {body}");
        if !matches!(path, "/metrics") {
            assert_eq!(body, plain_body, "GET {slashed} answers what GET {path} answers");
        }
    }
    let v: Value = serde_json::from_str(&s.curl_text("GET", "/version/", &[], None).1).expect("json");
    assert_eq!(v["minor"], "35");
    assert_eq!(s.curl_anonymous("/version/"), 200, "/version/ is public, as upstream's system:public-info-viewer");
    let (code, _) = s.curl_text("GET", "/apis/nope.example.com/", &[], None);
    assert_eq!(code, 404);

    // Health checks by name answer their own verdict; a name the endpoint lacks is a 404.
    for (path, want) in [
        ("/readyz/ping", 200),
        ("/readyz/etcd", 200),
        ("/readyz/poststarthook/k1s-bootstrap", 200),
        ("/livez/etcd", 200),
        ("/healthz/ping", 200),
        ("/readyz/nope", 404),
        ("/livez/poststarthook/k1s-bootstrap", 404),
    ] {
        let (code, body) = s.curl_text("GET", path, &[], None);
        assert_eq!(code, want, "GET {path}: {body}");
        if want == 200 {
            assert_eq!(body, "ok", "GET {path}");
        }
    }
    let (code, body) = s.curl_text("GET", "/readyz?verbose", &[], None);
    assert_eq!(code, 200);
    assert_eq!(body, "[+]ping ok\n[+]etcd ok\n[+]poststarthook/k1s-bootstrap ok\nreadyz check passed\n");
}

/// The Deployment controller writes the revision annotation through /status, as upstream's does:
/// a fresh Deployment stays at generation 1 and its observedGeneration catches up. Built-in
/// writers send their upstream User-Agent, so managedFields name them.
#[test]
fn a_fresh_deployment_stays_at_generation_1_and_managed_fields_name_the_controller_manager() {
    let s = Server::start_controllers();
    s.ok(&["create", "deployment", "web", "--image=busybox", "--replicas=1"]);
    let d = eventually(Duration::from_secs(30), "the deployment's revision and observedGeneration", || {
        let d = s.json(&["get", "deploy", "web"]);
        let revised = d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1";
        (revised && d["status"]["observedGeneration"] == 1).then_some(d)
    });
    assert_eq!(d["metadata"]["generation"], 1, "{d}");
    let yaml = s.ok(&["get", "deploy", "web", "-o", "yaml", "--show-managed-fields"]);
    assert!(yaml.contains("manager: kube-controller-manager"), "{yaml}");
    assert!(yaml.contains("subresource: status"), "{yaml}");
    assert!(!yaml.contains("manager: unknown"), "{yaml}");
    let rs = s.ok(&["get", "replicasets", "-l", "app=web", "-o", "yaml", "--show-managed-fields"]);
    assert!(rs.contains("manager: kube-controller-manager"), "{rs}");
    // A user's annotation is a change of the Deployment, as upstream counts it.
    s.ok(&["annotate", "deploy", "web", "team=shop"]);
    assert_eq!(s.json(&["get", "deploy", "web"])["metadata"]["generation"], 2);
}

/// A patch that names no resourceVersion is applied again to the newer object when it loses a
/// race, as upstream's: concurrent patches of one object all succeed (a 409 here broke `kubectl
/// scale` against a Deployment whose controller was writing its status).
#[test]
fn concurrent_patches_without_a_resource_version_all_succeed() {
    let s = Server::start();
    s.ok(&["create", "configmap", "shared"]);
    let s = std::sync::Arc::new(s);
    let threads: Vec<_> = (0..12)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let body = s.write_file(&format!("patch-{i}.json"), &format!(r#"{{"data":{{"k{i}":"v"}}}}"#));
                s.curl_text(
                    "PATCH",
                    "/api/v1/namespaces/default/configmaps/shared",
                    &["Content-Type: application/merge-patch+json".to_string()],
                    Some(&body),
                )
            })
        })
        .collect();
    for t in threads {
        let (code, body) = t.join().expect("patch thread");
        assert_eq!(code, 200, "{body}");
    }
    let cm = s.json(&["get", "configmap", "shared"]);
    assert_eq!(cm["data"].as_object().map(|d| d.len()), Some(12), "{cm}");
    // One that names a stale resourceVersion is still refused.
    let stale = s.write_file("stale.json", r#"{"metadata":{"resourceVersion":"1"},"data":{"x":"y"}}"#);
    let (code, body) = s.curl_text(
        "PATCH",
        "/api/v1/namespaces/default/configmaps/shared",
        &["Content-Type: application/merge-patch+json".to_string()],
        Some(&stale),
    );
    assert_eq!(code, 409, "{body}");
}

/// systemd's journal and log files get plain text: colour only on a terminal.
#[test]
fn server_logs_redirected_to_a_file_carry_no_escape_codes() {
    let s = Server::start();
    s.ok(&["get", "namespaces"]);
    let logs = s.logs();
    assert!(logs.contains("INFO"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "escape codes in a redirected log:\n{logs}");
}

/// The Python client's `create_from_yaml` compares conflict bodies as strings: a 409 is
/// byte-for-byte what kube-apiserver writes, field order and trailing newline included.
#[test]
fn conflict_status_body_is_upstreams_bytes() {
    let s = Server::start();
    let cm = s.write_file("cm.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"}}"#);
    let (code, _) = s.curl("POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(&cm));
    assert_eq!(code, 201);
    let (code, body) = s.curl_text(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json".to_string()],
        Some(&cm),
    );
    assert_eq!(code, 409);
    assert_eq!(
        body,
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"configmaps \"dup\" already exists","reason":"AlreadyExists","#,
            r#""details":{"name":"dup","kind":"configmaps"},"code":409}"#,
            "\n"
        )
    );
}

#[test]
fn invalid_objects_get_422_with_field_causes_and_nothing_is_written() {
    let s = Server::start();
    let bad = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\n  namespace: default\nspec:\n  replicas: -1\n  selector:\n    matchLabels: {app: x}\n  template:\n    metadata:\n      labels: {app: other}\n    spec:\n      containers:\n      - name: c\n        image: busybox\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is invalid") && err.contains("spec.replicas") && err.contains("spec.template.metadata.labels"),
        "{err}"
    );
    assert!(!s.kubectl(&["get", "deploy", "bad"]).status.success());
    // Unknown fields are refused under kubectl's default strict validation.
    let unknown = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u\n  namespace: default\nspec:\n  foo: 1\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], unknown);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field"), "{}", String::from_utf8_lossy(&out.stderr));
    // Objects in a namespace that does not exist are refused.
    let out = s.kubectl(&["create", "configmap", "x", "-n", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespaces \"nope\" not found"));
    assert_eq!(
        s.ok(&["get", "cm", "-A", "-o", "name"]).lines().filter(|l| *l == "configmap/u" || *l == "configmap/x").count(),
        0
    );
}

const HPA_V2: &str = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: mem
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: memory, target: {type: AverageValue, averageValue: 100Mi}}
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"#;

#[test]
fn hpas_are_stored_in_v2_and_read_written_and_watched_through_v1_too() {
    let s = Server::start();
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    s.ok(&["create", "deployment", "web", "--image=127.0.0.1:5000/busybox:1.36"]);
    // kubectl 1.32 creates autoscaling/v1 objects; they read as v2 (kubectl's preferred version).
    s.ok(&["autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=5"]);
    let web = s.json(&["get", "hpa", "web"]);
    assert_eq!(web["apiVersion"], "autoscaling/v2", "{web}");
    assert_eq!(
        web["spec"]["metrics"],
        serde_json::json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    let (code, web_v1) = s.curl("GET", &format!("{v1}/web"), None, None);
    assert_eq!(code, 200, "{web_v1}");
    assert_eq!(web_v1["apiVersion"], "autoscaling/v1");
    assert_eq!(web_v1["spec"]["targetCPUUtilizationPercentage"], 50, "{web_v1}");
    assert_eq!(web_v1["metadata"]["resourceVersion"], web["metadata"]["resourceVersion"]);

    // A v2 object with what v1 cannot say: v1 shows its CPU target and carries the rest in
    // upstream's round-trip annotations, and a write through v1 keeps all of it.
    let before: u64 = web["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).expect("rv");
    let f = s.write_file("hpa.yaml", HPA_V2);
    s.ok(&["apply", "-f", f.to_str().expect("path")]);
    let (_, mem_v1) = s.curl("GET", &format!("{v1}/mem"), None, None);
    assert_eq!(mem_v1["spec"]["targetCPUUtilizationPercentage"], 60, "{mem_v1}");
    let metrics = mem_v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"].as_str().unwrap_or("");
    assert!(metrics.contains("memory") && metrics.contains("100Mi"), "{mem_v1}");
    let patch = s.write_file("patch.json", r#"{"spec": {"maxReplicas": 7}}"#);
    let (code, patched) = s.curl("PATCH", &format!("{v1}/mem"), Some("application/merge-patch+json"), Some(&patch));
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["apiVersion"], "autoscaling/v1", "{patched}");
    let mem = s.json(&["get", "hpa", "mem"]);
    assert_eq!(mem["spec"]["maxReplicas"], 7, "{mem}");
    assert_eq!(mem["spec"]["metrics"].as_array().map(Vec::len), Some(2), "{mem}");
    assert_eq!(mem["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 0, "{mem}");
    assert_eq!(mem["spec"]["behavior"]["scaleUp"]["policies"].as_array().map(Vec::len), Some(2), "defaulted: {mem}");
    let annotations = mem["metadata"]["annotations"].as_object().map(|a| a.keys().cloned().collect::<Vec<_>>());
    assert_eq!(
        annotations,
        Some(vec!["kubectl.kubernetes.io/last-applied-configuration".to_string()]),
        "no round-trip annotations in v2: {mem}"
    );

    // Watches through v1 see v1 objects.
    let (code, events) =
        s.curl_text("GET", &format!("{v1}?watch=true&timeoutSeconds=1&resourceVersion={before}"), &[], None);
    assert_eq!(code, 200);
    let events: Vec<Value> = events.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let names: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap_or(""), e["object"]["metadata"]["name"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(names, [("ADDED", "mem"), ("MODIFIED", "mem")], "{events:?}");
    assert!(events.iter().all(|e| e["object"]["apiVersion"] == "autoscaling/v1"), "{events:?}");
    assert_eq!(events[1]["object"]["spec"]["maxReplicas"], 7);

    // Upstream's columns.
    let table = s.ok(&["get", "hpa"]);
    let header: Vec<&str> = table.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]);
    // (The write through v1 put the CPU target first, as upstream's conversion does.)
    assert!(table.contains("cpu: <unknown>/60%, memory: <unknown>/100Mi"), "{table}");
    assert!(table.contains("cpu: <unknown>/50%"), "{table}");
    // v1 validation: a target below 1% is refused with its field.
    let bad = s.write_file("bad.json", r#"{"spec": {"targetCPUUtilizationPercentage": 0}}"#);
    let (code, status) = s.curl("PATCH", &format!("{v1}/web"), Some("application/merge-patch+json"), Some(&bad));
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.targetCPUUtilizationPercentage", "{status}");
}

/// `pods/ephemeralcontainers` as upstream serves it: the only way to add ephemeral containers,
/// which may then never change or go; everything else in a write through it is dropped.
#[test]
fn ephemeral_containers_are_added_only_through_their_subresource() {
    let s = Server::start();
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web}}\nspec:\n  containers:\n  - {name: app, image: busybox:1.36}\n",
    );
    let path = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";
    let smp = Some("application/strategic-merge-patch+json");
    // Through the subresource: the ephemeral container is added, the other changes are dropped.
    let add = s.write_file(
        "add.json",
        r#"{"metadata": {"labels": {"app": "changed"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:9"}],
                     "ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36", "targetContainerName": "app",
                                              "stdin": true, "tty": true, "terminationMessagePolicy": "File"}]}}"#,
    );
    let (code, pod) = s.curl("PATCH", path, smp, Some(&add));
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["spec"]["ephemeralContainers"][0]["name"], "debugger");
    assert_eq!(pod["spec"]["ephemeralContainers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(pod["metadata"]["labels"]["app"], "web");
    // GET on the subresource answers with the pod.
    let (code, got) = s.curl("GET", path, None, None);
    assert_eq!((code, got["kind"].as_str()), (200, Some("Pod")));

    // Through the pod itself they cannot be added.
    let out = s.kubectl(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"other","image":"busybox:1.36","terminationMessagePolicy":"File"}]}}"#,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("spec: Forbidden: pod updates may not change fields other than"), "{err}");

    // Existing ones may not be removed or changed; new ones get upstream's field rules.
    let remove = s.write_file("remove.json", r#"[{"op": "remove", "path": "/spec/ephemeralContainers/0"}]"#);
    let (code, status) = s.curl("PATCH", path, Some("application/json-patch+json"), Some(&remove));
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("existing ephemeral containers \"debugger\" may not be removed")),
        "{status}"
    );
    let change = s.write_file(
        "change.json",
        r#"[{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "busybox:2"}]"#,
    );
    let (code, status) = s.curl("PATCH", path, Some("application/json-patch+json"), Some(&change));
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().is_some_and(|m| m.contains("may not be changed")), "{status}");
    let ports = s.write_file(
        "ports.json",
        r#"{"spec": {"ephemeralContainers": [{"name": "web2", "image": "busybox:1.36", "targetContainerName": "nope",
                                             "ports": [{"containerPort": 80}], "terminationMessagePolicy": "File"}]}}"#,
    );
    let (code, status) = s.curl("PATCH", path, smp, Some(&ports));
    assert_eq!(code, 422, "{status}");
    let causes: Vec<String> = status["details"]["causes"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.starts_with("spec.ephemeralContainers[")
            && c.ends_with("].ports: Forbidden: cannot be set for an Ephemeral Container")),
        "{causes:?}"
    );
    assert!(causes.iter().any(|c| c.ends_with("].targetContainerName: Not found: \"nope\"")), "{causes:?}");
}
