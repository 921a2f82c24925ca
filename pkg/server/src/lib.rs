//! k1s server
