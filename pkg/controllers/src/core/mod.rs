//! What the core controllers (namespace, service account and root CA, garbage collector,
//! endpoints and endpoint slices, node lifecycle, disruption) share: resource discovery, pod
//! facts, and the DefaultTolerationSeconds admission function the API server wires in. Work
//! queues, back-off and API error classification are `k1s_runtime`'s; error chains for logs
//! are `k1s_api::errors::chain`.

pub mod discovery;
pub mod pod;
pub mod tolerations;
