//! API create throughput and latency through a real `k1s server`, and its memory after
//! 10,000 ConfigMaps: `cargo bench -p k1s --bench api`.
//!
//! 32 concurrent clients with the admin client certificate, each on its own HTTP/2 connection
//! by default. Three phases on the same connections show where a create's time goes:
//! `GET /version` (TLS, HTTP/2, authentication and routing only), dry-run creates (all of a
//! create but the store write and what follows it), then real creates.
//! Knobs: `K1S_BENCH_CREATES` (requests per phase, default 10,000), `K1S_BENCH_BIN` (another k1s
//! binary), `K1S_BENCH_CONNS` (connections the 32 clients share, default 32; 1 is how client-go
//! sends: every goroutine's requests as streams of one HTTP/2 connection).
//!
//! The load generator is kept light so that the server, not the client, gets the 2 CPUs: the
//! clients are tasks of one thread and speak HTTP/2 with the `h2` crate directly (a request's
//! head and body go out as two frames, with no task spawned per request as hyper's client does
//! for a request body). Its CPU per request is printed next to the server's.
//!
//! Then, with the server stopped, the same number of synced creates by 32 concurrent writers
//! into a store of its own (values the size of the stored ConfigMaps), and the API's rate as a
//! share of that: measured seconds apart on the same machine, so that the VM's changing speed
//! does not skew the comparison as much as two separate benchmark runs would. For both, the
//! writes per synced batch and the mean batch commit (from the server's `/metrics`, and the
//! store's own counters) show how well group commit batched them.

#[path = "support/apibench.rs"]
mod apibench;
#[path = "support/h2client.rs"]
mod h2client;

use apibench::{
    configmap, conns_wanted, env_num, print_batching, run, share, store_counters, BenchServer, Counters, MakeRequest,
    CLIENTS,
};
use bytes::Bytes;
use h2client::{post_json, rss_kib};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let server = BenchServer::start(&[]);
    let idle_rss = rss_kib(server.id());
    // The clients: tasks of this one thread.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    // Creates to send; `K1S_BENCH_CREATES` overrides it (more gives steadier numbers).
    let total = env_num("K1S_BENCH_CREATES", 10_000);
    let conns_wanted = conns_wanted();
    let server_pid = server.pid();
    let conns = rt.block_on(server.connect_n(conns_wanted));
    println!("k1s server start to kubeconfig+ready: {:?}; idle RSS {} MiB", server.ready_after, idle_rss / 1024);
    // What a request costs before any handling (TLS, HTTP/2, authentication, routing), then a
    // create without the store write, then real creates: where the time of a create goes.
    let floor = run(&rt, &conns, &server_pid, total, 200, request(Phase::Version));
    floor.print(&format!("GET /version (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "request");
    let dry = run(&rt, &conns, &server_pid, total, 201, request(Phase::DryRunCreate));
    dry.print(&format!("dry-run creates (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "dry-run create");
    let before = rt.block_on(store_counters(&conns[0]));
    let created = run(&rt, &conns, &server_pid, total, 201, request(Phase::Create));
    let after = rt.block_on(store_counters(&conns[0]));
    created.print(&format!("API creates (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "create");
    print_batching("the API's store", before, after);
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_kib(server.id());
    println!("server RSS after {} ConfigMaps: {} MiB", created.latencies.len(), rss / 1024);
    drop(server);
    let store_rate = store_alone(total, created.reply_size);
    println!(
        "API creates/s are {:.0}% of the store's synced creates/s at {CLIENTS} concurrent writers ({:.0}/s for the store alone)",
        100.0 * created.rate() / store_rate,
        store_rate
    );
}

/// Synced creates per second by `CLIENTS` concurrent writers into a fresh store, with values
/// of `size` bytes: tasks of a multi-threaded runtime, as in `cargo bench -p k1s-store`.
fn store_alone(total: usize, size: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
    let dir = tempfile::tempdir().expect("tmp");
    let store = k1s_store::Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open store");
    let value = Bytes::from(vec![b'x'; size.max(1)]);
    let before = store.stats();
    let start = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let (store, value) = (store.clone(), value.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..share(total, CLIENTS, c) {
                    store
                        .create(&format!("/registry/configmaps/default/bench-{c}-{i}"), value.clone())
                        .await
                        .expect("create");
                }
            }));
        }
        for t in tasks {
            t.await.expect("join");
        }
    });
    let rate = total as f64 / start.elapsed().as_secs_f64();
    let after = store.stats();
    print_batching(
        "the store alone",
        Counters { writes: before.writes, commits: before.batches, commit_seconds: before.commit_seconds },
        Counters { writes: after.writes, commits: after.batches, commit_seconds: after.commit_seconds },
    );
    rate
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Version,
    DryRunCreate,
    Create,
}

/// The requests of a phase: client `c`'s `i`th request's head and body.
fn request(phase: Phase) -> MakeRequest {
    Arc::new(move |client, i| {
        if phase == Phase::Version {
            let head = http::Request::get("https://127.0.0.1/version").header("accept", "application/json");
            return (head.body(()).expect("request"), Bytes::new());
        }
        let path = match phase {
            Phase::DryRunCreate => "/api/v1/namespaces/default/configmaps?dryRun=All",
            _ => "/api/v1/namespaces/default/configmaps",
        };
        post_json(path, configmap(&format!("bench-{client}-{i}")))
    })
}
