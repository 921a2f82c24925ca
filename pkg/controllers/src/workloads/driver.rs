//! The reconcile loop every workload controller runs: `kube::runtime::Controller` over a
//! reflector store, fed only by informer handlers through `reconcile_on`, one reconcile at a
//! time per object, and on failure a per-object exponential back-off like client-go's default
//! controller rate limiter (5 ms doubling up to 1000 s), reset by the next success.

use futures::channel::mpsc;
use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const BASE_DELAY: Duration = Duration::from_millis(5);
const MAX_DELAY: Duration = Duration::from_secs(1000);

/// The delay before retry number `failures` (1-based) of an object.
pub fn backoff_delay(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(30);
    BASE_DELAY.saturating_mul(1u32 << shift).min(MAX_DELAY)
}

struct Wrapped<C, K: Resource<DynamicType = ()>> {
    inner: Arc<C>,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
    name: &'static str,
}

/// Runs `reconcile` for every key pushed into `triggers` (keys of objects missing from `store`
/// are dropped) until `cancel` fires and running reconciles finish.
pub async fn run<K, C, F, Fut, E>(
    name: &'static str,
    store: Store<K>,
    triggers: mpsc::UnboundedReceiver<ObjectRef<K>>,
    ctx: Arc<C>,
    reconcile: F,
    cancel: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let wrapped = Arc::new(Wrapped { inner: ctx, failures: Mutex::new(HashMap::new()), name });
    let reconcile = Arc::new(reconcile);
    let shutdown = cancel.clone();
    Controller::for_stream(futures::stream::pending(), store)
        .reconcile_on(triggers)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(
            move |obj: Arc<K>, w: Arc<Wrapped<C, K>>| {
                let fut = reconcile(obj.clone(), w.inner.clone());
                async move {
                    let result = fut.await;
                    if result.is_ok() {
                        if let Ok(mut f) = w.failures.lock() {
                            f.remove(&ObjectRef::from_obj(&*obj));
                        }
                    }
                    result
                }
            },
            |obj: Arc<K>, error: &E, w: Arc<Wrapped<C, K>>| {
                let key = ObjectRef::from_obj(&*obj);
                let failures = w
                    .failures
                    .lock()
                    .map(|mut f| {
                        let n = f.entry(key.clone()).or_insert(0);
                        *n += 1;
                        *n
                    })
                    .unwrap_or(1);
                let delay = backoff_delay(failures);
                tracing::warn!(controller = w.name, object = %key, %error, failures, retry_in = ?delay, "reconcile failed");
                Action::requeue(delay)
            },
            wrapped,
        )
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = name, error = %e, "controller event");
            }
            std::future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_five_milliseconds_up_to_1000_seconds() {
        assert_eq!(backoff_delay(1), Duration::from_millis(5));
        assert_eq!(backoff_delay(2), Duration::from_millis(10));
        assert_eq!(backoff_delay(5), Duration::from_millis(80));
        assert_eq!(backoff_delay(40), Duration::from_secs(1000));
    }
}
