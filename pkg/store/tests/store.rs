//! Store behaviour against a real RocksDB in a temp dir.

use bytes::Bytes;
use k1s_store::{EventKind, Op, Store, StoreError, StoreOptions};
use std::time::Duration;

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, StoreOptions::default()).expect("open")
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn create_update_delete_assign_increasing_revisions_and_check_cas() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    let a = s.create("/r/a", b("1")).await.expect("create");
    assert_eq!((a.create_revision, a.mod_revision, a.version), (1, 1, 1));
    assert_eq!(s.create("/r/a", b("x")).await, Err(StoreError::AlreadyExists("/r/a".into())));
    let u = s.update("/r/a", b("2"), Some(1)).await.expect("update");
    assert_eq!((u.create_revision, u.mod_revision, u.version), (1, 2, 2));
    assert!(matches!(s.update("/r/a", b("3"), Some(1)).await, Err(StoreError::Conflict { current: 2, .. })));
    assert!(matches!(s.update("/r/missing", b("3"), None).await, Err(StoreError::NotFound(_))));
    let d = s.delete("/r/a", Some(2)).await.expect("delete");
    assert_eq!(d.mod_revision, 3);
    assert_eq!(s.get("/r/a").expect("get"), None);
    assert_eq!(s.current_revision(), 3);
}

#[tokio::test]
async fn failed_txn_writes_nothing_and_keeps_revision() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    s.create("/r/a", b("1")).await.expect("create");
    let res = s
        .txn(vec![
            Op::Create { key: "/r/b".into(), value: b("b") },
            Op::Create { key: "/r/a".into(), value: b("again") },
        ])
        .await;
    assert!(matches!(res, Err(StoreError::AlreadyExists(_))));
    assert_eq!(s.get("/r/b").expect("get"), None);
    assert_eq!(s.current_revision(), 1);
    let next = s.create("/r/c", b("c")).await.expect("create");
    assert_eq!(next.mod_revision, 2);
}

#[tokio::test]
async fn list_pages_in_key_order_and_reads_past_revisions() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    for i in 0..5 {
        s.create(&format!("/r/k{i}"), b(&i.to_string())).await.expect("create");
    }
    s.create("/other/x", b("x")).await.expect("create");
    let p1 = s.list("/r/", None, 2, None).expect("list");
    assert_eq!(p1.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["/r/k0", "/r/k1"]);
    assert!(p1.more);
    let rev = p1.revision;
    // Writes after the first page must not show in later pages read at the same revision.
    s.update("/r/k2", b("changed"), None).await.expect("update");
    s.delete("/r/k3", None).await.expect("delete");
    s.create("/r/k25", b("new")).await.expect("create");
    let p2 = s.list("/r/", Some("/r/k1"), 2, Some(rev)).expect("list");
    assert_eq!(p2.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["/r/k2", "/r/k3"]);
    assert_eq!(p2.items[0].value, b("2"));
    assert_eq!(p2.revision, rev);
    let now = s.list("/r/", None, 0, None).expect("list");
    assert_eq!(now.items.len(), 5);
    assert!(!now.more);
}

#[tokio::test]
async fn watch_replays_from_a_revision_then_follows_live_writes() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    s.create("/r/a", b("1")).await.expect("create");
    s.create("/x/a", b("1")).await.expect("create");
    s.update("/r/a", b("2"), None).await.expect("update");
    let mut w = s.watch("/r/", 1).expect("watch");
    let e = w.next().await.expect("event");
    assert_eq!((e.revision, e.kind), (3, EventKind::Update));
    assert_eq!(e.prev.as_ref().map(|p| p.value.clone()), Some(b("1")));
    let s2 = s.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        s2.delete("/r/a", None).await.expect("delete");
    });
    let e = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("event");
    assert_eq!((e.revision, e.kind), (4, EventKind::Delete));
    assert_eq!(e.kv.value, b("2"));
}

#[tokio::test]
async fn try_next_takes_what_is_ready_without_waiting() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Store::open(dir.path(), StoreOptions { fanout_capacity: 16, ..StoreOptions::default() }).expect("open");
    let mut w = s.watch("/r/", 0).expect("watch");
    assert!(w.try_next().expect("nothing yet").is_none());
    s.create("/r/a", b("1")).await.expect("create");
    s.create("/x/a", b("1")).await.expect("create");
    s.create("/r/b", b("1")).await.expect("create");
    let first = w.next().await.expect("event");
    assert_eq!(first.kv.key, "/r/a");
    let second = w.try_next().expect("ready").expect("an event");
    assert_eq!((second.revision, second.kv.key.as_str()), (3, "/r/b"));
    assert!(w.try_next().expect("drained").is_none());
    // Past the fan-out's capacity, the watcher catches up from the log, also without waiting.
    for i in 0..100 {
        s.create(&format!("/r/many-{i:03}"), b("1")).await.expect("create");
    }
    let mut seen = 0;
    while let Some(e) = w.try_next().expect("catch up") {
        assert_eq!(e.revision, 4 + seen);
        seen += 1;
    }
    assert_eq!(seen, 100);
}

#[tokio::test]
async fn writes_elsewhere_do_not_wake_a_watcher_but_advance_its_revision() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    let mut w = s.watch("/r/", 0).expect("watch");
    let mut other = s.watch("/x/", 0).expect("watch");
    s.create("/x/a", b("1")).await.expect("create");
    s.create("/x/b", b("1")).await.expect("create");
    // Nothing for /r/: its watcher stays asleep...
    let asleep = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
    assert!(asleep.is_err(), "woken by writes outside its prefix: {asleep:?}");
    // ...yet has seen every revision so far (what its bookmarks carry).
    assert_eq!(w.revision(), 2);
    assert_eq!(other.next().await.expect("event").kv.key, "/x/a");
    assert_eq!(other.revision(), 1, "revision 2 is still queued for this watcher");
    s.create("/r/a", b("1")).await.expect("create");
    let e = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("event");
    assert_eq!((e.revision, e.kv.key.as_str()), (3, "/r/a"));
    assert_eq!(w.revision(), 3);
    assert_eq!(other.next().await.expect("event").kv.key, "/x/b");
    assert_eq!(other.revision(), 3);
}

#[tokio::test]
async fn watch_from_compacted_revision_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    for i in 0..4 {
        s.create(&format!("/r/{i}"), b("v")).await.expect("create");
    }
    s.compact(3).await.expect("compact");
    assert!(matches!(s.watch("/r/", 2), Err(StoreError::Compacted { compacted: 3, .. })));
    assert!(s.watch("/r/", 3).is_ok());
    assert!(matches!(s.list("/r/", None, 0, Some(1)), Err(StoreError::Compacted { .. })));
}

#[tokio::test]
async fn restart_keeps_values_revisions_and_the_event_log() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let s = open(dir.path());
        s.create("/r/a", b("1")).await.expect("create");
        s.update("/r/a", b("2"), None).await.expect("update");
    }
    // The last handle closed the database as it went: it opens again at once.
    let s = Store::open(dir.path(), StoreOptions::default()).expect("reopen");
    assert_eq!(s.current_revision(), 2);
    let kv = s.get("/r/a").expect("get").expect("present");
    assert_eq!((kv.mod_revision, kv.value.clone()), (2, b("2")));
    let mut w = s.watch("/r/", 1).expect("watch");
    assert_eq!(w.next().await.expect("event").revision, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_share_synced_batches() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = open(dir.path());
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move { s.create(&format!("/r/{i:04}"), b("v")).await }));
    }
    for t in tasks {
        t.await.expect("join").expect("create");
    }
    let st = s.stats();
    assert_eq!(st.writes, 200);
    assert!(st.batches < 200, "expected group commit, got {st:?}");
    // Every batch was timed: those under the top bucket's bound (3.3 s) fall in a bucket.
    let timed: u64 = st.commit_buckets.iter().sum();
    assert!(timed > 0 && timed <= st.batches, "{st:?}");
    assert!(st.commit_seconds > 0.0, "{st:?}");
    assert_eq!(s.list("/r/", None, 0, None).expect("list").items.len(), 200);
}

#[tokio::test]
async fn cached_prefixes_read_like_rocksdb_through_writes_failures_and_reopen() {
    let dir = tempfile::tempdir().expect("tmp");
    let opts = || StoreOptions { cached_prefixes: vec!["/ns/".into()], ..StoreOptions::default() };
    {
        let s = Store::open(dir.path(), opts()).expect("open");
        s.create("/ns/a", b("a1")).await.expect("create");
        s.create("/ns/b", b("b1")).await.expect("create");
        s.create("/other/a", b("x")).await.expect("create");
        let u = s.update("/ns/a", b("a2"), None).await.expect("update");
        let got = s.get("/ns/a").expect("get").expect("present");
        assert_eq!((got.value, got.mod_revision, got.version, got.create_revision), (b("a2"), u.mod_revision, 2, 1));
        // A failed transaction changes nothing, in the cache either.
        let res = s
            .txn(vec![
                Op::Update { key: "/ns/b".into(), value: b("b2"), expected: None },
                Op::Create { key: "/ns/a".into(), value: b("again") },
            ])
            .await;
        assert!(matches!(res, Err(StoreError::AlreadyExists(_))));
        assert_eq!(s.get("/ns/b").expect("get").map(|kv| kv.value), Some(b("b1")));
        s.delete("/ns/b", None).await.expect("delete");
        assert_eq!(s.get("/ns/b").expect("get"), None);
        assert_eq!(s.get("/ns/missing").expect("get"), None);
    }
    // Reopened, with and without the cache: both read what RocksDB holds.
    let cached = Store::open(dir.path(), opts()).expect("reopen");
    let a = cached.get("/ns/a").expect("get");
    assert_eq!(a.as_ref().map(|kv| (kv.value.clone(), kv.version)), Some((b("a2"), 2)));
    assert_eq!(cached.get("/ns/b").expect("get"), None);
    assert_eq!(cached.get("/other/a").expect("get").map(|kv| kv.value), Some(b("x")));
    drop(cached);
    let plain = Store::open(dir.path(), StoreOptions::default()).expect("reopen");
    assert_eq!(plain.get("/ns/a").expect("get"), a);
}
