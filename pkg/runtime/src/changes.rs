//! Level-triggered loops over several watched caches: each watch's events become "something
//! changed" signals ([`signal`]), and [`sync_on_changes`] calls a sync that looks at every cache
//! once all have listed, after each change and on a resync period (which retries what failed).

use futures::stream::{BoxStream, Stream, StreamExt};
use kube::runtime::watcher;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The events of watch number `index` as signals: `(index, settled)`, settled when the initial
/// list is complete or an object changed after it (not for the objects of a list in progress).
pub fn signal<K, S>(index: usize, events: S) -> BoxStream<'static, (usize, bool)>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    events
        .map(move |e| {
            let settled =
                matches!(e, Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)));
            (index, settled)
        })
        .boxed()
}

/// Calls `sync` after every settled signal once each of `watches` has listed, and every
/// `resync`, until `cancel` fires or a watch ends.
pub async fn sync_on_changes<F, Fut>(
    watches: Vec<BoxStream<'static, (usize, bool)>>,
    resync: Duration,
    cancel: &CancellationToken,
    mut sync: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut listed = vec![false; watches.len()];
    let mut events = futures::stream::select_all(watches);
    let mut tick = tokio::time::interval(resync);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            e = events.next() => match e {
                None => return,
                Some((i, settled)) => {
                    if let Some(l) = listed.get_mut(i) {
                        *l |= settled;
                    }
                    if !settled {
                        continue;
                    }
                }
            },
            _ = tick.tick() => {}
        }
        if listed.iter().all(|l| *l) {
            sync().await;
        }
    }
}
