//! The API server's own long-running tasks (serving, the webhook configuration watcher, the
//! CRD and APIService reconcilers), supervised as one: a task that ends while the server runs
//! ends the API server, whose supervisor (`k1s_server::supervise`) then stops the process
//! rather than leaving it half-alive (e.g. serving with webhooks that never reload).

use std::collections::HashMap;
use std::future::Future;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
pub(crate) struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
}

impl Tasks {
    pub(crate) fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Runs until `cancel` fires and every task has ended, or until one ends (or panics) while
    /// the server runs: that one is logged and the others are aborted.
    pub(crate) async fn run(mut self, cancel: CancellationToken) {
        while let Some(ended) = self.set.join_next_with_id().await {
            if cancel.is_cancelled() {
                continue;
            }
            let (id, panic) = match &ended {
                Ok((id, ())) => (*id, None),
                Err(e) => (e.id(), Some(e.to_string())),
            };
            let task = self.names.get(&id).copied().unwrap_or("an API server task");
            tracing::error!(task, panic, "an API server task stopped while the server was running");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_task_that_ends_early_ends_the_whole() {
        let cancel = CancellationToken::new();
        let mut tasks = Tasks::default();
        let c = cancel.clone();
        tasks.spawn("forever", async move { c.cancelled().await });
        tasks.spawn("short-lived", async {});
        tokio::time::timeout(Duration::from_secs(5), tasks.run(cancel.clone())).await.expect("ends");
        assert!(!cancel.is_cancelled(), "the supervisor, not the tasks, decides to cancel");
    }

    #[tokio::test]
    async fn after_cancel_it_waits_for_every_task() {
        let cancel = CancellationToken::new();
        let mut tasks = Tasks::default();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let c = cancel.clone();
        tasks.spawn("drains", async move {
            c.cancelled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(());
        });
        cancel.cancel();
        tasks.run(cancel).await;
        assert!(rx.await.is_ok(), "the draining task finished before run returned");
    }
}
