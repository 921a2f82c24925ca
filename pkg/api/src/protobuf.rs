//! Decoding Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`:
//! `k8s\0` + `runtime.Unknown`) into JSON objects.
