//! The crate layering as a test: dependencies point one way (`../shared/design.md` §2).
//!
//! `cmd → server → apiserver/controllers/scheduler/kubelet/proxy/dns → runtime → api/store/cri/pki → cel`.
//! A crate may depend only on workspace crates of a lower layer, never on one of its own layer or
//! above, and only the store speaks to the storage engines. Read from `cargo metadata`, so a new
//! dependency in any `Cargo.toml` (normal, build or dev) is checked as soon as it is written.

use std::collections::BTreeMap;
use std::process::Command;

/// The layer of each workspace crate: lower layers never depend on higher or equal ones.
const LAYERS: &[(&str, u8)] = &[
    ("k1s-cel", 0),
    ("k1s-api", 1),
    ("k1s-store", 1),
    ("k1s-cri", 1),
    ("k1s-pki", 1),
    ("k1s-runtime", 2),
    ("k1s-apiserver", 3),
    ("k1s-controllers", 3),
    ("k1s-scheduler", 3),
    ("k1s-kubelet", 3),
    ("k1s-proxy", 3),
    ("k1s-dns", 3),
    ("k1s-server", 4),
    ("k1s", 5),
    // Tests only: the fuzz targets reach into the API, the API server and CEL.
    ("k1s-fuzz", 5),
];

/// Outside crates that only one workspace crate may use: the storage engines belong to the store.
const OWNED: &[(&str, &str)] =
    &[("rocksdb", "k1s-store"), ("librocksdb-sys", "k1s-store"), ("etcd-client", "k1s-store")];

/// Extra rules beyond the layers (design.md: only the API server uses the store; everything
/// else reaches the API over HTTPS). The composition root opens the store to hand it over.
const FORBIDDEN: &[(&str, &str)] = &[
    ("k1s-controllers", "k1s-store"),
    ("k1s-scheduler", "k1s-store"),
    ("k1s-kubelet", "k1s-store"),
    ("k1s-proxy", "k1s-store"),
    ("k1s-dns", "k1s-store"),
    ("k1s-runtime", "k1s-store"),
];

/// A crate and the names of the crates it depends on (any kind).
type Graph = BTreeMap<String, Vec<String>>;

fn violations(graph: &Graph) -> Vec<String> {
    let layer = |name: &str| LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l);
    let mut out = Vec::new();
    for (krate, deps) in graph {
        let Some(own) = layer(krate) else {
            out.push(format!("{krate} has no layer: add it to LAYERS in cmd/k1s/tests/layering.rs"));
            continue;
        };
        for dep in deps {
            if let Some(theirs) = layer(dep) {
                if theirs >= own {
                    out.push(format!("{krate} (layer {own}) depends on {dep} (layer {theirs})"));
                }
            } else if graph.contains_key(dep.as_str()) {
                out.push(format!("{dep} has no layer"));
            }
            if let Some((_, owner)) = OWNED.iter().find(|(ext, _)| ext == dep) {
                if owner != krate {
                    out.push(format!("{krate} depends on {dep}, which only {owner} may use"));
                }
            }
            if FORBIDDEN.contains(&(krate.as_str(), dep.as_str())) {
                out.push(format!("{krate} depends on {dep}: it must reach the API over HTTPS"));
            }
        }
    }
    out
}

fn workspace_graph() -> Graph {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let mut graph = Graph::new();
    for pkg in meta["packages"].as_array().expect("packages") {
        let name = pkg["name"].as_str().expect("package name").to_owned();
        let deps = pkg["dependencies"].as_array().expect("dependencies");
        let deps = deps.iter().filter_map(|d| d["name"].as_str().map(str::to_owned)).collect();
        graph.insert(name, deps);
    }
    graph
}

#[test]
fn workspace_dependencies_point_one_way() {
    let graph = workspace_graph();
    for (name, _) in LAYERS {
        assert!(graph.contains_key(*name), "{name} is no longer a workspace crate: update LAYERS");
    }
    let bad = violations(&graph);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn the_check_catches_upward_sideways_and_engine_dependencies() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry((*from).to_owned()).or_default().push((*to).to_owned());
        }
        g
    };
    let cases = [
        (("k1s-api", "k1s-store"), "k1s-api (layer 1) depends on k1s-store (layer 1)"),
        (("k1s-api", "k1s-server"), "k1s-api (layer 1) depends on k1s-server (layer 4)"),
        (("k1s-apiserver", "k1s-kubelet"), "k1s-apiserver (layer 3) depends on k1s-kubelet (layer 3)"),
        (("k1s-server", "rocksdb"), "k1s-server depends on rocksdb, which only k1s-store may use"),
        (("k1s-apiserver", "rocksdb"), "k1s-apiserver depends on rocksdb, which only k1s-store may use"),
        (("k1s-controllers", "k1s-store"), "k1s-controllers depends on k1s-store: it must reach the API over HTTPS"),
        (("k1s-new", "k1s-api"), "k1s-new has no layer: add it to LAYERS in cmd/k1s/tests/layering.rs"),
    ];
    for ((from, to), want) in cases {
        assert_eq!(violations(&graph(&[(from, to)])), vec![want.to_owned()], "{from} -> {to}");
    }
    let fine = graph(&[("k1s-server", "k1s-apiserver"), ("k1s-apiserver", "k1s-store"), ("k1s-store", "rocksdb")]);
    assert!(violations(&fine).is_empty());
}

/// The API server knows the store's interface only: whichever backend is behind it (RocksDB or
/// etcd), the engine is a dependency of `k1s-store` alone.
#[test]
fn the_api_server_reaches_the_storage_engines_only_through_the_store() {
    let graph = workspace_graph();
    let api = graph.get("k1s-apiserver").expect("k1s-apiserver is a workspace crate");
    assert!(api.iter().any(|d| d == "k1s-store"), "k1s-apiserver no longer uses k1s-store: {api:?}");
    for (engine, _) in OWNED {
        assert!(!api.iter().any(|d| d == engine), "k1s-apiserver depends on {engine} directly");
    }
    let store = graph.get("k1s-store").expect("k1s-store is a workspace crate");
    assert!(store.iter().any(|d| d == "rocksdb"), "k1s-store no longer uses rocksdb: {store:?}");
}
