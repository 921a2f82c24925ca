//! k1s pki
