//! k1s store
