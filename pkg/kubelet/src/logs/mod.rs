//! Container logs: reading the CRI-format files the runtime writes under
//! `/var/log/pods/<ns>_<pod>_<uid>/<container>/<restartCount>.log` for `kubectl logs`, with
//! upstream's options (`tailLines`, `sinceSeconds`/`sinceTime`, `timestamps`, `limitBytes`,
//! `follow`). Fragments of a long line (`P` records) are joined into the line they belong to.
//!
//! Rotated files (see [`rotation`]: `<log>.<time>` and `<log>.<time>.gz` next to the log) hold
//! the earlier part of the same log: the whole log is read from the oldest of them on, and
//! `tailLines` reaches back into them (newest first) when the current file has fewer lines.
//!
//! Following works like `tail -F`: the reader waits at the end of the file, notices when the
//! file at the path is replaced (rotation) or truncated and starts over on the new one (after
//! reading what was still written to the old one), and stops once the container is no longer
//! running and everything it wrote has been sent.

pub mod format;
pub mod rotation;
pub mod tail;

use bytes::{Bytes, BytesMut};
use format::Record;
use jiff::Timestamp;
use std::future::Future;
use std::io::{BufRead as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncSeekExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long `open` waits for a log file that is missing, as it is for a moment while the file
/// is rotated (between the rename and the runtime's reopen).
const REOPEN_WAIT: Duration = Duration::from_millis(500);
/// How often a follower looks for new data at the end of the file.
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// How often a follower asks whether the container still runs (upstream's force-check period).
const RUNNING_CHECK: Duration = Duration::from_secs(1);
/// Output is sent in chunks of about this size (and at every pause while following).
const CHUNK: usize = 32 * 1024;

/// What `kubectl logs` asked for (upstream's `PodLogOptions` as the kubelet sees them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<u64>,
    pub limit_bytes: Option<u64>,
    /// Lines older than this are skipped (`sinceSeconds` resolved against now, or `sinceTime`,
    /// whichever is later).
    pub since: Option<Timestamp>,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid log option {name}={value:?}: {reason}")]
    InvalidOption { name: &'static str, value: String, reason: &'static str },
    #[error("failed to open log file {path:?}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("failed to tail {lines} lines of log file {path:?}")]
    Tail { path: PathBuf, lines: u64, source: std::io::Error },
    #[error("failed to read log file {path:?}")]
    Read { path: PathBuf, source: std::io::Error },
}

fn parse_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

impl LogOptions {
    /// Reads the kubelet's `containerLogs` query parameters (upstream also accepts `tail`,
    /// where `all` means no limit). `now` resolves `sinceSeconds`.
    pub fn from_query<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: Timestamp,
    ) -> Result<LogOptions, LogError> {
        let mut o = LogOptions::default();
        let mut since_seconds: Option<Timestamp> = None;
        let mut since_time: Option<Timestamp> = None;
        let number = |name: &'static str, v: &str, min: i64| -> Result<u64, LogError> {
            let n: i64 = v.parse().map_err(|_| LogError::InvalidOption {
                name,
                value: v.to_string(),
                reason: "not an integer",
            })?;
            if n < min {
                return Err(LogError::InvalidOption { name, value: v.to_string(), reason: "out of range" });
            }
            Ok(n as u64)
        };
        for (k, v) in pairs {
            match k {
                "follow" => o.follow = parse_bool(v),
                "previous" => o.previous = parse_bool(v),
                "timestamps" => o.timestamps = parse_bool(v),
                "tailLines" => o.tail_lines = Some(number("tailLines", v, 0)?),
                "tail" if v == "all" => o.tail_lines = None,
                "tail" => o.tail_lines = Some(number("tail", v, 0)?),
                "limitBytes" => o.limit_bytes = Some(number("limitBytes", v, 1)?),
                "sinceSeconds" => {
                    let s = number("sinceSeconds", v, 1)?;
                    let span = jiff::SignedDuration::from_secs(s.min(i64::MAX as u64 / 2) as i64);
                    since_seconds = Some(now.checked_sub(span).unwrap_or(Timestamp::MIN));
                }
                "sinceTime" => {
                    since_time = Some(v.parse().map_err(|_| LogError::InvalidOption {
                        name: "sinceTime",
                        value: v.to_string(),
                        reason: "not an RFC 3339 time",
                    })?)
                }
                _ => {}
            }
        }
        o.since = match (since_seconds, since_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(o)
    }
}

/// Whether the container whose log is being followed still runs.
pub trait RunningProbe: Send + Sync {
    fn running(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

/// An opened log, positioned where the requested output starts: the rotated files still to
/// read, then the current file.
pub struct LogReader {
    path: PathBuf,
    earlier: Vec<Segment>,
    file: tokio::fs::File,
    identity: (u64, u64),
    position: u64,
    opts: LogOptions,
}

/// A rotated file read before the current one, opened when the reader was (a later rotation
/// may rename, compress or delete it meanwhile).
struct Segment {
    path: PathBuf,
    file: std::fs::File,
    start: SegmentStart,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegmentStart {
    /// At this byte offset (a plain file).
    Offset(u64),
    /// After this many logical lines (a compressed file, read from its start).
    AfterLines(u64),
}

async fn open_at_start(path: &Path) -> Result<(tokio::fs::File, (u64, u64)), LogError> {
    let open = |source| LogError::Open { path: path.to_path_buf(), source };
    let file = tokio::fs::File::open(path).await.map_err(open)?;
    let meta = file.metadata().await.map_err(open)?;
    Ok((file, (meta.dev(), meta.ino())))
}

/// Resolves `path` (following symlinks), waiting a moment for a file being rotated.
async fn resolve(path: &Path) -> Result<PathBuf, LogError> {
    let deadline = Instant::now() + REOPEN_WAIT;
    loop {
        match tokio::fs::canonicalize(path).await {
            Ok(p) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(source) => return Err(LogError::Open { path: path.to_path_buf(), source }),
        }
    }
}

/// Opens the rotated files of `log` in use, oldest first. One compressed since it was listed is
/// opened under its new name; one gone is skipped.
fn open_rotated(log: &Path) -> Vec<(PathBuf, std::fs::File, bool)> {
    let files = match rotation::rotated_files(log) {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(path = %log.display(), error = %e, "listing rotated log files");
            return Vec::new();
        }
    };
    let (in_use, _) = rotation::split_in_use(files);
    let mut out = Vec::new();
    for p in in_use {
        let compressed = p.as_os_str().as_encoded_bytes().ends_with(rotation::GZ_SUFFIX.as_bytes());
        match std::fs::File::open(&p) {
            Ok(f) => out.push((p, f, compressed)),
            Err(_) if !compressed => {
                let mut gz = p.into_os_string();
                gz.push(rotation::GZ_SUFFIX);
                let gz = PathBuf::from(gz);
                if let Ok(f) = std::fs::File::open(&gz) {
                    out.push((gz, f, true));
                }
            }
            Err(_) => {}
        }
    }
    out
}

/// Where the output starts in the current file (`current` of length `len`) and in each rotated
/// file (oldest first); the rotated files not needed for the last `tail` lines are left out.
fn plan(
    current: &std::fs::File,
    len: u64,
    rotated: Vec<(PathBuf, std::fs::File, bool)>,
    tail: Option<u64>,
) -> std::io::Result<(u64, Vec<Segment>)> {
    let Some(n) = tail else {
        let earlier = rotated
            .into_iter()
            .map(|(path, file, compressed)| {
                let start = if compressed { SegmentStart::AfterLines(0) } else { SegmentStart::Offset(0) };
                Segment { path, file, start }
            })
            .collect();
        return Ok((0, earlier));
    };
    let found = tail::last_lines(current, len, n, false)?;
    let mut need = n - found.lines;
    // Fragments at the end of an older file begin a line a newer file ends (and counted).
    let mut continued = len > 0;
    // The output starts at the newer file's first byte: its first line may have begun in
    // the older file, whose trailing fragments then belong to the output too.
    let mut at_start = len > 0 && found.offset == 0;
    let mut earlier = Vec::new();
    for (path, mut file, compressed) in rotated.into_iter().rev() {
        if need == 0 && !at_start {
            break;
        }
        let fragments_only = need == 0;
        let (start, lines, nonempty, empty_output) = if compressed {
            let (total, ends_in_fragment) = {
                let mut r = std::io::BufReader::new(flate2::read::GzDecoder::new(&file));
                tail::count_lines(&mut r, continued)?
            };
            file.seek(SeekFrom::Start(0))?;
            let skip = total.saturating_sub(need);
            let empty = skip == total && !(continued && ends_in_fragment);
            (SegmentStart::AfterLines(skip), total - skip, total > 0 || ends_in_fragment, empty)
        } else {
            let flen = file.metadata()?.len();
            let t = tail::last_lines(&file, flen, need, continued)?;
            (SegmentStart::Offset(t.offset), t.lines, flen > 0, t.offset >= flen)
        };
        if !empty_output {
            at_start = match start {
                SegmentStart::Offset(o) => o == 0,
                SegmentStart::AfterLines(k) => k == 0,
            };
            earlier.push(Segment { path, file, start });
        }
        if fragments_only {
            break;
        }
        need -= lines.min(need);
        continued |= nonempty;
    }
    earlier.reverse();
    Ok((found.offset, earlier))
}

/// Sends a rotated file's records from its start point in chunks of whole records; ends early
/// when the receiver is gone.
fn read_segment(seg: Segment, tx: mpsc::Sender<Vec<u8>>) -> std::io::Result<()> {
    let Segment { mut file, start, .. } = seg;
    let mut reader: Box<dyn std::io::BufRead> = match start {
        SegmentStart::Offset(o) => {
            file.seek(SeekFrom::Start(o))?;
            Box::new(std::io::BufReader::with_capacity(CHUNK, file))
        }
        SegmentStart::AfterLines(k) => {
            let mut r = std::io::BufReader::with_capacity(CHUNK, flate2::read::GzDecoder::new(file));
            tail::skip_lines(&mut r, k)?;
            Box::new(r)
        }
    };
    loop {
        let mut chunk = Vec::with_capacity(CHUNK + 256);
        while chunk.len() < CHUNK {
            if reader.read_until(b'\n', &mut chunk)? == 0 {
                break;
            }
        }
        if chunk.is_empty() || tx.blocking_send(chunk).is_err() {
            return Ok(());
        }
    }
}

impl LogReader {
    /// Opens `path` (following symlinks) and its rotated files, and finds where the output
    /// starts: the oldest rotated file, or the start of the last `tailLines` lines.
    pub async fn open(path: &Path, opts: LogOptions) -> Result<LogReader, LogError> {
        let path = resolve(path).await?;
        let (file, identity) = open_at_start(&path).await?;
        let std_file = file.try_clone().await.map_err(|source| LogError::Open { path: path.clone(), source })?;
        let std_file = std_file.into_std().await;
        let (plan_path, tail) = (path.clone(), opts.tail_lines);
        let (position, earlier) = tokio::task::spawn_blocking(move || {
            let len = std_file.metadata()?.len();
            let rotated = open_rotated(&plan_path);
            plan(&std_file, len, rotated, tail)
        })
        .await
        .map_err(|e| LogError::Tail { path: path.clone(), lines: tail.unwrap_or(0), source: std::io::Error::other(e) })?
        .map_err(|source| LogError::Tail { path: path.clone(), lines: tail.unwrap_or(0), source })?;
        let mut reader = LogReader { path, earlier, file, identity, position, opts };
        reader
            .file
            .seek(SeekFrom::Start(position))
            .await
            .map_err(|source| LogError::Read { path: reader.path.clone(), source })?;
        Ok(reader)
    }

    /// Sends the log to `out` in chunks. Returns when the output is complete (end of file, or
    /// with `follow` once the container stopped), the byte limit is reached, or `out` closes.
    pub async fn stream(self, probe: &dyn RunningProbe, out: mpsc::Sender<Bytes>) -> Result<(), LogError> {
        let LogReader { path, earlier, file, mut identity, mut position, opts } = self;
        let read_err = |source| LogError::Read { path: path.clone(), source };
        let mut writer = Writer::new(&opts, out);
        for seg in earlier {
            let seg_path = seg.path.clone();
            let (tx, mut rx) = mpsc::channel::<Vec<u8>>(2);
            let task = tokio::task::spawn_blocking(move || read_segment(seg, tx));
            while let Some(chunk) = rx.recv().await {
                for raw in chunk.split_inclusive(|b| *b == b'\n') {
                    if writer.record(&seg_path, raw) == Flow::Done {
                        writer.flush().await;
                        return Ok(());
                    }
                }
                if writer.buf.len() >= CHUNK && !writer.flush().await {
                    return Ok(());
                }
            }
            task.await
                .map_err(|e| LogError::Read { path: seg_path.clone(), source: std::io::Error::other(e) })?
                .map_err(|source| LogError::Read { path: seg_path, source })?;
        }
        let mut reader = BufReader::with_capacity(CHUNK, file);
        let mut raw = Vec::new();
        let mut stop_at_eof = false;
        // The file at the path was replaced and the old one has been read to its end once
        // more since (the runtime may still have written to it while reopening).
        let mut drained = false;
        let mut last_check: Option<Instant> = None;
        loop {
            let n = reader.read_until(b'\n', &mut raw).await.map_err(read_err)?;
            position += n as u64;
            if raw.ends_with(b"\n") {
                if writer.record(&path, &raw) == Flow::Done {
                    writer.flush().await;
                    return Ok(());
                }
                raw.clear();
                if writer.buf.len() >= CHUNK && !writer.flush().await {
                    return Ok(());
                }
                continue;
            }
            // End of the file; `raw` holds a record still being written, if any.
            if !opts.follow || stop_at_eof {
                if !raw.is_empty() {
                    writer.record(&path, &raw);
                }
                writer.finish_line();
                writer.flush().await;
                return Ok(());
            }
            if !writer.flush().await {
                return Ok(());
            }
            if let Some(reopened) = replaced(&path, identity, position).await {
                match reopened {
                    Reopen::Replaced if !drained => {
                        drained = true;
                        continue;
                    }
                    Reopen::Replaced => match open_at_start(&path).await {
                        Ok((f, id)) => {
                            tracing::debug!(path = %path.display(), "log file replaced, following the new one");
                            if !raw.is_empty() {
                                writer.record(&path, &raw);
                                raw.clear();
                            }
                            reader = BufReader::with_capacity(CHUNK, f);
                            identity = id;
                            position = 0;
                            drained = false;
                            continue;
                        }
                        Err(e) => tracing::debug!(error = %e, "reopening a replaced log file"),
                    },
                    Reopen::Truncated => {
                        reader.seek(SeekFrom::Start(0)).await.map_err(read_err)?;
                        raw.clear();
                        position = 0;
                        continue;
                    }
                }
            }
            if last_check.is_none_or(|t| t.elapsed() >= RUNNING_CHECK) {
                last_check = Some(Instant::now());
                if !probe.running().await {
                    // Read whatever was written before it stopped, then end.
                    stop_at_eof = true;
                    continue;
                }
            }
            tokio::select! {
                _ = writer.out.closed() => return Ok(()),
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
            }
        }
    }
}

enum Reopen {
    Replaced,
    Truncated,
}

/// Whether the file at `path` is no longer the one open (rotated or re-created) or shrank
/// below what was read (truncated in place).
async fn replaced(path: &Path, identity: (u64, u64), position: u64) -> Option<Reopen> {
    let meta = tokio::fs::metadata(path).await.ok()?;
    if (meta.dev(), meta.ino()) != identity {
        return Some(Reopen::Replaced);
    }
    (meta.len() < position).then_some(Reopen::Truncated)
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Done,
}

/// Turns records into output: joins fragments, filters by time, prefixes timestamps, counts
/// bytes against `limitBytes`, and batches into chunks.
struct Writer {
    timestamps: bool,
    since: Option<Timestamp>,
    remaining: Option<u64>,
    /// The line being assembled from fragments: its first record's time and content so far.
    pending: Option<(Timestamp, Vec<u8>)>,
    buf: BytesMut,
    out: mpsc::Sender<Bytes>,
}

impl Writer {
    fn new(opts: &LogOptions, out: mpsc::Sender<Bytes>) -> Writer {
        Writer {
            timestamps: opts.timestamps,
            since: opts.since,
            remaining: opts.limit_bytes,
            pending: None,
            buf: BytesMut::new(),
            out,
        }
    }

    fn record(&mut self, path: &Path, raw: &[u8]) -> Flow {
        let rec: Record<'_> = match format::parse(raw) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "skipping a malformed log record");
                return Flow::Continue;
            }
        };
        match (&mut self.pending, rec.partial) {
            (Some((_, content)), true) => {
                content.extend_from_slice(rec.content);
                Flow::Continue
            }
            (None, true) => {
                self.pending = Some((rec.timestamp, rec.content.to_vec()));
                Flow::Continue
            }
            (Some(_), false) => {
                let (ts, mut content) = self.pending.take().unwrap_or((rec.timestamp, Vec::new()));
                content.extend_from_slice(rec.content);
                self.line(ts, &content)
            }
            (None, false) => self.line(rec.timestamp, rec.content),
        }
    }

    /// Emits a line still made only of fragments (the end of a non-following read).
    fn finish_line(&mut self) {
        if let Some((ts, content)) = self.pending.take() {
            self.line(ts, &content);
        }
    }

    fn line(&mut self, ts: Timestamp, content: &[u8]) -> Flow {
        if self.since.is_some_and(|s| ts < s) {
            return Flow::Continue;
        }
        let mut line = Vec::with_capacity(content.len() + 32);
        if self.timestamps {
            line.extend_from_slice(format::format_timestamp(ts).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(content);
        if let Some(rem) = self.remaining.as_mut() {
            let take = (line.len() as u64).min(*rem) as usize;
            self.buf.extend_from_slice(&line[..take]);
            *rem -= take as u64;
            if *rem == 0 {
                return Flow::Done;
            }
        } else {
            self.buf.extend_from_slice(&line);
        }
        Flow::Continue
    }

    /// Sends what is buffered; false once the receiver is gone.
    async fn flush(&mut self) -> bool {
        if self.buf.is_empty() {
            return !self.out.is_closed();
        }
        self.out.send(self.buf.split().freeze()).await.is_ok()
    }
}

#[cfg(test)]
mod tests;
