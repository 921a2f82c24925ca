//! The log backend: one JSON line per event, to standard output (`-`) or to a file. In
//! upstream's default `blocking` mode ([`LogMode::Blocking`]) each event is written before the
//! request goes on; in `batch` mode ([`LogMode::Batch`]) it is queued (at most
//! `--audit-log-batch-buffer-size` events; past that they are dropped and the server log says
//! how many) and a writer thread writes what has queued up within 10 ms with one system call,
//! sleeping while there is nothing (`cargo bench -p k1s --bench authz` compares the two). The file is rotated as upstream's
//! lumberjack rotates it. A write that would take the file past `max_size` first renames it to
//! `<name>-<UTC time 2006-01-02T15-04-05.000><.ext>` and starts a new one; then the backups
//! beyond `max_backups` (newest kept) and those older than `max_age` (by the time in their
//! name) are removed. The file is created 0600 in a 0700 folder, as upstream creates it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// `--audit-log-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogMode {
    /// Each event is written before the request goes on (upstream's default).
    #[default]
    Blocking,
    /// Events are queued and written by a thread of their own.
    Batch,
}

impl std::str::FromStr for LogMode {
    type Err = String;

    fn from_str(s: &str) -> Result<LogMode, String> {
        match s {
            "blocking" => Ok(LogMode::Blocking),
            "batch" => Ok(LogMode::Batch),
            "blocking-strict" => Err("blocking-strict is not supported by k1s; use blocking or batch".into()),
            other => Err(format!("invalid audit log mode {other:?}, allowed modes are \"batch,blocking\"")),
        }
    }
}

/// Upstream's `--audit-log-batch-buffer-size` default.
pub const DEFAULT_BATCH_BUFFER: usize = 10_000;

/// The most bytes the batch writer puts in one write.
const MAX_CHUNK: usize = 256 * 1024;

/// Where events are written.
pub struct LogBackend {
    sink: Sink,
    /// Writes that failed: logged on the first and then every thousandth, so that a full disk
    /// does not flood the server's log.
    failures: AtomicU64,
}

enum Sink {
    Direct(Mutex<Output>),
    Queued(Arc<Queue>),
}

/// Where lines end up.
pub enum Output {
    Stdout,
    File(RotatingFile),
}

impl Output {
    /// The most bytes one write may carry: a rotated file must not be passed more than it holds.
    fn chunk_limit(&self) -> usize {
        match self {
            Output::Stdout => MAX_CHUNK,
            Output::File(f) => MAX_CHUNK.min(usize::try_from(f.rotation.max_size).unwrap_or(MAX_CHUNK)),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout => std::io::stdout().lock().write_all(bytes),
            Output::File(f) => f.write(bytes),
        }
    }
}

/// Batch mode's queue: requests append their lines to `pending` (no system call; a wake-up only
/// when the writer sleeps with nothing to do); the writer thread then lets lines queue up for
/// [`BATCH_INTERVAL`] (less once a chunk's worth is there) and writes them with as few writes as
/// the rotation allows. Idle, it sleeps until the next line.
struct Queue {
    pending: Mutex<Pending>,
    /// Taken while `pending` is still held and kept while the lines are written, so that a
    /// flush and the writer never reorder them (lock order: `pending`, then `out`).
    out: Mutex<Output>,
    wake: Condvar,
    capacity: usize,
    dropped: AtomicU64,
    failures: AtomicU64,
    closed: AtomicBool,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    /// The writer sleeps until a line comes.
    idle: bool,
}

/// How long batch mode lets lines queue up before it writes them.
const BATCH_INTERVAL: Duration = Duration::from_millis(10);

impl Queue {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, line: &[u8]) {
        let mut p = self.lock_pending();
        if p.ends.len() >= self.capacity {
            drop(p);
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 || n.is_multiple_of(1000) {
                tracing::error!(dropped = n, "the audit log's buffer is full; events are dropped");
            }
            return;
        }
        p.bytes.extend_from_slice(line);
        let end = p.bytes.len();
        p.ends.push(end);
        if p.idle || end >= MAX_CHUNK {
            p.idle = false;
            self.wake.notify_one();
        }
    }

    /// The writer thread's loop, until the backend is dropped.
    fn run(&self) {
        while !self.closed.load(Ordering::Acquire) {
            let mut p = self.lock_pending();
            while p.bytes.is_empty() && !self.closed.load(Ordering::Acquire) {
                p.idle = true;
                p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            p.idle = false;
            if p.bytes.len() < MAX_CHUNK && !self.closed.load(Ordering::Acquire) {
                p = self.wake.wait_timeout(p, BATCH_INTERVAL).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
            }
            self.write_out(p);
        }
    }

    /// Writes out what is queued now.
    fn flush(&self) {
        self.write_out(self.lock_pending());
    }

    /// Takes the queued lines (then lets go of `pending`) and writes them.
    fn write_out(&self, mut p: std::sync::MutexGuard<'_, Pending>) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let taken = Pending { bytes: std::mem::take(&mut p.bytes), ends: std::mem::take(&mut p.ends), idle: false };
        drop(p);
        let limit = out.chunk_limit();
        let mut start = 0;
        while start < taken.bytes.len() {
            // As many whole lines as fit in one write (a longer line alone, for the file to refuse).
            let first_end = taken.ends.partition_point(|e| *e <= start);
            let mut end = taken.ends.get(first_end).copied().unwrap_or(taken.bytes.len());
            for e in &taken.ends[first_end..] {
                if *e - start > limit {
                    break;
                }
                end = *e;
            }
            if let Err(e) = out.write(&taken.bytes[start..end]) {
                report_failure(&self.failures, &e);
            }
            start = end;
        }
    }
}

impl LogBackend {
    pub fn new(out: Output, mode: LogMode, buffer: usize) -> std::io::Result<LogBackend> {
        let sink = match mode {
            LogMode::Blocking => Sink::Direct(Mutex::new(out)),
            LogMode::Batch => {
                let queue = Arc::new(Queue {
                    pending: Mutex::default(),
                    out: Mutex::new(out),
                    wake: Condvar::new(),
                    capacity: buffer.max(1),
                    dropped: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    closed: AtomicBool::new(false),
                });
                let q = queue.clone();
                std::thread::Builder::new().name("k1s-audit-log".into()).spawn(move || q.run())?;
                Sink::Queued(queue)
            }
        };
        Ok(LogBackend { sink, failures: AtomicU64::new(0) })
    }

    pub fn write(&self, line: &[u8]) {
        match &self.sink {
            Sink::Direct(out) => {
                let result = out.lock().unwrap_or_else(|p| p.into_inner()).write(line);
                if let Err(e) = result {
                    report_failure(&self.failures, &e);
                }
            }
            Sink::Queued(q) => q.push(line),
        }
    }

    /// Writes out what batch mode has queued (nothing to do in blocking mode).
    pub fn flush(&self) {
        if let Sink::Queued(q) = &self.sink {
            q.flush();
        }
    }
}

impl Drop for LogBackend {
    fn drop(&mut self) {
        if let Sink::Queued(q) = &self.sink {
            q.closed.store(true, Ordering::Release);
            // Under the lock, so that the writer cannot miss it between its check and its wait.
            drop(q.lock_pending());
            q.wake.notify_one();
            q.flush();
        }
    }
}

/// Failures are logged on the first and then every thousandth, so that a full disk does not
/// flood the server's log.
fn report_failure(failures: &AtomicU64, e: &std::io::Error) {
    let n = failures.fetch_add(1, Ordering::Relaxed) + 1;
    if n == 1 || n.is_multiple_of(1000) {
        tracing::error!(error = %e, failed = n, "writing audit events failed; they are lost");
    }
}

/// How the audit log file rotates (`--audit-log-maxsize`, `-maxbackup`, `-maxage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a write would take the file past this many bytes.
    pub max_size: u64,
    /// Backups kept; 0 keeps all.
    pub max_backups: usize,
    /// Backups older than this are removed; `None` keeps them.
    pub max_age: Option<Duration>,
}

impl Rotation {
    /// From the flags' units: megabytes (0 is lumberjack's default of 100) and days (0 keeps
    /// every backup however old).
    pub fn from_flags(max_size_mb: u64, max_backups: usize, max_age_days: u64) -> Rotation {
        let mb = if max_size_mb == 0 { 100 } else { max_size_mb };
        Rotation {
            max_size: mb.saturating_mul(1024 * 1024),
            max_backups,
            max_age: (max_age_days > 0).then(|| Duration::from_secs(max_age_days.saturating_mul(24 * 3600))),
        }
    }
}

/// The current log file.
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: Option<File>,
    size: u64,
    /// The clock backup names and ages are read from.
    now: fn() -> jiff::Timestamp,
}

/// Lumberjack's backup time format, in UTC.
fn backup_time(t: jiff::Timestamp) -> String {
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}-{:02}-{:02}.{:03}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond() / 1_000_000
    )
}

fn parse_backup_time(s: &str) -> Option<jiff::Timestamp> {
    // 2006-01-02T15-04-05.000
    let b = s.as_bytes();
    if b.len() != 23 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b'-' || b[16] != b'-' || b[19] != b'.'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i32>().ok());
    let date =
        jiff::civil::date(i16::try_from(n(0..4)?).ok()?, i8::try_from(n(5..7)?).ok()?, i8::try_from(n(8..10)?).ok()?);
    let time = jiff::civil::Time::new(
        i8::try_from(n(11..13)?).ok()?,
        i8::try_from(n(14..16)?).ok()?,
        i8::try_from(n(17..19)?).ok()?,
        n(20..23)? * 1_000_000,
    )
    .ok()?;
    jiff::tz::Offset::UTC.to_timestamp(date.to_datetime(time)).ok()
}

impl RotatingFile {
    /// Creates the file (and its folder) if need be, so that a path that cannot be written stops
    /// the server at start.
    pub fn open(path: &Path, rotation: Rotation) -> std::io::Result<RotatingFile> {
        Self::open_with_clock(path, rotation, jiff::Timestamp::now)
    }

    fn open_with_clock(path: &Path, rotation: Rotation, now: fn() -> jiff::Timestamp) -> std::io::Result<RotatingFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile { path: path.to_path_buf(), rotation, file: Some(file), size, now })
    }

    /// Writes one line, rotating first if it would not fit.
    pub fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        let len = line.len() as u64;
        if len > self.rotation.max_size {
            return Err(std::io::Error::other(format!(
                "write length {len} exceeds maximum file size {}",
                self.rotation.max_size
            )));
        }
        if self.file.is_none() || self.size + len > self.rotation.max_size {
            self.rotate()?;
        }
        let Some(file) = self.file.as_mut() else { return Err(std::io::Error::other("no audit log file")) };
        let written = file.write_all(line);
        if written.is_ok() {
            self.size += len;
        } else {
            // Reopened (and rotated if need be) on the next write.
            self.file = None;
        }
        written
    }

    /// Moves the current file aside and starts a new one, then removes the backups the
    /// rotation settings do not keep.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        let mut mode = 0o600;
        if let Ok(meta) = std::fs::metadata(&self.path) {
            use std::os::unix::fs::PermissionsExt as _;
            mode = meta.permissions().mode() & 0o777;
            let (prefix, ext) = self.prefix_and_ext();
            let backup = self.path.with_file_name(format!("{prefix}{}{ext}", backup_time((self.now)())));
            std::fs::rename(&self.path, &backup)?;
        }
        let file = OpenOptions::new().create(true).write(true).truncate(true).mode(mode).open(&self.path)?;
        self.file = Some(file);
        self.size = 0;
        if let Err(e) = self.remove_old_backups() {
            tracing::warn!(error = %e, path = %self.path.display(), "removing old audit log backups failed");
        }
        Ok(())
    }

    /// `audit-` and `.log` for `audit.log`.
    fn prefix_and_ext(&self) -> (String, String) {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match name.rfind('.').filter(|i| *i > 0) {
            Some(i) => (format!("{}-", &name[..i]), name[i..].to_string()),
            None => (format!("{name}-"), String::new()),
        }
    }

    /// The backups beside the current file, newest first.
    fn backups(&self) -> std::io::Result<Vec<(jiff::Timestamp, PathBuf)>> {
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        let (prefix, ext) = self.prefix_and_ext();
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(true) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let stamp =
                name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(ext.as_str())).and_then(parse_backup_time);
            if let Some(t) = stamp {
                out.push((t, entry.path()));
            }
        }
        out.sort_by_key(|b| std::cmp::Reverse(b.0));
        Ok(out)
    }

    fn remove_old_backups(&self) -> std::io::Result<()> {
        if self.rotation.max_backups == 0 && self.rotation.max_age.is_none() {
            return Ok(());
        }
        let backups = self.backups()?;
        let cutoff = self.rotation.max_age.and_then(|age| (self.now)().checked_sub(age).ok());
        for (i, (t, path)) in backups.iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && i >= self.rotation.max_backups;
            let too_old = cutoff.is_some_and(|c| *t < c);
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};

    /// A clock that moves one second per reading, from 2026-12-07T10:00:00Z.
    static TICKS: AtomicI64 = AtomicI64::new(0);
    fn ticking() -> jiff::Timestamp {
        let n = TICKS.fetch_add(1, Ordering::Relaxed);
        jiff::Timestamp::from_second(1_796_637_600 + n).expect("time")
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn batch_mode_writes_every_line_in_order_and_drops_past_its_buffer() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit.log");
        let rotation = Rotation::from_flags(0, 0, 0);
        let file = RotatingFile::open(&path, rotation.clone()).expect("open");
        let log = LogBackend::new(Output::File(file), LogMode::Batch, 100_000).expect("backend");
        let lines: Vec<String> = (0..20_000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
        std::thread::scope(|s| {
            for half in lines.chunks(10_000) {
                let log = &log;
                s.spawn(move || half.iter().for_each(|l| log.write(l.as_bytes())));
            }
        });
        log.flush();
        let text = std::fs::read_to_string(&path).expect("read");
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 20_000, "every line, whole");
        // Each writer's lines keep their order.
        for half in [0..10_000, 10_000..20_000] {
            let mine: Vec<&str> = got
                .iter()
                .copied()
                .filter(|l| l[5..l.len() - 1].parse::<usize>().is_ok_and(|n| half.contains(&n)))
                .collect();
            let want: Vec<&str> = lines[half].iter().map(|l| l.trim_end()).collect();
            assert_eq!(mine, want);
        }

        // A small buffer the writer cannot empty in time: later events are dropped, never blocked.
        let full_path = dir.path().join("full.log");
        let file = RotatingFile::open(&full_path, rotation).expect("open");
        let log = LogBackend::new(Output::File(file), LogMode::Batch, 100).expect("backend");
        for l in &lines {
            log.write(l.as_bytes());
        }
        log.flush();
        let kept = std::fs::read_to_string(&full_path).expect("read").lines().count();
        assert!((100..20_000).contains(&kept), "{kept}");
        let Sink::Queued(q) = &log.sink else { panic!("batch mode") };
        assert_eq!(
            q.dropped.load(Ordering::Relaxed) as usize + kept,
            20_000,
            "each line written or counted as dropped"
        );

        // Lines are cut at line ends to fit a small file's rotation, and dropping the backend
        // writes out what is queued.
        let small = dir.path().join("small.log");
        let file = RotatingFile::open(&small, Rotation { max_size: 25, max_backups: 0, max_age: None }).expect("open");
        let log = LogBackend::new(Output::File(file), LogMode::Batch, 100).expect("backend");
        for i in 0..10 {
            log.write(format!("line {i:04}\n").as_bytes());
        }
        drop(log);
        let all: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("small")))
            .flat_map(|p| std::fs::read_to_string(p).expect("read").lines().map(str::to_string).collect::<Vec<_>>())
            .collect();
        // (Backups made within one millisecond share a name, as lumberjack's do: some may be gone.)
        let want: Vec<String> = (0..10).map(|i| format!("line {i:04}")).collect();
        assert!(all.iter().all(|l| want.contains(l)), "only whole lines: {all:?}");
        let current = std::fs::read_to_string(&small).expect("read");
        assert!(current.ends_with("line 0009\n") && current.len() <= 25, "{current:?}");
    }

    #[test]
    fn an_idle_batch_writer_wakes_for_the_next_line() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit.log");
        let file = RotatingFile::open(&path, Rotation::from_flags(0, 0, 0)).expect("open");
        let log = LogBackend::new(Output::File(file), LogMode::Batch, 100).expect("backend");
        for n in 1..=3 {
            // Long enough for the writer to be asleep with nothing queued.
            std::thread::sleep(Duration::from_millis(50));
            log.write(format!("line {n}\n").as_bytes());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::fs::read_to_string(&path).expect("read").lines().count() < n {
                assert!(std::time::Instant::now() < deadline, "line {n} was never written without a flush");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    #[test]
    fn log_modes_are_upstreams() {
        assert_eq!("blocking".parse(), Ok(LogMode::Blocking));
        assert_eq!("batch".parse(), Ok(LogMode::Batch));
        assert!("blocking-strict".parse::<LogMode>().is_err_and(|e| e.contains("not supported")));
        assert!("fast".parse::<LogMode>().is_err());
    }

    #[test]
    fn a_full_file_is_renamed_with_lumberjacks_time_and_old_backups_go() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("logs/audit.log");
        let rotation = Rotation { max_size: 25, max_backups: 2, max_age: None };
        let mut f = RotatingFile::open_with_clock(&path, rotation, ticking).expect("open");
        for i in 0..10 {
            f.write(format!("line {i:04}\n").as_bytes()).expect("write");
        }
        // 10 bytes a line, 2 lines a file: 5 files were filled, the last is current.
        let got = names(&dir.path().join("logs"));
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.contains(&"audit.log".to_string()));
        let backups: Vec<&String> = got.iter().filter(|n| *n != "audit.log").collect();
        for b in &backups {
            let stamp = b.strip_prefix("audit-").and_then(|r| r.strip_suffix(".log")).expect("lumberjack name");
            assert!(parse_backup_time(stamp).is_some(), "{b}");
            assert_eq!(stamp.len(), "2006-01-02T15-04-05.000".len());
        }
        // The newest backups are kept: the lines just before the current file's.
        let newest = std::fs::read_to_string(dir.path().join("logs").join(backups[1])).expect("read");
        assert_eq!(newest, "line 0006\nline 0007\n");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "line 0008\nline 0009\n");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(dir.path().join("logs")).expect("meta").permissions().mode() & 0o777, 0o700);
        assert!(f.write(&[b'x'; 26]).is_err(), "a line longer than the maximum is refused");
    }

    #[test]
    fn backups_older_than_max_age_are_removed_and_others_left_alone() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit");
        std::fs::write(dir.path().join("audit-2020-01-01T00-00-00.000"), "old\n").expect("old backup");
        std::fs::write(dir.path().join("audit-notatime"), "kept\n").expect("other file");
        let rotation = Rotation::from_flags(1, 0, 30);
        assert_eq!(rotation.max_size, 1024 * 1024);
        let mut f = RotatingFile::open(&path, Rotation { max_size: 4, ..rotation }).expect("open");
        f.write(b"abc\n").expect("write");
        f.write(b"def\n").expect("write");
        let got = names(dir.path());
        assert!(!got.iter().any(|n| n.starts_with("audit-2020")), "{got:?}");
        assert!(got.contains(&"audit-notatime".to_string()));
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(Rotation::from_flags(0, 0, 0), Rotation { max_size: 100 << 20, max_backups: 0, max_age: None });
    }

    #[test]
    fn appends_to_an_existing_file_counting_its_size() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "12345678\n").expect("existing");
        let mut f = RotatingFile::open(&path, Rotation { max_size: 12, max_backups: 0, max_age: None }).expect("open");
        f.write(b"ab\n").expect("fits");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "12345678\nab\n");
        f.write(b"c\n").expect("rotates");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "c\n");
        assert_eq!(names(dir.path()).len(), 2);
    }
}
