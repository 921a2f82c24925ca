//! The log backend: one JSON line per event, written before the request goes on (upstream's
//! default `blocking` mode), to standard output (`-`) or to a file rotated as upstream's
//! lumberjack rotates it. A write that would take the file past `max_size` first renames it to
//! `<name>-<UTC time 2006-01-02T15-04-05.000><.ext>` and starts a new one; then the backups
//! beyond `max_backups` (newest kept) and those older than `max_age` (by the time in their
//! name) are removed. The file is created 0600 in a 0700 folder, as upstream creates it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Where events are written.
pub struct LogBackend {
    sink: Sink,
    /// Writes that failed: logged on the first and then every thousandth, so that a full disk
    /// does not flood the server's log.
    failures: AtomicU64,
}

enum Sink {
    Stdout,
    File(Mutex<RotatingFile>),
}

impl LogBackend {
    pub fn stdout() -> LogBackend {
        LogBackend { sink: Sink::Stdout, failures: AtomicU64::new(0) }
    }

    pub fn file(f: RotatingFile) -> LogBackend {
        LogBackend { sink: Sink::File(Mutex::new(f)), failures: AtomicU64::new(0) }
    }

    pub fn write(&self, line: &[u8]) {
        let result = match &self.sink {
            Sink::Stdout => std::io::stdout().lock().write_all(line),
            Sink::File(f) => f.lock().unwrap_or_else(|p| p.into_inner()).write(line),
        };
        if let Err(e) = result {
            let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 || n.is_multiple_of(1000) {
                tracing::error!(error = %e, failed = n, "writing audit events failed; they are lost");
            }
        }
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
