//! `kill -9` under load, in rounds, on both stores (issue 34): 16 writers create, update (with
//! the resourceVersion they last saw) and delete ConfigMaps over HTTP/2 while a watch follows
//! them; the server is killed at a random moment and started again. After each restart:
//! - every acknowledged write is there as acknowledged (same resourceVersion; a deleted object
//!   is gone), except for an object whose next write was in flight at the kill, which may show
//!   either state;
//! - nothing unacknowledged is half-visible (no object that no acknowledged or in-flight write
//!   made);
//! - resourceVersions only grow (a write after the restart gets one above every one seen);
//! - a watch resumed from the last resourceVersion the watch saw before the kill delivers every
//!   later acknowledged write exactly once (or answers 410 Gone).
//!
//! Each round prints a row (writes acknowledged, objects found as acknowledged, lost, watch
//! gaps, duplicates); the seed of the
//! kill times is printed and can be set with `K1S_CRASH_SEED`.

mod common;

use bytes::Bytes;
use common::Server;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NS: &str = "crash";
const WRITERS: usize = 16;
type Conn = h2::client::SendRequest<Bytes>;

/// What one object's acknowledged writes say of it.
#[derive(Clone, Debug, Default)]
struct Known {
    /// The last acknowledged state: its resourceVersion, `None` once deleted.
    acked: Option<Option<u64>>,
    /// A write was sent and not answered when the server died.
    in_flight: bool,
    /// Every resourceVersion an acknowledged create or update got, and whether a delete was
    /// acknowledged.
    versions: Vec<u64>,
    deleted: bool,
}

#[derive(Default)]
struct Ledger {
    objects: BTreeMap<String, Known>,
}

fn tls(s: &Server) -> Arc<rustls::ClientConfig> {
    let dir = s.data_dir().join("server/tls");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read pem");
    let identity =
        k1s_pki::client::Identity::from_pem(&read("client-admin.crt"), &read("client-admin.key"), ("cert", "key"))
            .expect("identity");
    let ca = read("server-ca.crt");
    let trust = k1s_pki::client::Trust::Pem { pem: ca.as_bytes(), what: "ca" };
    Arc::new(k1s_pki::client::client_config(trust, Some(&identity), &[b"h2"]).expect("client config"))
}

async fn connect(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<Conn, String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.map_err(|e| e.to_string())?;
    let (send, conn) = h2::client::handshake(tls).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// One request, its status and JSON body; `Err` when the connection failed (no answer).
async fn call(conn: &Conn, method: &str, path: &str, body: Option<String>) -> Result<(u16, serde_json::Value), String> {
    let mut head = http::Request::builder()
        .method(method)
        .uri(format!("https://127.0.0.1{path}"))
        .header("accept", "application/json");
    if body.is_some() {
        head = head.header("content-type", "application/json");
    }
    let head = head.body(()).map_err(|e| e.to_string())?;
    let mut send = conn.clone().ready().await.map_err(|e| e.to_string())?;
    let body = body.map(Bytes::from).unwrap_or_default();
    let (reply, mut stream) = send.send_request(head, body.is_empty()).map_err(|e| e.to_string())?;
    if !body.is_empty() {
        stream.send_data(body, true).map_err(|e| e.to_string())?;
    }
    let reply = reply.await.map_err(|e| e.to_string())?;
    let status = reply.status().as_u16();
    let mut recv = reply.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        out.extend_from_slice(&chunk);
        let _ = recv.flow_control().release_capacity(chunk.len());
    }
    Ok((status, serde_json::from_slice(&out).unwrap_or(serde_json::Value::Null)))
}

fn rv_of(v: &serde_json::Value) -> Option<u64> {
    v["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok())
}

fn configmap(name: &str, value: u64, rv: Option<u64>) -> String {
    let mut meta = serde_json::json!({"name": name, "namespace": NS});
    if let Some(rv) = rv {
        meta["resourceVersion"] = rv.to_string().into();
    }
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"v": value.to_string()}})
        .to_string()
}

/// One writer: create, update twice, delete, over and over, each on its own names, until the
/// connection dies or `stop` is set.
async fn writer(conn: Conn, w: usize, round: usize, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    let base = format!("/api/v1/namespaces/{NS}/configmaps");
    for k in 0.. {
        let name = format!("r{round}-w{w}-{k}");
        let mut rv = None;
        for step in 0..4u64 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            ledger.lock().expect("ledger").objects.entry(name.clone()).or_default().in_flight = true;
            let result = match step {
                0 => call(&conn, "POST", &base, Some(configmap(&name, step, None))).await,
                1 | 2 => call(&conn, "PUT", &format!("{base}/{name}"), Some(configmap(&name, step, rv))).await,
                _ => call(&conn, "DELETE", &format!("{base}/{name}"), None).await,
            };
            let Ok((status, body)) = result else { return };
            let mut l = ledger.lock().expect("ledger");
            let known = l.objects.entry(name.clone()).or_default();
            known.in_flight = false;
            match (step, status) {
                (0..=2, 200 | 201) => {
                    rv = rv_of(&body);
                    let Some(r) = rv else { panic!("{name}: a write without a resourceVersion: {body}") };
                    known.acked = Some(Some(r));
                    known.versions.push(r);
                }
                (3, 200 | 202) => {
                    known.acked = Some(None);
                    known.deleted = true;
                }
                // The server is going down (or up): the write did not happen.
                (_, 500 | 503 | 504) => return,
                _ => panic!("{name}: step {step} answered {status}: {body}"),
            }
        }
    }
}

/// The watch: every (type, name, resourceVersion) it delivers, until the connection ends.
async fn follow(conn: Conn, from: u64, seen: Arc<Mutex<Vec<(String, String, u64)>>>) -> Option<u16> {
    let path =
        format!("/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={from}&allowWatchBookmarks=false");
    let head = http::Request::get(format!("https://127.0.0.1{path}")).body(()).ok()?;
    let mut send = conn.clone().ready().await.ok()?;
    let (reply, _) = send.send_request(head, true).ok()?;
    let reply = reply.await.ok()?;
    let status = reply.status().as_u16();
    let mut body = reply.into_body();
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let Ok(ev) = serde_json::from_slice::<serde_json::Value>(&line) else { continue };
            let kind = ev["type"].as_str().unwrap_or("").to_string();
            if kind == "ERROR" {
                let code = ev["object"]["code"].as_u64().and_then(|c| u16::try_from(c).ok());
                return code.or(Some(500));
            }
            let name = ev["object"]["metadata"]["name"].as_str().unwrap_or("").to_string();
            let rv = rv_of(&ev["object"]).unwrap_or(0);
            seen.lock().expect("seen").push((kind, name, rv));
        }
    }
    Some(status)
}

/// The namespace's objects now: name → resourceVersion, and the list's resourceVersion.
async fn list(conn: &Conn) -> (BTreeMap<String, u64>, u64) {
    let (status, body) =
        call(conn, "GET", &format!("/api/v1/namespaces/{NS}/configmaps"), None).await.expect("list after restart");
    assert_eq!(status, 200, "{body}");
    let items = body["items"].as_array().cloned().unwrap_or_default();
    let objects = items
        .iter()
        .map(|i| (i["metadata"]["name"].as_str().unwrap_or("").to_string(), rv_of(i).unwrap_or(0)))
        .collect();
    (objects, rv_of(&body).unwrap_or(0))
}

#[derive(Debug, Default)]
struct Row {
    /// Acknowledged writes (creates, updates, deletes).
    acknowledged: usize,
    /// Objects found as their acknowledged writes left them.
    present: usize,
    lost: usize,
    half_visible: usize,
    watch_gaps: usize,
    duplicates: usize,
    resumed_with_410: bool,
}

/// A small xorshift: the kill times, reproducible from the printed seed.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn rounds(mut s: Server, store: &str, n: usize) {
    let mut seed: u64 = std::env::var("K1S_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
    });
    eprintln!("{store}: kill -9 rounds, K1S_CRASH_SEED={seed}");
    s.ok(&["create", "namespace", NS]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut rows = Vec::new();
    let mut highest_seen = 0u64;
    for round in 0..n {
        let cfg = tls(&s);
        let port = s.port;
        let ledger: Arc<Mutex<Ledger>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<Vec<(String, String, u64)>>> = Arc::default();
        // The watch starts from the list's resourceVersion before this round's writes.
        let start_rv = rt.block_on(async {
            let conn = connect(port, cfg.clone()).await.expect("connect");
            list(&conn).await.1
        });
        highest_seen = highest_seen.max(start_rv);
        let watch = rt.spawn({
            let (cfg, seen) = (cfg.clone(), seen.clone());
            async move { follow(connect(port, cfg).await.ok()?, start_rv, seen).await }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (cfg, ledger, stop) = (cfg.clone(), ledger.clone(), stop.clone());
                rt.spawn(async move {
                    if let Ok(conn) = connect(port, cfg).await {
                        writer(conn, w, round, ledger, stop).await;
                    }
                })
            })
            .collect();
        // Kill at a random moment once writes flow: 300 ms to 1.5 s in.
        let wait = Duration::from_millis(300 + next(&mut seed) % 1200);
        let until = Instant::now() + Duration::from_secs(30);
        while ledger.lock().expect("ledger").objects.values().filter(|k| k.acked.is_some()).count() < 20 {
            assert!(Instant::now() < until, "{store} round {round}: no writes acknowledged");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(wait);
        s.crash_and_restart();
        stop.store(true, Ordering::Relaxed);
        rt.block_on(async {
            for w in writers {
                let _ = w.await;
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), watch).await;
        });
        let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
        let seen_before = std::mem::take(&mut *seen.lock().expect("seen"));
        let (objects, list_rv) = rt.block_on(async {
            let conn = connect(port_of(&s), tls(&s)).await.expect("connect after restart");
            list(&conn).await
        });
        let mut row = Row::default();
        let mut acked_versions = BTreeSet::new();
        for (name, known) in &ledger.objects {
            acked_versions.extend(known.versions.iter().copied());
            let Some(acked) = known.acked else {
                // Only a create in flight: present or not, both are fine (present only as created).
                if let Some(rv) = objects.get(name) {
                    assert!(known.in_flight, "{name} is there (rv {rv}) though no write of it was sent");
                }
                continue;
            };
            row.acknowledged += known.versions.len() + usize::from(known.deleted);
            let now = objects.get(name).copied();
            let ok = match (acked, now) {
                (Some(rv), Some(now)) => now == rv || (known.in_flight && now > rv),
                (Some(_), None) => known.in_flight,
                (None, None) => true,
                (None, Some(_)) => false,
            };
            if ok {
                row.present += 1;
            } else {
                row.lost += 1;
                eprintln!("{store} round {round}: {name} acknowledged as {acked:?}, found {now:?}");
            }
        }
        for name in objects.keys() {
            if name.starts_with(&format!("r{round}-")) && !ledger.objects.contains_key(name) {
                row.half_visible += 1;
            }
        }
        let max_acked = acked_versions.iter().max().copied().unwrap_or(0);
        assert!(
            list_rv >= max_acked,
            "{store} round {round}: the list's rv {list_rv} is below an acknowledged {max_acked}"
        );
        // A watch resumed from the last event seen before the kill.
        let resume_from = seen_before.iter().map(|e| e.2).max().unwrap_or(start_rv);
        let resumed: Arc<Mutex<Vec<(String, String, u64)>>> = Arc::default();
        let code = rt.block_on(async {
            let conn = connect(port_of(&s), tls(&s)).await.expect("connect");
            let follow = follow(conn, resume_from, resumed.clone());
            // The backlog arrives at once; then nothing more is written.
            tokio::time::timeout(Duration::from_secs(3), follow).await.ok().flatten()
        });
        let resumed = std::mem::take(&mut *resumed.lock().expect("resumed"));
        if code == Some(410) {
            row.resumed_with_410 = true;
        } else {
            let mut counts: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
            for e in seen_before.iter().chain(&resumed) {
                *counts.entry(e.clone()).or_default() += 1;
            }
            row.duplicates = counts.values().filter(|c| **c > 1).count();
            let delivered: BTreeSet<u64> = seen_before.iter().chain(&resumed).map(|e| e.2).collect();
            row.watch_gaps = acked_versions.iter().filter(|v| **v > start_rv && !delivered.contains(v)).count();
            let deletes_seen: BTreeSet<&str> =
                seen_before.iter().chain(&resumed).filter(|e| e.0 == "DELETED").map(|e| e.1.as_str()).collect();
            row.watch_gaps +=
                ledger.objects.iter().filter(|(name, k)| k.deleted && !deletes_seen.contains(name.as_str())).count();
        }
        // Versions keep growing after the restart.
        let (status, after) = rt.block_on(async {
            let conn = connect(port_of(&s), tls(&s)).await.expect("connect");
            call(
                &conn,
                "POST",
                &format!("/api/v1/namespaces/{NS}/configmaps"),
                Some(configmap(&format!("after-{round}"), 0, None)),
            )
            .await
            .expect("write after restart")
        });
        assert_eq!(status, 201, "{after}");
        let after_rv = rv_of(&after).unwrap_or(0);
        highest_seen = highest_seen.max(max_acked).max(resume_from);
        assert!(
            after_rv > highest_seen,
            "{store} round {round}: rv {after_rv} after the restart, {highest_seen} seen before"
        );
        highest_seen = after_rv;
        eprintln!("{store} round {round}: killed {} ms in, {row:?}", wait.as_millis());
        rows.push(row);
    }
    eprintln!("\n| store | round | writes acknowledged | objects as acknowledged | lost | half-visible | watch gaps | duplicates | resumed with 410 |");
    eprintln!("|---|---|---|---|---|---|---|---|---|");
    for (i, r) in rows.iter().enumerate() {
        eprintln!(
            "| {store} | {i} | {} | {} | {} | {} | {} | {} | {} |",
            r.acknowledged, r.present, r.lost, r.half_visible, r.watch_gaps, r.duplicates, r.resumed_with_410
        );
    }
    for (i, r) in rows.iter().enumerate() {
        assert!(r.acknowledged > 0, "{store} round {i}: nothing was written");
        assert_eq!((r.lost, r.half_visible, r.watch_gaps, r.duplicates), (0, 0, 0, 0), "{store} round {i}: {r:?}");
    }
}

fn port_of(s: &Server) -> u16 {
    s.port
}

#[test]
fn kill_9_rounds_on_rocksdb_lose_no_acknowledged_write() {
    // The embedded store whatever K1S_TEST_DATASTORE says (no datastore flag: RocksDB).
    rounds(Server::start_shared(&[]), "rocksdb", 10);
}

#[test]
fn kill_9_rounds_on_etcd_lose_no_acknowledged_write() {
    rounds(Server::start_on_etcd(&[]), "etcd", 5);
}
