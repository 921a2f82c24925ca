//! Leader election over a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` with a
//! `LeaseLock` does it for kube-controller-manager and kube-scheduler: a candidate takes the
//! Lease when it is free or when its holder has not renewed it for `lease_duration` (measured
//! on the candidate's own clock, from when it last saw the record change, so clock skew
//! between servers does not matter), renews it every `retry_period`, and gives up leading when
//! it could not renew for `renew_deadline`. Writes are compare-and-swap on the Lease's
//! resourceVersion, so two candidates never both win.
//!
//! Unlike upstream's components, which exit when they lose the Lease, k1s runs them inside a
//! server that also serves the API: the work is stopped (its token cancelled, then awaited)
//! and the candidate contends again.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Who contends for which Lease, and upstream's timings (15 s, 10 s, 2 s by default).
#[derive(Clone, Debug)]
pub struct LeaderElection {
    pub namespace: String,
    pub name: String,
    /// This candidate's `holderIdentity`. Keep it stable across restarts of the same server
    /// (upstream: `<hostname>_<uuid>`), so a restarted server takes its own Lease back at once
    /// instead of waiting for it to expire.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElection {
    /// A candidate for the Lease `kube-system/<name>` with upstream's default timings.
    pub fn new(name: &str, identity: &str) -> LeaderElection {
        LeaderElection {
            namespace: "kube-system".into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Runs `work` while this candidate leads, until `cancel`: every time the Lease is won,
    /// `work` is started with a token that is cancelled when leadership is lost (or at shutdown)
    /// and is awaited before contending again. When `cancel` fires while leading, the Lease is
    /// released so another candidate takes over at once. Returns early only when `work` ends
    /// on its own while leading (a failed component; the caller decides what that means).
    pub async fn run<F, Fut>(self, client: kube::Client, cancel: CancellationToken, mut work: F)
    where
        F: FnMut(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let api: Api<Lease> = Api::namespaced(client, &self.namespace);
        let mut seen = Observed::default();
        loop {
            // Acquire.
            loop {
                if cancel.is_cancelled() {
                    return;
                }
                match self.try_acquire_or_renew(&api, &mut seen).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::debug!(lease = %self.name, error = %e, "leader election: acquiring"),
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(jittered(self.retry_period)) => {}
                }
            }
            tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
            let leading = cancel.child_token();
            let mut task = tokio::spawn(work(leading.clone()));
            let mut last_renewed = Instant::now();
            let ended_by_itself = loop {
                tokio::select! {
                    _ = cancel.cancelled() => break false,
                    _ = &mut task => break true,
                    _ = tokio::time::sleep(self.retry_period) => {}
                }
                match tokio::time::timeout(self.renew_deadline, self.try_acquire_or_renew(&api, &mut seen)).await {
                    Ok(Ok(true)) => last_renewed = Instant::now(),
                    Ok(Ok(false)) => {
                        tracing::warn!(lease = %self.name, holder = ?seen.holder, "the Lease was taken over");
                        break false;
                    }
                    Ok(Err(e)) => tracing::warn!(lease = %self.name, error = %e, "renewing the Lease failed"),
                    Err(_) => tracing::warn!(lease = %self.name, "renewing the Lease timed out"),
                }
                if last_renewed.elapsed() >= self.renew_deadline {
                    break false;
                }
            };
            if ended_by_itself {
                // The work may see the shutdown before this loop does (both watch `cancel`):
                // that is a shutdown, not a failure (the soak found an ERROR at every stop).
                self.release(&api).await;
                if cancel.is_cancelled() {
                    tracing::info!(lease = %self.name, "released the Lease at shutdown");
                } else {
                    tracing::error!(lease = %self.name, "the work ended while leading");
                }
                return;
            }
            leading.cancel();
            if cancel.is_cancelled() {
                // As client-go's ReleaseOnCancel: released as the work stops (not after), while
                // the API still answers.
                self.release(&api).await;
                tracing::info!(lease = %self.name, "released the Lease at shutdown");
                let _ = task.await;
                return;
            }
            let _ = task.await;
            tracing::warn!(lease = %self.name, identity = %self.identity, "lost leadership; stopped, contending again");
            seen = Observed::default();
        }
    }

    /// client-go's `tryAcquireOrRenew`: true when this candidate holds the Lease afterwards.
    async fn try_acquire_or_renew(&self, api: &Api<Lease>, seen: &mut Observed) -> Result<bool, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let current = match api.get_opt(&self.name).await? {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(secs(self.lease_duration)),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                return match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (holder.clone(), spec.renew_time.as_ref().map(|t| t.0), spec.lease_transitions);
        if seen.record.as_ref() != Some(&record) {
            seen.record = Some(record);
            seen.at = Instant::now();
        }
        seen.holder = holder.clone();
        let ours = holder.as_deref() == Some(self.identity.as_str());
        let duration =
            spec.lease_duration_seconds.map_or(self.lease_duration, |s| Duration::from_secs(s.max(0) as u64));
        if holder.is_some() && !ours && seen.at.elapsed() < duration {
            return Ok(false);
        }
        let mut lease = current;
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours && holder.is_some());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(secs(self.lease_duration)),
            acquire_time: if ours { spec.acquire_time.or(Some(now.clone())) } else { Some(now.clone()) },
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..spec
        });
        match api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// client-go's release: an empty holder and a 1 s duration, so others need not wait.
    async fn release(&self, api: &Api<Lease>) {
        let Ok(Some(mut lease)) = api.get_opt(&self.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        if let Err(e) = api.replace(&self.name, &PostParams::default(), &lease).await {
            tracing::warn!(lease = %self.name, error = %e, "releasing the Lease failed");
        }
    }
}

/// The last Lease record seen, and when (on this candidate's clock) it last changed.
struct Observed {
    record: Option<(Option<String>, Option<jiff::Timestamp>, Option<i32>)>,
    at: Instant,
    holder: Option<String>,
}

impl Default for Observed {
    fn default() -> Self {
        Observed { record: None, at: Instant::now(), holder: None }
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
}

/// client-go waits `retryPeriod` with a jitter factor of 1.2: up to 20% more.
fn jittered(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.subsec_nanos());
    d + d.mul_f64(0.2 * f64::from(nanos % 1000) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let e = LeaderElection::new("kube-scheduler", "host_1");
        assert_eq!(e.namespace, "kube-system");
        assert_eq!(
            (e.lease_duration, e.renew_deadline, e.retry_period),
            (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2))
        );
    }

    #[test]
    fn jitter_adds_at_most_a_fifth() {
        let d = Duration::from_secs(2);
        for _ in 0..100 {
            let j = jittered(d);
            assert!(j >= d && j <= d.mul_f64(1.2), "{j:?}");
        }
    }

    #[test]
    fn lease_seconds_are_at_least_one() {
        assert_eq!(secs(Duration::from_millis(300)), 1);
        assert_eq!(secs(Duration::from_secs(15)), 15);
    }
}
