//! What a failed API request means, read from the `Status` the server answered with: its code,
//! reason and causes, never its message text.

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

/// 422 Invalid.
pub fn is_invalid(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.code == 422)
}

/// The request was refused because its namespace is being deleted (status cause
/// `NamespaceTerminating`): retrying cannot help.
pub fn is_namespace_terminating(err: &kube::Error) -> bool {
    status(err)
        .and_then(|s| s.details.as_ref())
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
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
        assert!(is_invalid(&api(422, "Invalid")));
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
    fn a_forbidden_message_about_termination_without_the_cause_is_not_namespace_terminating() {
        let err = kube::Error::Api(
            Status::failure("unable to create new content in namespace x because it is being terminated", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        assert!(!is_namespace_terminating(&err), "the message text must not decide");
    }
}
