//! Printing an error with its causes.
//!
//! An error's message says what failed; its cause is its [`Error::source`], not repeated in the
//! message (`#[error("reading {path}")]` next to `#[source] source: io::Error`). Where an error
//! is logged or handed to a person, [`chain`] prints it with every cause, `: `-separated, the
//! way Go's wrapped errors read: `reading /etc/x: permission denied`.

use std::error::Error;

/// `err` and each of its sources, `: `-separated (for logs and status messages). A source whose
/// message is already the end of the text so far (an error that still prints its cause) is not
/// printed twice.
pub fn chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !msg.is_empty() && !text.ends_with(&msg) {
            text.push_str(": ");
            text.push_str(&msg);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Inner {
        #[error("permission denied")]
        Denied,
    }

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("reading {path}")]
        Read {
            path: String,
            #[source]
            source: Inner,
        },
        #[error("opening the store")]
        Store(#[source] std::io::Error),
        #[error("legacy: {0}")]
        Repeats(#[source] Inner),
    }

    #[test]
    fn every_cause_is_printed_once_in_order() {
        let e = Outer::Read { path: "/etc/x".into(), source: Inner::Denied };
        assert_eq!(chain(&e), "reading /etc/x: permission denied");
        let io = std::io::Error::other(Outer::Read { path: "/d".into(), source: Inner::Denied });
        let e = Outer::Store(io);
        assert_eq!(chain(&e), "opening the store: reading /d: permission denied");
    }

    #[test]
    fn chain_joins_sources_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&e), "outer: inner");
    }

    #[test]
    fn a_message_that_still_prints_its_cause_is_not_doubled() {
        assert_eq!(chain(&Outer::Repeats(Inner::Denied)), "legacy: permission denied");
        assert_eq!(chain(&Inner::Denied), "permission denied");
    }
}
