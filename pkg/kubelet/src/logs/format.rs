//! The CRI container log format: one record per line,
//! `<RFC3339Nano timestamp> <stdout|stderr> <tag> <content>`, where the tag is `F` for a full
//! line and `P` for a fragment of a line the runtime split (the content of a `P` record carries
//! no line end of its own; the records up to the next `F` make one line).

use jiff::Timestamp;

/// Which output of the container a record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub timestamp: Timestamp,
    pub stream: Stream,
    /// A fragment (`P`): the line continues in the next record.
    pub partial: bool,
    /// The content; a full record keeps its trailing `\n`, a fragment has none.
    pub content: &'a [u8],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("parsing a log record: no {0} field")]
    MissingField(&'static str),
    #[error("parsing a log record: timestamp {0:?} is not RFC 3339")]
    Timestamp(String),
    #[error("parsing a log record: unexpected stream type {0:?}")]
    Stream(String),
}

fn split_field<'a>(rest: &'a [u8], name: &'static str) -> Result<(&'a [u8], &'a [u8]), ParseError> {
    let i = rest.iter().position(|b| *b == b' ').ok_or(ParseError::MissingField(name))?;
    Ok((&rest[..i], &rest[i + 1..]))
}

/// Parses one raw line of a CRI log file (with or without its trailing `\n`).
pub fn parse(line: &[u8]) -> Result<Record<'_>, ParseError> {
    let (ts, rest) = split_field(line, "timestamp")?;
    let ts_str = String::from_utf8_lossy(ts);
    let timestamp: Timestamp = ts_str.parse().map_err(|_| ParseError::Timestamp(ts_str.to_string()))?;
    let (stream, rest) = split_field(rest, "stream type")?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        other => return Err(ParseError::Stream(String::from_utf8_lossy(other).into_owned())),
    };
    let (tags, mut content) = split_field(rest, "log tag")?;
    // Tags are `:`-separated for forward compatibility; the first says full or partial.
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    if partial {
        if let Some(stripped) = content.strip_suffix(b"\n") {
            content = stripped;
        }
    }
    Ok(Record { timestamp, stream, partial, content })
}

/// Whether a raw line is a fragment (`P`) without parsing its timestamp: used when scanning
/// a file backwards for `tailLines`. Unparseable lines count as full lines.
pub fn is_partial(line: &[u8]) -> bool {
    let mut fields = line.splitn(4, |b| *b == b' ');
    let (_, _, tags) = (fields.next(), fields.next(), fields.next());
    matches!(tags, Some(t) if t.split(|b| *b == b':').next() == Some(b"P")) && fields.next().is_some()
}

/// Upstream's `RFC3339NanoFixed` in UTC: always nine fractional digits.
pub fn format_timestamp(ts: Timestamp) -> String {
    format!("{}.{:09}Z", ts.strftime("%Y-%m-%dT%H:%M:%S"), ts.subsec_nanosecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_record_keeps_its_newline_and_partial_loses_it() {
        let r = parse(b"2026-11-29T21:00:00.123456789Z stdout F hello world\n").expect("parse");
        assert_eq!(r.stream, Stream::Stdout);
        assert!(!r.partial);
        assert_eq!(r.content, b"hello world\n");
        assert_eq!(format_timestamp(r.timestamp), "2026-11-29T21:00:00.123456789Z");
        let p = parse(b"2026-11-29T21:00:00.5Z stderr P part\n").expect("parse");
        assert!(p.partial);
        assert_eq!(p.stream, Stream::Stderr);
        assert_eq!(p.content, b"part");
        assert_eq!(format_timestamp(p.timestamp), "2026-11-29T21:00:00.500000000Z");
    }

    #[test]
    fn content_may_contain_spaces_and_be_empty() {
        let r = parse(b"2026-11-29T21:00:00Z stdout F  a  b \n").expect("parse");
        assert_eq!(r.content, b" a  b \n");
        let e = parse(b"2026-11-29T21:00:00Z stdout F \n").expect("parse");
        assert_eq!(e.content, b"\n");
    }

    #[test]
    fn offsets_are_normalised_to_utc() {
        let r = parse(b"2026-11-29T22:00:00.000000001+01:00 stdout F x\n").expect("parse");
        assert_eq!(format_timestamp(r.timestamp), "2026-11-29T21:00:00.000000001Z");
    }

    #[test]
    fn malformed_records_are_rejected_with_the_field_named() {
        assert_eq!(parse(b"garbage"), Err(ParseError::MissingField("timestamp")));
        assert!(matches!(parse(b"yesterday stdout F x"), Err(ParseError::Timestamp(_))));
        assert!(matches!(parse(b"2026-11-29T21:00:00Z stdin F x"), Err(ParseError::Stream(_))));
        assert_eq!(parse(b"2026-11-29T21:00:00Z stdout F"), Err(ParseError::MissingField("log tag")));
    }

    #[test]
    fn partial_detection_without_timestamp_parsing() {
        assert!(is_partial(b"2026-11-29T21:00:00Z stdout P abc\n"));
        assert!(is_partial(b"2026-11-29T21:00:00Z stdout P:x abc\n"));
        assert!(!is_partial(b"2026-11-29T21:00:00Z stdout F abc\n"));
        assert!(!is_partial(b"junk"));
    }
}
