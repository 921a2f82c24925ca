//! k1s apiserver
