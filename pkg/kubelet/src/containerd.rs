//! containerd: its generated configuration and its supervision.
