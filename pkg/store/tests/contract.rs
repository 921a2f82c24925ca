//! The store's contract, run against both backends: the embedded RocksDB in a temp dir and a
//! real etcd on loopback. Revisions are compared with each other, never with fixed numbers:
//! etcd's first write is revision 2, and other keys share its revision counter.

mod etcd_env;

use bytes::Bytes;
use k1s_store::{EtcdConfig, EventKind, Op, Store, StoreError, StoreOptions, TransformError, Transformer};
use std::sync::Arc;
use std::time::Duration;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Where a test's store lives; `open` may be called again for a restart.
enum Fixture {
    Rocks(tempfile::TempDir),
    Etcd(etcd_env::Etcd),
}

impl Fixture {
    fn rocks() -> Fixture {
        Fixture::Rocks(tempfile::tempdir().expect("tmp"))
    }

    fn etcd() -> Fixture {
        Fixture::Etcd(etcd_env::Etcd::start())
    }

    async fn open(&self) -> Store {
        self.open_with(StoreOptions::default()).await
    }

    async fn open_with(&self, opts: StoreOptions) -> Store {
        match self {
            Fixture::Rocks(dir) => Store::open(dir.path(), opts).expect("open"),
            Fixture::Etcd(etcd) => {
                let config =
                    EtcdConfig { endpoints: vec![etcd.url.clone()], root: "/k1s-test".into(), ..EtcdConfig::default() };
                Store::connect_etcd(&config, opts).await.expect("connect to etcd")
            }
        }
    }
}

/// Stores values under `/s/` as `sealed:` and their bytes reversed; refuses to read anything
/// else there.
struct Sealer;

impl Transformer for Sealer {
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, TransformError> {
        if !key.starts_with("/s/") {
            return Ok(None);
        }
        Ok(Some([b"sealed:".as_slice(), &value.iter().rev().copied().collect::<Vec<u8>>()].concat()))
    }

    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<Option<Vec<u8>>, TransformError> {
        if !key.starts_with("/s/") {
            return Ok(None);
        }
        match stored.strip_prefix(b"sealed:") {
            Some(v) => Ok(Some(v.iter().rev().copied().collect())),
            None => Err(TransformError("not sealed".into())),
        }
    }
}

fn sealed() -> StoreOptions {
    StoreOptions { transformer: Some(Arc::new(Sealer)), ..StoreOptions::default() }
}

async fn create_update_delete_check_conditions_and_revisions(f: &Fixture) {
    let s = f.open().await;
    let base = s.current_revision();
    let a = s.create("/r/a", b("1")).await.expect("create");
    assert!(a.mod_revision > base);
    assert_eq!((a.create_revision, a.version, a.value.clone()), (a.mod_revision, 1, b("1")));
    assert_eq!(s.create("/r/a", b("x")).await, Err(StoreError::AlreadyExists("/r/a".into())));
    let u = s.update("/r/a", b("2"), Some(a.mod_revision)).await.expect("update");
    assert!(u.mod_revision > a.mod_revision);
    assert_eq!((u.create_revision, u.version), (a.create_revision, 2));
    assert_eq!(
        s.update("/r/a", b("3"), Some(a.mod_revision)).await,
        Err(StoreError::Conflict { key: "/r/a".into(), expected: a.mod_revision, current: u.mod_revision })
    );
    assert_eq!(s.update("/r/missing", b("3"), None).await, Err(StoreError::NotFound("/r/missing".into())));
    assert_eq!(s.delete("/r/missing", None).await, Err(StoreError::NotFound("/r/missing".into())));
    assert!(matches!(s.delete("/r/a", Some(a.mod_revision)).await, Err(StoreError::Conflict { .. })));
    let d = s.delete("/r/a", Some(u.mod_revision)).await.expect("delete");
    assert!(d.mod_revision > u.mod_revision);
    assert_eq!((d.value.clone(), d.create_revision), (b("2"), a.create_revision));
    assert_eq!(s.get("/r/a").expect("get"), None);
    assert_eq!(s.current_revision(), d.mod_revision);
}

async fn a_failed_txn_writes_nothing_and_a_good_one_writes_all(f: &Fixture) {
    let s = f.open().await;
    let a = s.create("/r/a", b("1")).await.expect("create");
    let res = s
        .txn(vec![
            Op::Create { key: "/r/b".into(), value: b("b") },
            Op::Create { key: "/r/a".into(), value: b("again") },
        ])
        .await;
    assert_eq!(res, Err(StoreError::AlreadyExists("/r/a".into())));
    assert_eq!(s.get("/r/b").expect("get"), None);
    assert_eq!(s.current_revision(), a.mod_revision);
    let done = s
        .txn(vec![
            Op::Create { key: "/r/b".into(), value: b("b") },
            Op::Update { key: "/r/a".into(), value: b("2"), expected: Some(a.mod_revision) },
        ])
        .await
        .expect("txn");
    assert_eq!(done.len(), 2);
    assert_eq!((done[0].key.as_str(), done[0].version), ("/r/b", 1));
    assert_eq!((done[1].key.as_str(), done[1].version, done[1].value.clone()), ("/r/a", 2, b("2")));
    assert_eq!(s.get("/r/a").expect("get").map(|kv| kv.mod_revision), Some(done[1].mod_revision));
    assert_eq!(s.get("/r/b").expect("get").map(|kv| kv.value), Some(b("b")));
}

async fn list_pages_in_key_order_and_reads_a_past_revision(f: &Fixture) {
    let s = f.open().await;
    for i in 0..5 {
        s.create(&format!("/r/k{i}"), b(&i.to_string())).await.expect("create");
    }
    s.create("/other/x", b("x")).await.expect("create");
    let p1 = s.list("/r/", None, 2, None).expect("list");
    assert_eq!(p1.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["/r/k0", "/r/k1"]);
    assert!(p1.more);
    assert_eq!(p1.revision, s.current_revision());
    let rev = p1.revision;
    // Writes after the first page must not show in later pages read at the same revision.
    s.update("/r/k2", b("changed"), None).await.expect("update");
    s.delete("/r/k3", None).await.expect("delete");
    s.create("/r/k25", b("new")).await.expect("create");
    let p2 = s.list("/r/", Some("/r/k1"), 2, Some(rev)).expect("list");
    assert_eq!(p2.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["/r/k2", "/r/k3"]);
    assert_eq!(p2.items[0].value, b("2"));
    assert_eq!(p2.revision, rev);
    assert!(p2.more);
    let p3 = s.list("/r/", Some("/r/k3"), 2, Some(rev)).expect("list");
    assert_eq!(p3.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["/r/k4"]);
    assert!(!p3.more);
    let now = s.list("/r/", None, 0, None).expect("list");
    assert_eq!(
        now.items.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(),
        ["/r/k0", "/r/k1", "/r/k2", "/r/k25", "/r/k4"]
    );
    assert!(!now.more);
    let future = s.current_revision() + 10;
    assert!(matches!(s.list("/r/", None, 0, Some(future)), Err(StoreError::FutureRevision { .. })));
}

async fn watch_replays_from_a_revision_then_follows_live_writes(f: &Fixture) {
    let s = f.open().await;
    let first = s.create("/r/a", b("1")).await.expect("create");
    s.create("/x/a", b("1")).await.expect("create");
    let u = s.update("/r/a", b("2"), None).await.expect("update");
    let mut w = s.watch("/r/", first.mod_revision).expect("watch");
    let e = w.next().await.expect("event");
    assert_eq!((e.revision, e.kind), (u.mod_revision, EventKind::Update));
    assert_eq!(e.prev.as_ref().map(|p| p.value.clone()), Some(b("1")));
    let s2 = s.clone();
    let deleter = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        s2.delete("/r/a", None).await.expect("delete")
    });
    let e = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("event");
    let d = deleter.await.expect("join");
    assert_eq!((e.revision, e.kind), (d.mod_revision, EventKind::Delete));
    assert_eq!(e.kv.value, b("2"));
    assert_eq!(e.prev.as_ref().map(|p| p.value.clone()), Some(b("2")));
}

async fn writes_elsewhere_do_not_wake_a_watcher_but_advance_its_revision(f: &Fixture) {
    let s = f.open().await;
    let mut w = s.watch("/r/", 0).expect("watch");
    assert!(w.try_next().expect("nothing yet").is_none());
    s.create("/x/a", b("1")).await.expect("create");
    let x = s.create("/x/b", b("1")).await.expect("create");
    let asleep = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
    assert!(asleep.is_err(), "woken by writes outside its prefix: {asleep:?}");
    assert_eq!(w.revision(), x.mod_revision);
    let a = s.create("/r/a", b("1")).await.expect("create");
    let c = s.create("/r/c", b("1")).await.expect("create");
    let e = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("event");
    assert_eq!((e.revision, e.kv.key.as_str(), e.kind), (a.mod_revision, "/r/a", EventKind::Create));
    let e = w.try_next().expect("ready").expect("the second event without waiting");
    assert_eq!(e.revision, c.mod_revision);
    assert_eq!(w.revision(), c.mod_revision);
}

async fn a_watch_or_read_from_a_compacted_revision_gets_compacted(f: &Fixture) {
    let s = f.open().await;
    let mut revs = Vec::new();
    for i in 0..4 {
        revs.push(s.create(&format!("/r/{i}"), b("v")).await.expect("create").mod_revision);
    }
    s.compact(revs[2]).await.expect("compact");
    assert_eq!(s.compacted_revision(), revs[2]);
    assert!(matches!(s.watch("/r/", revs[1]), Err(StoreError::Compacted { compacted, .. }) if compacted == revs[2]));
    let mut w = s.watch("/r/", revs[2]).expect("watch from the compacted revision itself");
    assert_eq!(w.next().await.expect("event").revision, revs[3]);
    assert!(matches!(s.list("/r/", None, 0, Some(revs[0])), Err(StoreError::Compacted { .. })));
    // Compacting again at or below is a no-op.
    s.compact(revs[1]).await.expect("compact again");
    assert_eq!(s.compacted_revision(), revs[2]);
}

async fn a_reopened_store_keeps_values_and_revisions(f: &Fixture) {
    let (a, u) = {
        let s = f.open().await;
        let a = s.create("/r/a", b("1")).await.expect("create");
        let u = s.update("/r/a", b("2"), None).await.expect("update");
        (a, u)
    };
    let s = f.open().await;
    assert!(s.current_revision() >= u.mod_revision);
    let kv = s.get("/r/a").expect("get").expect("present");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version, kv.value),
        (a.create_revision, u.mod_revision, 2, b("2"))
    );
    assert!(matches!(s.update("/r/a", b("3"), Some(a.mod_revision)).await, Err(StoreError::Conflict { .. })));
    // A watch from before the reopen replays what followed, then follows on.
    let mut old = s.watch("/r/", a.mod_revision).expect("watch from before the reopen");
    let e = old.next().await.expect("event");
    assert_eq!((e.revision, e.kind), (u.mod_revision, EventKind::Update));
    assert_eq!(e.prev.as_ref().map(|p| p.value.clone()), Some(b("1")));
    let mut w = s.watch("/r/", s.current_revision()).expect("watch");
    let n = s.update("/r/a", b("3"), Some(u.mod_revision)).await.expect("update after reopen");
    assert_eq!(w.next().await.expect("event").revision, n.mod_revision);
    let e = tokio::time::timeout(Duration::from_secs(5), old.next()).await.expect("in time").expect("event");
    assert_eq!(e.revision, n.mod_revision);
    assert_eq!(old.revision(), n.mod_revision);
}

async fn concurrent_writers_all_land_with_distinct_revisions(f: &Fixture) {
    let s = f.open().await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move { s.create(&format!("/r/{i:04}"), b("v")).await }));
    }
    let mut revs = Vec::new();
    for t in tasks {
        revs.push(t.await.expect("join").expect("create").mod_revision);
    }
    revs.sort_unstable();
    revs.dedup();
    assert_eq!(revs.len(), 64);
    assert_eq!(s.list("/r/", None, 0, None).expect("list").items.len(), 64);
    assert_eq!(s.stats().writes, 64);
}

async fn a_transformer_sees_every_value_stored_and_readers_only_plain_ones(f: &Fixture) {
    let s = f.open_with(sealed()).await;
    // (A watch from 0 starts now: the first write makes a revision to replay from.)
    let base = s.create("/p/first", b("plain")).await.expect("create").mod_revision;
    let mut live = s.watch("/s/", 0).expect("watch");
    let a = s.create("/s/a", b("secret1")).await.expect("create");
    assert_eq!(a.value, b("secret1"), "a write's result is plain");
    let u = s.update("/s/a", b("secret2"), Some(a.mod_revision)).await.expect("update");
    assert_eq!(u.value, b("secret2"));
    s.create("/p/x", b("plain")).await.expect("create elsewhere");
    assert_eq!(s.get("/s/a").expect("get").map(|kv| kv.value), Some(b("secret2")));
    assert_eq!(s.list("/s/", None, 0, None).expect("list").items[0].value, b("secret2"));
    assert_eq!(s.list("/s/", None, 0, Some(a.mod_revision)).expect("past").items[0].value, b("secret1"));
    for w in [&mut live, &mut s.watch("/s/", base).expect("from the log")] {
        let c = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("create");
        assert_eq!((c.kind, c.kv.value.clone()), (EventKind::Create, b("secret1")));
        let u = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("update");
        assert_eq!((u.kv.value.clone(), u.prev.as_ref().map(|p| p.value.clone())), (b("secret2"), Some(b("secret1"))));
    }
    let d = s.delete("/s/a", None).await.expect("delete");
    assert_eq!(d.value, b("secret2"), "a delete returns the plain value");
    let again = s.create("/s/a", b("secret3")).await.expect("create again");
    drop((live, s));
    // Without the transformer: what the backend holds.
    let raw = f.open().await;
    assert_eq!(raw.get("/s/a").expect("get").map(|kv| kv.value), Some(b("sealed:3terces")));
    assert_eq!(raw.get("/p/x").expect("get").map(|kv| kv.value), Some(b("plain")));
    raw.update("/s/a", b("oops"), Some(again.mod_revision)).await.expect("a value the transformer refuses");
    drop(raw);
    if let Fixture::Rocks(dir) = f {
        // The WAL, the event log, the tables: no plain text anywhere.
        for file in std::fs::read_dir(dir.path()).expect("dir") {
            let bytes = std::fs::read(file.expect("entry").path()).unwrap_or_default();
            assert!(!bytes.windows(7).any(|w| w == b"secret1" || w == b"secret2" || w == b"secret3"));
        }
    }
    let s = f.open_with(sealed()).await;
    let refused = StoreError::Transform { key: "/s/a".into(), message: "not sealed".into() };
    assert_eq!(s.get("/s/a"), Err(refused.clone()));
    assert_eq!(s.list("/s/", None, 0, None).map(|l| l.items.len()), Err(refused.clone()));
    assert_eq!(refused.to_string(), "unable to transform key \"/s/a\": not sealed");
    let mut w = s.watch("/s/", again.mod_revision).expect("watch");
    let next = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time");
    assert_eq!(next.map(|e| e.revision), Err(refused), "a watcher gets the error, not the bytes");
}

macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod rocks {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Fixture::rocks()).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Fixture::etcd()).await;
                }
            )*
        }
    };
}

contract!(
    create_update_delete_check_conditions_and_revisions,
    a_failed_txn_writes_nothing_and_a_good_one_writes_all,
    list_pages_in_key_order_and_reads_a_past_revision,
    watch_replays_from_a_revision_then_follows_live_writes,
    writes_elsewhere_do_not_wake_a_watcher_but_advance_its_revision,
    a_watch_or_read_from_a_compacted_revision_gets_compacted,
    a_reopened_store_keeps_values_and_revisions,
    concurrent_writers_all_land_with_distinct_revisions,
    a_transformer_sees_every_value_stored_and_readers_only_plain_ones,
);

/// Two servers on one etcd: what one writes, the other reads and watches (the HA path).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_two_stores_on_one_etcd_see_each_others_writes() {
    let f = Fixture::etcd();
    let (one, two) = (f.open().await, f.open().await);
    let mut w = two.watch("/r/", 0).expect("watch");
    let a = one.create("/r/a", b("1")).await.expect("create");
    let e = tokio::time::timeout(Duration::from_secs(5), w.next()).await.expect("in time").expect("event");
    assert_eq!((e.revision, e.kv.key.as_str()), (a.mod_revision, "/r/a"));
    assert_eq!(two.get("/r/a").expect("get").map(|kv| kv.mod_revision), Some(a.mod_revision));
    // A stale write through the other one is a conflict, not a lost update.
    one.update("/r/a", b("2"), Some(a.mod_revision)).await.expect("update");
    assert!(matches!(two.update("/r/a", b("3"), Some(a.mod_revision)).await, Err(StoreError::Conflict { .. })));
    // After the conflict, the second store reads the value that caused it.
    assert_eq!(two.get("/r/a").expect("get").map(|kv| kv.value), Some(b("2")));
}
