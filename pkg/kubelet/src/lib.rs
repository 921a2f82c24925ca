//! k1s-kubelet: the node agent. Registers the Node and its Lease, runs the pods bound to it
//! through CRI (one worker per pod), probes them, mounts their volumes, reports their status,
//! and serves logs/exec/attach/port-forward.
//!
//! It reaches the API only through a client with the node's identity; it must never depend on
//! the API server or the store.

pub mod cni;
pub mod containerd;
pub mod registries;
