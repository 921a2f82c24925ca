//! What the core controllers (namespace, service account and root CA, garbage collector,
//! endpoints and endpoint slices, node lifecycle, disruption) share: a de-duplicating work
//! queue, resource discovery, pod facts, API error classification, and the
//! DefaultTolerationSeconds admission function the API server wires in.

pub mod discovery;
pub mod pod;
pub mod tolerations;
pub mod workqueue;

use std::error::Error as StdError;

/// The API status of a failed request, if the server answered with one.
fn status(err: &kube::Error) -> Option<&kube::core::Status> {
    match err {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

/// 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.is_not_found())
}

/// 409 Conflict (a stale resourceVersion or a failed precondition).
pub fn is_conflict(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.is_conflict())
}

/// 409 AlreadyExists.
pub fn is_already_exists(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.is_already_exists())
}

/// 405 MethodNotAllowed.
pub fn is_method_not_supported(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.code == 405)
}

/// The request was refused because its namespace is being deleted (status cause
/// `NamespaceTerminating`): retrying cannot help.
pub fn is_namespace_terminating(err: &kube::Error) -> bool {
    status(err)
        .and_then(|s| s.details.as_ref())
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

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
    use kube::core::response::{StatusCause, StatusDetails};
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("m", reason).with_code(code).boxed())
    }

    #[test]
    fn statuses_are_classified_by_code_and_reason() {
        assert!(is_not_found(&api(404, "NotFound")));
        assert!(is_conflict(&api(409, "Conflict")));
        assert!(is_already_exists(&api(409, "AlreadyExists")));
        assert!(is_method_not_supported(&api(405, "MethodNotAllowed")));
        assert!(!is_not_found(&api(409, "Conflict")));
    }

    #[test]
    fn namespace_terminating_is_read_from_the_status_causes() {
        let details = StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![StatusCause {
                reason: "NamespaceTerminating".into(),
                message: String::new(),
                field: String::new(),
            }],
            retry_after_seconds: 0,
        };
        let err = kube::Error::Api(Status::failure("m", "Forbidden").with_code(403).with_details(details).boxed());
        assert!(is_namespace_terminating(&err));
        assert!(!is_namespace_terminating(&api(403, "Forbidden")));
    }

    #[test]
    fn chain_joins_sources_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&e), "outer: inner");
    }
}
