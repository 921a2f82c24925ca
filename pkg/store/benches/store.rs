//! Synced writes per second for the store alone: `cargo bench -p k1s-store`.

use bytes::Bytes;
use k1s_store::{Store, StoreOptions};
use std::time::{Duration, Instant};

/// CPU time (user + system) this process has used so far, from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let ticks: u64 = rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<u64>().ok()).sum();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open");
    let value = Bytes::from(vec![b'x'; 600]);
    for concurrency in [1usize, 32, 256] {
        let n = if concurrency == 1 { 500 } else { 10_000 };
        let before = store.stats();
        let cpu_before = cpu_time();
        let start = Instant::now();
        let mut lat = rt.block_on(async {
            let per = n / concurrency;
            let mut tasks = Vec::new();
            for c in 0..concurrency {
                let (s, v) = (store.clone(), value.clone());
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::with_capacity(per);
                    for i in 0..per {
                        let t = Instant::now();
                        s.create(&format!("/bench/{concurrency}/{c}/{i}"), v.clone()).await.expect("create");
                        lat.push(t.elapsed());
                    }
                    lat
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.expect("join"));
            }
            all
        });
        let secs = start.elapsed().as_secs_f64();
        let cpu = (cpu_time() - cpu_before).as_secs_f64() * 1e6 / lat.len() as f64;
        let after = store.stats();
        lat.sort();
        let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
        println!(
            "store synced creates: concurrency={concurrency:<4} {:>8.0} writes/s  p50={:?} p99={:?}  writes/fsync={:.1}  CPU {cpu:.0} µs/write",
            lat.len() as f64 / secs,
            p(0.50),
            p(0.99),
            (after.writes - before.writes) as f64 / (after.batches - before.batches).max(1) as f64
        );
    }
}
