//! The CNI network configuration k1s writes for containerd.
