//! The per-object work of a create, stage by stage, on the ConfigMap the API benchmark sends
//! (`cargo bench -p k1s-api --bench create_path`): decoding into the typed object with
//! defaulting, validation, recording managedFields, and encoding for the store. These run on
//! every create; the API benchmark measures them together with TLS, HTTP/2 and the store.

use k1s_api::apply as ssa;
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;

const ROUNDS: usize = 200_000;

fn time(what: &str, mut f: impl FnMut()) {
    for _ in 0..ROUNDS / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..ROUNDS {
        f();
    }
    println!("{what:<36} {:>7.2} µs", start.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64);
}

fn main() {
    let info = k1s_api::resources::find("", "v1", "configmaps").expect("configmaps");
    let openapi = k1s_api::openapi::get();
    let schema = openapi.kind_schema("", "v1", "ConfigMap").expect("ConfigMap schema");
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bench-1-1", "namespace": "default", "labels": {"app": "bench"}},
        "data": {"key": "v".repeat(256)}
    });
    let text = serde_json::to_vec(&body).expect("encode");
    let normalized = info.strategy.normalize(body.clone()).expect("normalize").object;
    let manager = ssa::Manager {
        name: "kubectl-create",
        operation: ssa::Operation::Update,
        api_version: "v1",
        subresource: None,
        time: "2026-11-30T12:00:00Z",
    };
    let mut recorded = normalized.clone();
    ssa::track_update(None, &mut recorded, &manager, schema, openapi, ssa::RESET_NONE);

    time("decode request body (JSON)", || {
        black_box(serde_json::from_slice::<Value>(black_box(&text)).ok());
    });
    time("normalize (typed decode, defaults)", || {
        black_box(info.strategy.normalize(black_box(body.clone())).ok());
    });
    time("validate (ConfigMap)", || {
        black_box(info.strategy.validate(black_box(&normalized), None).ok());
    });
    time("managedFields of a create", || {
        let mut obj = normalized.clone();
        ssa::track_update(None, &mut obj, &manager, schema, openapi, ssa::RESET_NONE);
        black_box(obj);
    });
    time("clone (baseline of the line above)", || {
        black_box(normalized.clone());
    });
    time("encode for the store", || {
        black_box(serde_json::to_vec(black_box(&recorded)).ok());
    });
}
