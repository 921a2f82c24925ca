//! Several servers, one cluster: the first server on an etcd keeps the cluster's key material
//! there, sealed with the join token; a second server joins with the same `--datastore-endpoint`
//! and `--token`, or with `--server https://FIRST --token` alone. Either way it serves the same
//! objects under the same CA and accepts the same ServiceAccount tokens; a wrong or missing
//! token is refused before anything is served.

mod common;

use common::{server_refuses, Etcd, Server};

fn ca_of(s: &Server) -> String {
    std::fs::read_to_string(s.data_dir().join("server/tls/server-ca.crt")).expect("CA")
}

#[test]
fn servers_on_one_etcd_share_the_cluster_with_the_token() {
    let etcd = Etcd::start();
    let datastore = format!("--datastore-endpoint={}", etcd.url);
    let first = Server::start_shared(&[&datastore]);
    let token = common::join_token(&first);
    assert!(token.starts_with("K10") && token.contains("::server:"), "{token}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(first.data_dir().join("server/token")).expect("token file").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // Without the token, or with another cluster's, a second server refuses to start.
    let log = server_refuses(&[&datastore]);
    assert!(log.contains("the datastore already holds a cluster: pass its token with --token"), "{log}");
    let log = server_refuses(&[&datastore, "--token=not-the-secret"]);
    assert!(log.contains("it is another cluster's token"), "{log}");
    let (hash, secret) = token.split_once("::server:").expect("token");
    let other_ca = format!("K10{}::server:{secret}", "0".repeat(64));
    let log = server_refuses(&[&datastore, &format!("--token={other_ca}")]);
    assert!(log.contains("does not match the cluster CA's"), "{log}");
    assert_eq!(hash.len(), 67, "K10 and 64 hex digits: {hash}");

    // With it, the second server has the same CA and serves the same objects.
    let second = Server::start_shared(&[&datastore, &format!("--token={token}")]);
    assert_eq!(ca_of(&second), ca_of(&first));
    assert_eq!(common::join_token(&second), token);
    first.ok(&["create", "namespace", "shared"]);
    first.ok(&["create", "configmap", "made-on-first", "-n", "shared", "--from-literal=k=v"]);
    common::eventually(std::time::Duration::from_secs(10), "the ConfigMap through the second server", || {
        let out = second.kubectl(&["get", "configmap", "made-on-first", "-n", "shared", "-o", "jsonpath={.data.k}"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout) == "v").then_some(())
    });
    // Each server's kubeconfig works against the other (one CA), and a ServiceAccount token
    // issued by one is accepted by the other (one signing key).
    let mut cross = second.kubectl_cmd(&["get", "configmap", "made-on-first", "-n", "shared"]);
    cross.env("KUBECONFIG", first.kubeconfig()).arg(format!("--server=https://127.0.0.1:{}", second.port));
    let out = cross.output().expect("kubectl");
    assert!(out.status.success(), "first's admin at second: {}", String::from_utf8_lossy(&out.stderr));
    first.ok(&["create", "serviceaccount", "reader", "-n", "shared"]);
    first.ok(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "shared",
        "--clusterrole=view",
        "--serviceaccount=shared:reader",
    ]);
    let sa_token = first.ok(&["create", "token", "reader", "-n", "shared"]).trim().to_string();
    let out = std::process::Command::new(common::kubectl_bin())
        .arg(format!("--server=https://127.0.0.1:{}", second.port))
        .arg(format!("--certificate-authority={}", second.data_dir().join("server/tls/server-ca.crt").display()))
        .args(["--kubeconfig=/dev/null", "--token", &sa_token, "auth", "whoami"])
        .args(["-o", "jsonpath={.status.userInfo.username}"])
        .output()
        .expect("kubectl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "system:serviceaccount:shared:reader", "{out:?}");

    // The first server, started without --token, restarts on the token it keeps.
    let mut first = first;
    first.restart();
    assert_eq!(common::join_token(&first), token);
    assert_eq!(ca_of(&first), ca_of(&second));
    drop(etcd);
}

#[test]
fn a_server_joins_through_another_server_with_the_token_alone() {
    let etcd = Etcd::start();
    let first = Server::start_shared(&[&format!("--datastore-endpoint={}", etcd.url)]);
    let token = common::join_token(&first);
    let url = format!("--server=https://127.0.0.1:{}", first.port);

    // The CA is public; the bootstrap data is not.
    let (code, ca) = first.curl_text("GET", "/cacerts", &[], None);
    assert_eq!((code, ca.as_str()), (200, ca_of(&first).as_str()));
    assert_eq!(first.curl_anonymous("/v1-k1s/server-bootstrap"), 401);
    let (_, secret) = token.split_once("::server:").expect("token");
    let log = server_refuses(&[&url, &format!("--token={secret}x")]);
    assert!(log.contains("401"), "{log}");
    let log = server_refuses(&[&url]);
    assert!(log.contains("--server needs --token"), "{log}");

    // The token alone: the key material and the datastore come from the first server.
    let second = Server::start_shared(&[&url, &format!("--token={token}")]);
    assert_eq!(ca_of(&second), ca_of(&first));
    second.ok(&["create", "configmap", "made-on-second"]);
    let v = first.json(&["get", "configmap", "made-on-second", "-o", "json"]);
    assert_eq!(v["metadata"]["name"], "made-on-second");
    assert!(second.logs().contains("fetched the cluster's key material"), "{}", common::tail(&second.logs(), 20));

    // Joined once, the second server restarts while the first (which it joined through) is down.
    let mut first = first;
    let mut second = second;
    first.stop();
    second.restart();
    second.ok(&["get", "configmap", "made-on-second"]);
    assert!(second.logs().contains("could not reach the server this one joined through"));

    // A server on its embedded store has nothing to share: joining it is refused.
    let alone = Server::start_shared(&[]);
    let alone_token = common::join_token(&alone);
    let log =
        server_refuses(&[&format!("--server=https://127.0.0.1:{}", alone.port), &format!("--token={alone_token}")]);
    assert!(log.contains("keeps its state in its embedded store"), "{log}");
    // ... and even a token holder gets no keys from it: only the public CA.
    let secret = alone_token.rsplit_once("::server:").map(|(_, s)| s.to_string()).expect("a full token");
    let out = std::process::Command::new("curl")
        .args(["-sk", "-u", &format!("server:{secret}")])
        .arg(format!("https://127.0.0.1:{}/v1-k1s/server-bootstrap", alone.port))
        .output()
        .expect("curl");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
    let files: Vec<&String> = answer["files"].as_object().expect("files").keys().collect();
    assert_eq!(files, ["server-ca.crt"], "{answer}");
    assert!(answer["datastore"].is_null(), "{answer}");
    drop(etcd);
}
