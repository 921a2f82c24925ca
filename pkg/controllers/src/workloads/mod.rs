//! What the workload controllers (Deployment, ReplicaSet, ReplicationController, StatefulSet,
//! DaemonSet, Job, CronJob) share beyond `k1s_runtime`'s controller runtime: pod-template
//! hashing, owner references and adoption, pod readiness/availability and deletion ranking,
//! creation/deletion expectations, and the cron schedule parser.
//!
//! Everything here is either pure (unit-tested next to the code) or a thin wrapper over the
//! API client; nothing reaches the store directly.

pub mod cron;
pub mod events;
pub mod expectations;
pub mod hash;
pub mod history;
pub mod owner;
pub mod pods;
pub mod time;
