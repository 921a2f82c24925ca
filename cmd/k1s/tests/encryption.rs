//! Encryption at rest (issue 32): `--secrets-encryption` with `k1s secrets-encrypt`, and a
//! user's `--encryption-provider-config`, on RocksDB and (K1S_TEST_DATASTORE=etcd) on etcd.

mod common;

use base64::Engine as _;
use common::Server;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `k1s secrets-encrypt ARGS` against the server's data dir; stdout, or the failure's stderr.
fn secrets_encrypt(s: &Server, args: &[&str]) -> Result<String, String> {
    let out = Command::new(common::k1s_bin())
        .arg("secrets-encrypt")
        .args(args)
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .output()
        .expect("run k1s secrets-encrypt");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn ok(s: &Server, args: &[&str]) -> String {
    secrets_encrypt(s, args).unwrap_or_else(|e| panic!("k1s secrets-encrypt {args:?}: {e}\n{}", s.logs()))
}

/// What the store holds under each of `keys`, read without the server's keys. Stops the server
/// (RocksDB is opened by one process at a time; it also flushes what the server wrote).
fn stored(s: &mut Server, keys: &[&str]) -> Vec<Option<Vec<u8>>> {
    s.stop();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let opts = k1s_store::StoreOptions::default();
        let store = match s.etcd_url() {
            Some(url) => {
                let config = k1s_store::EtcdConfig { endpoints: vec![url], ..Default::default() };
                k1s_store::Store::connect_etcd(&config, opts).await
            }
            None => k1s_store::Store::open(&s.data_dir().join("server").join("db"), opts),
        }
        .expect("the store, without the server's keys");
        keys.iter().map(|k| store.get(k).expect("read").map(|kv| kv.value.to_vec())).collect()
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if meta.is_file() && std::fs::read(&path).is_ok_and(|b| contains(&b, needle)) {
            found.push(path);
        }
    }
    found
}

/// The places a value could leak to: the data dir, and the etcd's when the server runs on one.
fn leaks(s: &Server, needles: &[&[u8]]) -> Vec<PathBuf> {
    let mut dirs = vec![s.data_dir()];
    dirs.extend(s.etcd_data_dir());
    let mut out = Vec::new();
    for d in &dirs {
        for n in needles {
            out.extend(files_containing(d, n));
        }
    }
    out
}

fn secret_value(s: &Server, name: &str) -> String {
    let b64 = s.ok(&["get", "secret", name, "-o", "jsonpath={.data.password}"]);
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64.trim()).expect("base64")).expect("utf-8")
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn with_secrets_encryption_no_secret_reaches_the_disk_and_rotation_keeps_every_secret_readable() {
    let mut s = Server::start_with(&["--secrets-encryption"]);
    let cred = s.data_dir().join("server").join("cred");
    assert_eq!(mode(&cred.join("encryption-config.json")), 0o600);
    assert_eq!(mode(&cred.join("encryption-state.json")), 0o600);
    let status = ok(&s, &["status"]);
    assert!(status.contains("Encryption Status: Enabled\nCurrent Rotation Stage: start\n"), "{status}");
    assert!(status.contains(" *      AES-CBC   aescbckey\n"), "{status}");

    // Values with no repeated substrings, so that compression (RocksDB's tables are LZ4) cannot
    // hide one from the search below.
    let value = "Zx81QwLr5Tb0Kp7Y";
    let b64 = base64::engine::general_purpose::STANDARD.encode(value);
    s.ok(&["create", "secret", "generic", "one", &format!("--from-literal=password={value}")]);
    s.ok(&["create", "configmap", "plain", "--from-literal=note=Hn3Vq9Ws2Jc6Rm1D"]);
    assert_eq!(secret_value(&s, "one"), value);

    // Rotation, k3s's way: a new key, made first, every Secret rewritten, the old key gone.
    assert!(ok(&s, &["prepare"]).contains("prepare completed successfully"));
    assert!(secrets_encrypt(&s, &["prepare"]).expect_err("twice").contains("incorrect stage: prepare"));
    s.ok(&["create", "secret", "generic", "two", &format!("--from-literal=password={value}-2")]);
    assert!(ok(&s, &["rotate"]).contains("rotate completed successfully"));
    s.ok(&["create", "secret", "generic", "three", &format!("--from-literal=password={value}-3")]);
    let done = ok(&s, &["reencrypt"]);
    assert!(done.contains("reencryption finished: 3 values rewritten; removed key aescbckey"), "{done}");
    let status = ok(&s, &["status"]);
    assert!(status.contains("Current Rotation Stage: reencrypt_finished"), "{status}");
    assert!(status.contains(" *      AES-CBC   aescbckey-") && !status.contains("aescbckey\n"), "{status}");
    for (name, want) in [("one", value.to_string()), ("two", format!("{value}-2")), ("three", format!("{value}-3"))] {
        assert_eq!(secret_value(&s, name), want);
    }
    // A snapshot copies the store: encrypted values only.
    let snap = Command::new(common::k1s_bin())
        .args(["snapshot", "save"])
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .output()
        .expect("snapshot");
    assert!(snap.status.success(), "{}", String::from_utf8_lossy(&snap.stderr));

    let raw = stored(&mut s, &["/registry/secrets/default/one", "/registry/configmaps/default/plain"]);
    let secret = raw[0].as_deref().expect("stored");
    assert!(secret.starts_with(b"k8s:enc:aescbc:v1:aescbckey-"), "{}", String::from_utf8_lossy(secret));
    assert!(contains(raw[1].as_deref().expect("stored"), b"Hn3Vq9Ws2Jc6Rm1D"), "ConfigMaps are not listed");
    let found = leaks(&s, &[value.as_bytes(), b64.as_bytes()]);
    assert!(found.is_empty(), "the Secret's value is on disk in {found:?}");
    assert!(!leaks(&s, &[b"Hn3Vq9Ws2Jc6Rm1D"]).is_empty(), "the search finds what is stored in plain text");

    // The key survives a restart, and `rotate-keys` does the three steps at once.
    s.restart();
    assert_eq!(secret_value(&s, "two"), format!("{value}-2"));
    let done = ok(&s, &["rotate-keys"]);
    assert!(done.contains("keys rotated to aescbckey-") && done.contains("3 values rewritten"), "{done}");
    assert_eq!(secret_value(&s, "three"), format!("{value}-3"));
}

#[test]
fn turning_encryption_on_over_plain_secrets_keeps_them_readable_and_reencrypt_converts_them() {
    let mut s = Server::start();
    assert_eq!(ok(&s, &["status"]), "Encryption Status: Disabled, no configuration file found\n");
    let err = secrets_encrypt(&s, &["prepare"]).expect_err("off");
    assert!(err.contains("start it with --secrets-encryption"), "{err}");
    s.ok(&["create", "secret", "generic", "old", "--from-literal=password=written-plain-5e2a"]);
    // The config file's key, as a user turns it on.
    std::fs::write(s.dir.path().join("config.yaml"), "secrets-encryption: true\n").expect("config");
    s.restart();
    assert_eq!(secret_value(&s, "old"), "written-plain-5e2a", "written before: still readable");
    s.ok(&["create", "secret", "generic", "new", "--from-literal=password=written-sealed-8b0d"]);
    let raw = stored(&mut s, &["/registry/secrets/default/old", "/registry/secrets/default/new"]);
    assert!(raw[0].as_deref().is_some_and(|v| v.starts_with(b"{")), "not rewritten yet");
    assert!(raw[1].as_deref().is_some_and(|v| v.starts_with(b"k8s:enc:aescbc:v1:aescbckey:")));

    s.restart();
    let done = ok(&s, &["reencrypt"]);
    assert!(done.contains("reencryption finished: 2 values rewritten"), "{done}");
    let raw = stored(&mut s, &["/registry/secrets/default/old"]);
    assert!(raw[0].as_deref().is_some_and(|v| v.starts_with(b"k8s:enc:aescbc:v1:aescbckey:")));

    // disable: new and old Secrets in plain text; enable: encrypted again.
    s.restart();
    assert!(ok(&s, &["disable"]).contains("secrets-encryption disabled; 2 secrets rewritten in plain text"));
    assert!(ok(&s, &["status"]).starts_with("Encryption Status: Disabled\n"));
    assert_eq!(secret_value(&s, "new"), "written-sealed-8b0d");
    let raw = stored(&mut s, &["/registry/secrets/default/new"]);
    assert!(raw[0].as_deref().is_some_and(|v| v.starts_with(b"{")));
    s.restart();
    assert!(ok(&s, &["disable"]).contains("already disabled"));
    assert!(ok(&s, &["enable"]).contains("secrets-encryption enabled; 2 secrets rewritten encrypted"));
    assert_eq!(secret_value(&s, "old"), "written-plain-5e2a");
    let raw = stored(&mut s, &["/registry/secrets/default/new"]);
    assert!(raw[0].as_deref().is_some_and(|v| v.starts_with(b"k8s:enc:aescbc:v1:")));
}

fn provider_config(resources: &str, secret: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [{resources}]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: {secret}\n      - identity: {{}}\n"
    )
}

#[test]
fn a_users_configuration_encrypts_what_it_lists_and_a_wrong_key_is_a_500_naming_it() {
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("encryption.yaml");
    std::fs::write(&file, provider_config("configmaps", &key)).expect("config");
    let mut s = Server::start_with(&[&format!("--encryption-provider-config={}", file.display())]);
    s.ok(&["create", "configmap", "listed", "--from-literal=note=listed-value-61d0"]);
    s.ok(&["create", "secret", "generic", "unlisted", "--from-literal=password=unlisted-value-0c9e"]);
    assert_eq!(s.ok(&["get", "configmap", "listed", "-o", "jsonpath={.data.note}"]), "listed-value-61d0");
    let err = secrets_encrypt(&s, &["prepare"]).expect_err("not k1s's file");
    assert!(err.contains("given with --encryption-provider-config: k1s does not change it"), "{err}");
    assert!(ok(&s, &["status"]).contains(" *      AES-GCM   key1\n"));
    let raw = stored(&mut s, &["/registry/configmaps/default/listed", "/registry/secrets/default/unlisted"]);
    assert!(raw[0].as_deref().is_some_and(|v| v.starts_with(b"k8s:enc:aesgcm:v1:key1:")));
    assert!(raw[1].as_deref().is_some_and(|v| v.starts_with(b"{")), "Secrets are not listed: plain");
    assert!(leaks(&s, &[b"listed-value-61d0"]).is_empty());

    // The same key name with other bytes: reads fail with a 500 that says which key, not garbage.
    let other = base64::engine::general_purpose::STANDARD.encode([8u8; 32]);
    std::fs::write(&file, provider_config("configmaps", &other)).expect("config");
    s.restart();
    let (code, body) = s.curl("GET", "/api/v1/namespaces/default/configmaps/listed", None, None);
    assert_eq!(code, 500, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Internal error occurred: unable to transform key \"/registry/configmaps/default/listed\": aesgcm key \"key1\" cannot decrypt it"),
        "{message}"
    );
    let (code, _) = s.curl("GET", "/api/v1/namespaces/default/configmaps", None, None);
    assert_eq!(code, 500, "a list with an unreadable item fails as upstream's does");
    assert_eq!(secret_value(&s, "unlisted"), "unlisted-value-0c9e", "what is not encrypted is still served");
    s.ok(&["create", "configmap", "fresh", "--from-literal=note=x"]);
    assert_eq!(s.ok(&["get", "configmap", "fresh", "-o", "jsonpath={.data.note}"]), "x");
}

#[test]
fn a_malformed_configuration_stops_the_server_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, provider_config("secrets", "c2hvcnQ=")).expect("config");
    let log = common::server_refuses(&[&format!("--encryption-provider-config={}", file.display())]);
    assert!(log.contains(&file.display().to_string()), "{log}");
    assert!(
        log.contains("resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"),
        "{log}"
    );
    let log =
        common::server_refuses(&["--secrets-encryption", &format!("--encryption-provider-config={}", file.display())]);
    assert!(log.contains("cannot be used with"), "{log}");
}
