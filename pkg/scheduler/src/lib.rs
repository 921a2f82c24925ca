//! k1s-scheduler: places pods without a node: filter ▶ score ▶ bind through `pods/binding`.
//!
//! It must never depend on the API server, the store or the kubelet.

use tokio_util::sync::CancellationToken;

/// Runs the scheduler until `cancel` fires.
pub async fn run(client: kube::Client, cancel: CancellationToken) {
    let _ = client;
    cancel.cancelled().await;
}
