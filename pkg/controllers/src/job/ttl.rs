//! The TTL-after-finished controller (upstream `pkg/controller/ttlafterfinished`): a finished
//! Job with `ttlSecondsAfterFinished` is deleted (its pods in the background) once that many
//! seconds have passed since it finished; until then it is requeued for the expiry time.

use super::logic::finished_condition;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

pub const COMPONENT: &str = "ttl-after-finished-controller";

/// Errors of one check.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("re-reading job {namespace}/{name} before deleting it: {error}")]
    Get { namespace: String, name: String, error: kube::Error },
    #[error("deleting expired job {namespace}/{name}: {error}")]
    Delete { namespace: String, name: String, error: kube::Error },
}

/// What to do about a job now.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not finished, no TTL, or already being deleted.
    Nothing,
    /// Check again after this long.
    Wait(Duration),
    /// Expired: delete it.
    Delete,
}

/// `processTTL`/`timeLeft`: when a finished job with a TTL expires.
pub fn verdict(job: &Job, now: Timestamp) -> Verdict {
    if job.metadata.deletion_timestamp.is_some() {
        return Verdict::Nothing;
    }
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else { return Verdict::Nothing };
    let Some(finished) = finished_condition(job).and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0) else {
        return Verdict::Nothing;
    };
    let expire = crate::workloads::time::add_secs(finished, i64::from(ttl));
    if expire <= now {
        Verdict::Delete
    } else {
        Verdict::Wait(crate::workloads::time::to_std(crate::workloads::time::between(now, expire)))
    }
}

/// The controller's client.
pub struct Controller {
    client: kube::Client,
}

impl Controller {
    pub fn new(client: kube::Client) -> Controller {
        Controller { client }
    }
}

/// One check of one job.
pub async fn reconcile(job: Arc<Job>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    match verdict(&job, now) {
        Verdict::Nothing => Ok(Action::await_change()),
        Verdict::Wait(d) => Ok(Action::requeue(d)),
        Verdict::Delete => {
            let ns = job.namespace().unwrap_or_default();
            let name = job.name_any();
            let api: Api<Job> = Api::namespaced(ctl.client.clone(), &ns);
            // The cache may be stale (TTL changed, job re-created): decide on a fresh copy.
            let fresh = match api.get(&name).await {
                Ok(j) => j,
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
                Err(error) => return Err(Error::Get { namespace: ns, name, error }),
            };
            match verdict(&fresh, now) {
                Verdict::Nothing => return Ok(Action::await_change()),
                Verdict::Wait(d) => return Ok(Action::requeue(d)),
                Verdict::Delete => {}
            }
            let mut dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
            dp.preconditions = Some(kube::api::Preconditions {
                resource_version: fresh.metadata.resource_version.clone(),
                uid: fresh.metadata.uid.clone(),
            });
            tracing::info!(job = %name, namespace = %ns, "deleting job whose ttlSecondsAfterFinished expired");
            match api.delete(&name, &dp).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
                Err(error) => Err(Error::Delete { namespace: ns, name, error }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("ts")
    }

    fn finished_job(ttl: Option<i32>, at: &str) -> Job {
        Job {
            spec: Some(JobSpec { ttl_seconds_after_finished: ttl, ..Default::default() }),
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: "Complete".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(ts(at))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn finished_jobs_expire_after_their_ttl() {
        let now = ts("2024-05-01T12:00:00Z");
        assert_eq!(
            verdict(&finished_job(Some(100), "2024-05-01T11:59:00Z"), now),
            Verdict::Wait(Duration::from_secs(40))
        );
        assert_eq!(verdict(&finished_job(Some(0), "2024-05-01T11:59:00Z"), now), Verdict::Delete);
        assert_eq!(verdict(&finished_job(None, "2024-05-01T11:59:00Z"), now), Verdict::Nothing);
        let mut running = finished_job(Some(0), "2024-05-01T11:59:00Z");
        running.status = None;
        assert_eq!(verdict(&running, now), Verdict::Nothing);
    }
}
