//! Snapshot save and restore of a store holding 10,000 ConfigMaps:
//! `cargo bench --workspace --bench snapshot`. Prints times and the file size; asserts nothing
//! about time.

use bytes::Bytes;
use k1s_store::{Op, Store, StoreOptions};
use std::time::Instant;

const OBJECTS: usize = 10_000;

/// A ConfigMap as the API server stores it (JSON with managedFields), about 700 bytes.
fn configmap(i: usize) -> Bytes {
    Bytes::from(format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}","namespace":"bench","uid":"6c0e1a2b-{i:04x}-4f6e-9a8b-7c6d5e4f3a2b","resourceVersion":"{i}","creationTimestamp":"2026-12-03T22:00:00Z","labels":{{"app":"bench","index":"{i}"}},"managedFields":[{{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2026-12-03T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{".":{{}},"f:config.yaml":{{}},"f:key":{{}}}}}}}}]}},"data":{{"key":"value-{i}","config.yaml":"server:\n  port: {port}\n  name: instance-{i}\n  replicas: 3\n  timeout: 30s\n"}}}}"#,
        port = 8000 + i % 1000
    ))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("server").join("db");
    let store = Store::open(&db, StoreOptions::default()).expect("open");
    let mut bytes = 0;
    rt.block_on(async {
        for chunk in (0..OBJECTS).collect::<Vec<_>>().chunks(500) {
            let ops: Vec<Op> = chunk
                .iter()
                .map(|i| {
                    let value = configmap(*i);
                    bytes += value.len();
                    Op::Create { key: format!("/registry/configmaps/bench/cm-{i}"), value }
                })
                .collect();
            store.txn(ops).await.expect("create");
        }
    });
    println!("store: {OBJECTS} ConfigMaps, {bytes} bytes of values, revision {}", store.current_revision());
    let file = db.join("snapshots").join("bench");
    let started = Instant::now();
    let manifest = rt.block_on(store.save_snapshot(&file)).expect("save");
    let save = started.elapsed();
    let size = std::fs::metadata(&file).expect("size").len();
    println!(
        "save:    {:>8.1} ms  file {:.2} MiB ({} checkpoint files, revision {})",
        save.as_secs_f64() * 1e3,
        size as f64 / (1024.0 * 1024.0),
        manifest.files,
        manifest.revision
    );
    drop(store);
    let started = Instant::now();
    let verified = k1s_store::snapshot::verify(&file).expect("verify");
    let verify = started.elapsed();
    let started = Instant::now();
    let restored = k1s_store::snapshot::restore(&file, &db).expect("restore");
    let restore = started.elapsed();
    let started = Instant::now();
    let store = Store::open(&db, StoreOptions::default()).expect("reopen");
    let n = store.list("/registry/configmaps/", None, 0, None).expect("list").items.len();
    let reopen = started.elapsed();
    assert_eq!(n, OBJECTS);
    assert_eq!(verified.revision, restored.manifest.revision);
    println!("verify:  {:>8.1} ms  (checksum only)", verify.as_secs_f64() * 1e3);
    println!("restore: {:>8.1} ms  (checksum, unpack, revision bump, fsync, swap)", restore.as_secs_f64() * 1e3);
    println!("reopen:  {:>8.1} ms  (open the restored store and list all {n})", reopen.as_secs_f64() * 1e3);
}
