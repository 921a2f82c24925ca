//! What the core controllers (namespace, service account and root CA, garbage collector,
//! endpoints and endpoint slices, node lifecycle, disruption) share: resource discovery, pod
//! facts, error chains for logs, and the DefaultTolerationSeconds admission function the API
//! server wires in. Work queues, back-off and API error classification are `k1s_runtime`'s.

pub mod discovery;
pub mod pod;
pub mod tolerations;

use std::error::Error as StdError;

/// `err` and its sources joined with `: ` (for logs and status messages).
pub fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_joins_sources_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&e), "outer: inner");
    }
}
