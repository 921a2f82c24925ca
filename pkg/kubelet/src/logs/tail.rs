//! Finding where the last N lines of a CRI log file start, reading it backwards in blocks so
//! that `tailLines` costs the size of the tail, not of the file.
//!
//! A line is a logical line: `P` fragments and the `F` record that ends them count once. A
//! trailing line still in progress (fragments without their `F` yet) counts as a line.

use super::format::is_partial;
use std::fs::File;
use std::io::{self, BufRead};
use std::os::unix::fs::FileExt;

const BLOCK: u64 = 64 * 1024;
/// Enough of a record's head to read its tag.
const HEAD: usize = 128;

/// Byte offset at which the last `n` logical lines of `file` (of length `len`) start.
pub fn start_of_last_lines(file: &File, len: u64, n: u64) -> io::Result<u64> {
    Ok(last_lines(file, len, n, false)?.offset)
}

/// Where the last lines of one file start, and how many there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailStart {
    /// Byte offset of the first of those lines.
    pub offset: u64,
    /// How many lines start there: `n`, or fewer when the file holds fewer.
    pub lines: u64,
}

/// Like [`start_of_last_lines`], also counting the lines found. With `continued`, fragments at
/// the end of the file are the start of a line that a newer file (the next one after a
/// rotation) ends and has already counted: they belong to the output but are not counted again.
///
/// With `n == 0` and `continued`, the answer is where those trailing fragments start (the
/// file's length when it ends with a full record).
pub fn last_lines(file: &File, len: u64, n: u64, continued: bool) -> io::Result<TailStart> {
    if n == 0 && !continued {
        return Ok(TailStart { offset: len, lines: 0 });
    }
    let mut fulls_after = 0u64; // F records seen so far, walking backwards
    let mut trailing_partial: Option<bool> = continued.then_some(false);
    // Raw lines end just before `line_end` (exclusive, past the `\n`); a raw line starts one
    // byte after the previous `\n`.
    let mut line_end = len;
    let mut scan_to = len;
    // The file's final `\n` ends the last raw line; it does not start an empty one.
    if len > 0 && read_byte(file, len - 1)? == b'\n' {
        scan_to = len - 1;
    }
    let mut block = vec![0u8; BLOCK as usize];
    while scan_to > 0 {
        let from = scan_to.saturating_sub(BLOCK);
        let buf = &mut block[..(scan_to - from) as usize];
        file.read_exact_at(buf, from)?;
        for i in (0..buf.len()).rev() {
            if buf[i] != b'\n' {
                continue;
            }
            let start = from + i as u64 + 1;
            if let Some(offset) = visit(file, start, line_end, &mut fulls_after, &mut trailing_partial, n)? {
                return Ok(TailStart { offset, lines: n });
            }
            line_end = start;
        }
        scan_to = from;
    }
    match visit(file, 0, line_end, &mut fulls_after, &mut trailing_partial, n)? {
        Some(offset) => Ok(TailStart { offset, lines: n }),
        None => Ok(TailStart { offset: 0, lines: fulls_after + u64::from(trailing_partial.unwrap_or(false)) }),
    }
}

/// Looks at the raw line `[start, end)`; returns the answer once `n` lines follow a full record.
fn visit(
    file: &File,
    start: u64,
    end: u64,
    fulls_after: &mut u64,
    trailing_partial: &mut Option<bool>,
    n: u64,
) -> io::Result<Option<u64>> {
    if start >= end {
        return Ok(None);
    }
    let mut head = [0u8; HEAD];
    let take = (end - start).min(HEAD as u64) as usize;
    file.read_exact_at(&mut head[..take], start)?;
    let partial = is_partial(&head[..take]);
    let trailing = *trailing_partial.get_or_insert(partial);
    if !partial {
        // Everything after this record's end: the full lines seen so far, plus the line in
        // progress at the end of the file.
        if *fulls_after + u64::from(trailing) == n {
            return Ok(Some(end));
        }
        *fulls_after += 1;
    }
    Ok(None)
}

/// Counts the logical lines of a log read from the start (a compressed rotated file, which
/// cannot be read backwards): the full records, plus one for fragments at the end unless
/// `continued` (see [`last_lines`]); and whether it ends with fragments.
pub fn count_lines(reader: &mut impl BufRead, continued: bool) -> io::Result<(u64, bool)> {
    let mut fulls = 0u64;
    let mut trailing = false;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        let partial = is_partial(&raw[..raw.len().min(HEAD)]);
        if !partial {
            fulls += 1;
        }
        trailing = partial;
    }
    Ok((fulls + u64::from(trailing && !continued), trailing))
}

/// Reads past the first `lines` logical lines of a log read from the start: after it, the
/// reader is at the start of line `lines + 1` (the counterpart of [`count_lines`]).
pub fn skip_lines(reader: &mut impl BufRead, lines: u64) -> io::Result<()> {
    let mut ended = 0u64;
    let mut raw = Vec::new();
    while ended < lines {
        raw.clear();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        if !is_partial(&raw[..raw.len().min(HEAD)]) {
            ended += 1;
        }
    }
    Ok(())
}

fn read_byte(file: &File, at: u64) -> io::Result<u8> {
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at)?;
    Ok(b[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn file_with(contents: &str) -> (tempfile::NamedTempFile, u64) {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        f.write_all(contents.as_bytes()).expect("write");
        let len = contents.len() as u64;
        (f, len)
    }

    fn tail(contents: &str, n: u64) -> String {
        let (f, len) = file_with(contents);
        let start = start_of_last_lines(f.as_file(), len, n).expect("tail");
        contents[start as usize..].to_string()
    }

    const T: &str = "2026-11-29T21:00:00Z";

    #[test]
    fn tail_counts_full_records() {
        let log = format!("{T} stdout F a\n{T} stdout F b\n{T} stderr F c\n");
        assert_eq!(tail(&log, 1), format!("{T} stderr F c\n"));
        assert_eq!(tail(&log, 2), format!("{T} stdout F b\n{T} stderr F c\n"));
        assert_eq!(tail(&log, 3), log);
        assert_eq!(tail(&log, 10), log);
        assert_eq!(tail(&log, 0), "");
        assert_eq!(tail("", 5), "");
    }

    #[test]
    fn tail_keeps_fragments_with_their_line() {
        let log = format!("{T} stdout F a\n{T} stdout P b1\n{T} stdout P b2\n{T} stdout F b3\n{T} stdout F c\n");
        assert_eq!(tail(&log, 2), format!("{T} stdout P b1\n{T} stdout P b2\n{T} stdout F b3\n{T} stdout F c\n"));
    }

    #[test]
    fn a_line_in_progress_at_the_end_counts_as_one() {
        let log = format!("{T} stdout F a\n{T} stdout F b\n{T} stdout P c1\n");
        assert_eq!(tail(&log, 1), format!("{T} stdout P c1\n"));
        assert_eq!(tail(&log, 2), format!("{T} stdout F b\n{T} stdout P c1\n"));
    }

    #[test]
    fn an_unterminated_last_record_is_a_line() {
        let log = format!("{T} stdout F a\n{T} stdout F b");
        assert_eq!(tail(&log, 1), format!("{T} stdout F b"));
    }

    #[test]
    fn fragments_ending_a_rotated_file_are_not_counted_again() {
        let log = format!("{T} stdout F a\n{T} stdout F b\n{T} stdout P c1\n");
        let (f, len) = file_with(&log);
        let at = |n, continued| last_lines(f.as_file(), len, n, continued).expect("tail");
        assert_eq!(
            at(1, false),
            TailStart { offset: log.find("2026-11-29T21:00:00Z stdout P").expect("P") as u64, lines: 1 }
        );
        let b = log.find("2026-11-29T21:00:00Z stdout F b").expect("b") as u64;
        assert_eq!(at(1, true), TailStart { offset: b, lines: 1 }, "the fragment goes with the newer file's line");
        assert_eq!(at(9, true), TailStart { offset: 0, lines: 2 });
        let p = log.find("2026-11-29T21:00:00Z stdout P").expect("P") as u64;
        assert_eq!(at(0, true), TailStart { offset: p, lines: 0 }, "only the fragments");
        assert_eq!(at(0, false), TailStart { offset: len, lines: 0 });
    }

    #[test]
    fn counting_and_skipping_from_the_start_match_tail() {
        let log = format!("{T} stdout P a1\n{T} stdout F a2\n{T} stdout F b\n{T} stdout P c1\n");
        let count = |continued| count_lines(&mut log.as_bytes(), continued).expect("count");
        assert_eq!(count(false), (3, true));
        assert_eq!(count(true), (2, true));
        let rest = |k| {
            let mut r = log.as_bytes();
            skip_lines(&mut r, k).expect("skip");
            String::from_utf8(r.to_vec()).expect("utf8")
        };
        assert_eq!(rest(0), log);
        assert_eq!(rest(1), format!("{T} stdout F b\n{T} stdout P c1\n"));
        assert_eq!(rest(2), format!("{T} stdout P c1\n"));
        assert_eq!(rest(5), "");
    }

    #[test]
    fn tail_spans_read_blocks() {
        let mut log = String::new();
        for i in 0..20_000 {
            log.push_str(&format!("{T} stdout F line {i}\n"));
        }
        assert!(log.len() as u64 > 3 * BLOCK);
        let out = tail(&log, 12_345);
        assert_eq!(out.lines().count(), 12_345);
        assert!(out.starts_with(&format!("{T} stdout F line {}\n", 20_000 - 12_345)));
    }
}
