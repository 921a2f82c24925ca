//! Container log rotation, as upstream's kubelet does it (`pkg/kubelet/logs/container_log_manager.go`).
//!
//! Every `monitor_interval` the running containers are queued and a pool of `workers` checks
//! each one's log file. A file that reached `max_size` is renamed to `<log>.<YYYYMMDD-HHMMSS>`
//! (UTC) and the runtime is told to reopen it (CRI `ReopenContainerLog`), so the container goes
//! on writing to a fresh file at the same path. Before that rename, files of earlier rotations
//! are pruned (oldest first) to `max_files - 2` and compressed with gzip (`<log>.<time>.gz`): the
//! newest rotated file stays plain so that a reader still following it can finish, and at most
//! `max_files` files exist per container (the current one, the newest rotated one, and
//! `max_files - 2` compressed ones). Leftovers of an interrupted rotation (`*.tmp`, a plain file
//! next to its `.gz`) are removed. When the reopen fails the file is renamed back, to be tried
//! again next time. A missing log file is reopened (the runtime creates it again).

use futures::StreamExt as _;
use jiff::Timestamp;
use k1s_api::errors::chain;
use k1s_cri::v1 as cri;
use k1s_cri::{CriError, RuntimeService};
use std::io;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Upstream's defaults (`containerLogMaxSize`, `containerLogMaxFiles`, `containerLogMaxWorkers`,
/// `containerLogMonitorInterval`).
pub const DEFAULT_MAX_SIZE: &str = "10Mi";
pub const DEFAULT_MAX_FILES: usize = 5;
pub const DEFAULT_WORKERS: usize = 1;
pub const DEFAULT_MONITOR_INTERVAL: Duration = Duration::from_secs(10);
/// Upstream refuses intervals under 3 s; k1s accepts shorter ones down to this, for tests.
pub const MIN_MONITOR_INTERVAL: Duration = Duration::from_millis(100);

/// Suffix of a compressed rotated file.
pub const GZ_SUFFIX: &str = ".gz";
/// Suffix of a file being compressed.
pub const TMP_SUFFIX: &str = ".tmp";
/// Format of the timestamp suffix of a rotated file (upstream's `20060102-150405`).
const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";

/// When and how container logs are rotated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationPolicy {
    /// A log file is rotated once it holds this many bytes; `None` turns rotation off
    /// (a negative `--container-log-max-size`, as upstream).
    pub max_size: Option<u64>,
    /// How many files (current and rotated) a container's log may have; at least 2.
    pub max_files: usize,
    /// How many containers are checked at once.
    pub workers: usize,
    /// How often the running containers are checked.
    pub monitor_interval: Duration,
}

impl Default for RotationPolicy {
    fn default() -> Self {
        RotationPolicy {
            max_size: Some(10 * 1024 * 1024),
            max_files: DEFAULT_MAX_FILES,
            workers: DEFAULT_WORKERS,
            monitor_interval: DEFAULT_MONITOR_INTERVAL,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("invalid container log max size {value:?}: {reason}")]
    MaxSize { value: String, reason: String },
    #[error("invalid container log max files {0}: must be greater than 1")]
    MaxFiles(usize),
    #[error("invalid container log max workers {0}: must be at least 1")]
    Workers(usize),
    #[error("invalid container log monitor interval {0:?}: must be at least 100ms")]
    MonitorInterval(Duration),
}

/// Parses `--container-log-max-size` (a quantity: `10Mi`, `500k`, `1048576`): the size in
/// bytes, or `None` for a negative quantity (rotation off).
pub fn parse_max_size(value: &str) -> Result<Option<u64>, PolicyError> {
    let err = |reason: &str| PolicyError::MaxSize { value: value.to_string(), reason: reason.to_string() };
    let q = k1s_api::strategies::quantity::Quantity::parse(value.trim()).map_err(|e| err(&e.to_string()))?;
    if q.is_negative() {
        return Ok(None);
    }
    if q.is_zero() {
        return Err(err("must be positive (a negative size turns rotation off)"));
    }
    if !q.is_integer() {
        return Err(err("not a whole number of bytes"));
    }
    u64::try_from(q.nanos() / 1_000_000_000).map(Some).map_err(|_| err("too large"))
}

impl RotationPolicy {
    /// Checks the flags as upstream's kubelet validates its configuration (except the monitor
    /// interval, see [`MIN_MONITOR_INTERVAL`]).
    pub fn new(
        max_size: &str,
        max_files: usize,
        workers: usize,
        monitor_interval: Duration,
    ) -> Result<RotationPolicy, PolicyError> {
        let max_size = parse_max_size(max_size)?;
        if max_files < 2 {
            return Err(PolicyError::MaxFiles(max_files));
        }
        if workers < 1 {
            return Err(PolicyError::Workers(workers));
        }
        if monitor_interval < MIN_MONITOR_INTERVAL {
            return Err(PolicyError::MonitorInterval(monitor_interval));
        }
        Ok(RotationPolicy { max_size, max_files, workers, monitor_interval })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    #[error("listing the containers")]
    ListContainers(#[source] CriError),
    #[error("getting the status of container {id}")]
    ContainerStatus { id: String, source: CriError },
    #[error("reading the size of log {path:?} of container {id}")]
    Stat { id: String, path: PathBuf, source: io::Error },
    #[error("reopening the log of container {id}")]
    Reopen { id: String, source: CriError },
    #[error("listing the rotated files of log {path:?}")]
    List { path: PathBuf, source: io::Error },
    #[error("removing old log {path:?}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("compressing log {path:?}")]
    Compress { path: PathBuf, source: io::Error },
    #[error("renaming log {from:?} to {to:?}")]
    Rename { from: PathBuf, to: PathBuf, source: io::Error },
    #[error("rotating log {path:?}: the blocking task failed")]
    Task { path: PathBuf, source: io::Error },
}

/// What checking one container did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// The log is under the limit (or the container has none).
    Kept,
    /// The log was rotated to this file.
    Rotated(PathBuf),
    /// The log is over the limit but a file of this second's rotation already exists (the
    /// interval is under a second): it is rotated at a later check.
    Postponed,
}

/// The rotation loop over a runtime's containers.
pub struct LogRotator {
    runtime: Arc<dyn RuntimeService>,
    max_size: u64,
    max_files: usize,
    workers: usize,
    interval: Duration,
    clock: Box<dyn Fn() -> Timestamp + Send + Sync>,
}

impl LogRotator {
    /// `None` when the policy turns rotation off.
    pub fn new(runtime: Arc<dyn RuntimeService>, policy: &RotationPolicy) -> Option<LogRotator> {
        Some(LogRotator {
            runtime,
            max_size: policy.max_size?,
            max_files: policy.max_files.max(2),
            workers: policy.workers.max(1),
            interval: policy.monitor_interval.max(MIN_MONITOR_INTERVAL),
            clock: Box::new(Timestamp::now),
        })
    }

    /// Names rotated files after `clock` instead of the current time (tests).
    pub fn with_clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> LogRotator {
        self.clock = Box::new(clock);
        self
    }

    /// Checks the running containers every interval until `cancel` fires.
    pub async fn run(self, cancel: CancellationToken) {
        tracing::info!(
            workers = self.workers,
            interval = ?self.interval,
            max_size = self.max_size,
            max_files = self.max_files,
            "container log rotation started"
        );
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.rotate_all().await {
                tracing::warn!(error = %chain(&e), "container log rotation failed");
            }
        }
    }

    /// One round: checks every running container's log (non-running ones write nothing new,
    /// as upstream reasons). Failures of single containers are logged and skipped.
    pub async fn rotate_all(&self) -> Result<Vec<(String, Checked)>, RotationError> {
        let list = self
            .runtime
            .list_containers(cri::ListContainersRequest { filter: None })
            .await
            .map_err(RotationError::ListContainers)?;
        let ids: Vec<String> = list
            .containers
            .into_iter()
            .filter(|c| c.state() == cri::ContainerState::ContainerRunning)
            .map(|c| c.id)
            .collect();
        let done = futures::stream::iter(ids)
            .map(|id| async move {
                match self.check(&id).await {
                    Ok(checked) => Some((id, checked)),
                    Err(RotationError::ContainerStatus { source, .. }) if source.is_not_found() => None,
                    Err(e) => {
                        tracing::warn!(error = %chain(&e), container = %id, "rotating a container log failed");
                        None
                    }
                }
            })
            .buffer_unordered(self.workers)
            .filter_map(std::future::ready)
            .collect()
            .await;
        Ok(done)
    }

    /// Checks one container's log and rotates it when it reached the limit.
    pub async fn check(&self, id: &str) -> Result<Checked, RotationError> {
        let status = self
            .runtime
            .container_status(cri::ContainerStatusRequest { container_id: id.to_string(), verbose: false })
            .await
            .map_err(|source| RotationError::ContainerStatus { id: id.to_string(), source })?
            .status
            .unwrap_or_default();
        if status.log_path.is_empty() {
            return Ok(Checked::Kept);
        }
        let path = PathBuf::from(&status.log_path);
        let stat_err = |source| RotationError::Stat { id: id.to_string(), path: path.clone(), source };
        let size = match tokio::fs::metadata(&path).await {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Removed behind the runtime's back: have it create the file again.
                self.reopen(id).await?;
                tokio::fs::metadata(&path).await.map_err(stat_err)?.len()
            }
            Err(e) => return Err(stat_err(e)),
        };
        if size < self.max_size {
            return Ok(Checked::Kept);
        }
        self.rotate(id, &path).await
    }

    async fn reopen(&self, id: &str) -> Result<(), RotationError> {
        self.runtime
            .reopen_container_log(cri::ReopenContainerLogRequest { container_id: id.to_string() })
            .await
            .map(|_| ())
            .map_err(|source| RotationError::Reopen { id: id.to_string(), source })
    }

    async fn rotate(&self, id: &str, log: &Path) -> Result<Checked, RotationError> {
        let rotated = rotated_name(log, (self.clock)());
        let (l, r, max_files) = (log.to_path_buf(), rotated.clone(), self.max_files);
        let ready = tokio::task::spawn_blocking(move || prepare(&l, &r, max_files))
            .await
            .map_err(|e| RotationError::Task { path: log.to_path_buf(), source: io::Error::other(e) })??;
        if !ready {
            return Ok(Checked::Postponed);
        }
        let rename_err = |from: &Path, to: &Path, source| RotationError::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source,
        };
        tokio::fs::rename(log, &rotated).await.map_err(|e| rename_err(log, &rotated, e))?;
        if let Err(e) = self.reopen(id).await {
            // Put it back to try again next time; if that fails too, the log is not lost: it
            // is the newest rotated file.
            if let Err(back) = tokio::fs::rename(&rotated, log).await {
                tracing::error!(error = %back, from = %rotated.display(), to = %log.display(), "renaming a rotated log back failed");
            }
            return Err(e);
        }
        tracing::debug!(container = %id, log = %log.display(), rotated = %rotated.display(), "container log rotated");
        Ok(Checked::Rotated(rotated))
    }
}

/// `<log>.<YYYYMMDD-HHMMSS>` for a rotation at `now` (UTC).
pub fn rotated_name(log: &Path, now: Timestamp) -> PathBuf {
    let mut name = log.as_os_str().to_os_string();
    name.push(".");
    name.push(now.strftime(TIMESTAMP_FORMAT).to_string());
    PathBuf::from(name)
}

/// The files of earlier rotations of `log` (`<log>.*`), every kind, unsorted.
pub fn rotated_files(log: &Path) -> io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(|n| n.starts_with(&prefix) && n.len() > prefix.len()) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Splits rotated files into those in use and leftovers of an interrupted rotation: temporary
/// files, and plain files whose compressed copy exists (upstream's `filterUnusedLogs`). The
/// ones in use come sorted oldest first.
pub fn split_in_use(files: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let names: std::collections::HashSet<std::ffi::OsString> =
        files.iter().map(|p| p.as_os_str().to_os_string()).collect();
    let (mut in_use, unused): (Vec<PathBuf>, Vec<PathBuf>) = files.into_iter().partition(|p| {
        let s = p.as_os_str();
        if s.as_encoded_bytes().ends_with(TMP_SUFFIX.as_bytes()) {
            return false;
        }
        if s.as_encoded_bytes().ends_with(GZ_SUFFIX.as_bytes()) {
            return true;
        }
        let mut gz = s.to_os_string();
        gz.push(GZ_SUFFIX);
        !names.contains(&gz)
    });
    in_use.sort();
    (in_use, unused)
}

fn is_gz(p: &Path) -> bool {
    p.as_os_str().as_encoded_bytes().ends_with(GZ_SUFFIX.as_bytes())
}

fn remove(path: &Path) -> Result<(), RotationError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(RotationError::Remove { path: path.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

/// Gets the earlier rotations of `log` ready for a new one named `rotated`: removes leftovers,
/// removes the oldest files beyond `max_files - 2`, compresses the rest. False (and nothing
/// done) when `rotated` is taken: a rotation already happened this second.
fn prepare(log: &Path, rotated: &Path, max_files: usize) -> Result<bool, RotationError> {
    let mut rotated_gz = rotated.as_os_str().to_os_string();
    rotated_gz.push(GZ_SUFFIX);
    if rotated.exists() || Path::new(&rotated_gz).exists() {
        return Ok(false);
    }
    let files = rotated_files(log).map_err(|source| RotationError::List { path: log.to_path_buf(), source })?;
    let (in_use, unused) = split_in_use(files);
    for f in &unused {
        remove(f)?;
    }
    // The current file and the one about to be rotated are two of the `max_files`.
    let keep = max_files.saturating_sub(2);
    let excess = in_use.len().saturating_sub(keep);
    for f in &in_use[..excess] {
        remove(f)?;
    }
    for f in in_use[excess..].iter().filter(|f| !is_gz(f)) {
        compress(f).map_err(|source| RotationError::Compress { path: f.clone(), source })?;
    }
    Ok(true)
}

/// Compresses `log` to `log.gz` through `log.gz.tmp`, then removes `log`.
fn compress(log: &Path) -> io::Result<()> {
    let mut gz = log.as_os_str().to_os_string();
    gz.push(GZ_SUFFIX);
    let gz = PathBuf::from(gz);
    let mut tmp = gz.as_os_str().to_os_string();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let mut input = std::fs::File::open(log)?;
        let mode = input.metadata()?.permissions().mode() & 0o777;
        let out = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
        let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        io::copy(&mut input, &mut enc)?;
        enc.finish()?.sync_all()?;
        std::fs::rename(&tmp, &gz)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::remove_file(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(files: &[PathBuf]) -> Vec<String> {
        files.iter().map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn rotated_names_carry_the_utc_time_to_the_second() {
        let now: Timestamp = "2026-12-04T19:05:07.9Z".parse().expect("ts");
        assert_eq!(rotated_name(Path::new("/l/app/0.log"), now), PathBuf::from("/l/app/0.log.20261204-190507"));
    }

    #[test]
    fn max_size_is_a_quantity_and_negative_turns_rotation_off() {
        assert_eq!(parse_max_size("10Mi"), Ok(Some(10 * 1024 * 1024)));
        assert_eq!(parse_max_size("500k"), Ok(Some(500_000)));
        assert_eq!(parse_max_size("1048576"), Ok(Some(1_048_576)));
        assert_eq!(parse_max_size("-1"), Ok(None));
        for bad in ["0", "ten", "0.5", "1.5m"] {
            assert!(parse_max_size(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(RotationPolicy::new("10Mi", 5, 1, DEFAULT_MONITOR_INTERVAL), Ok(RotationPolicy::default()));
        assert_eq!(RotationPolicy::new("10Mi", 1, 1, DEFAULT_MONITOR_INTERVAL), Err(PolicyError::MaxFiles(1)));
        assert_eq!(RotationPolicy::new("10Mi", 5, 0, DEFAULT_MONITOR_INTERVAL), Err(PolicyError::Workers(0)));
        let short = Duration::from_millis(10);
        assert_eq!(RotationPolicy::new("10Mi", 5, 1, short), Err(PolicyError::MonitorInterval(short)));
    }

    #[test]
    fn leftovers_of_an_interrupted_rotation_are_not_in_use() {
        let files = [
            "0.log.20261204-190509",
            "0.log.20261204-190500.gz",
            "0.log.20261204-190505",
            "0.log.20261204-190505.gz",
            "0.log.20261204-190506.gz.tmp",
        ]
        .map(|n| PathBuf::from("/l").join(n))
        .to_vec();
        let (in_use, unused) = split_in_use(files);
        assert_eq!(names(&in_use), ["0.log.20261204-190500.gz", "0.log.20261204-190505.gz", "0.log.20261204-190509"]);
        assert_eq!(names(&unused), ["0.log.20261204-190505", "0.log.20261204-190506.gz.tmp"]);
    }

    #[test]
    fn rotated_files_are_only_those_of_the_same_log() {
        let dir = tempfile::tempdir().expect("tmp");
        for n in
            ["0.log", "0.log.20261204-190500", "0.log.20261204-190400.gz", "1.log", "1.log.20261204-190500", "10.log"]
        {
            std::fs::write(dir.path().join(n), "x").expect("write");
        }
        let mut found = rotated_files(&dir.path().join("0.log")).expect("list");
        found.sort();
        assert_eq!(names(&found), ["0.log.20261204-190400.gz", "0.log.20261204-190500"]);
    }

    #[test]
    fn prepare_prunes_the_oldest_and_compresses_the_rest() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("0.log");
        std::fs::write(&log, "current").expect("write");
        for (n, body) in [
            ("0.log.20261204-190000.gz", "a"),
            ("0.log.20261204-190100.gz", "b"),
            ("0.log.20261204-190200.gz", "c"),
            ("0.log.20261204-190300", "d"),
            ("0.log.20261204-190300.gz.tmp", "junk"),
        ] {
            std::fs::write(dir.path().join(n), body).expect("write");
        }
        let rotated = dir.path().join("0.log.20261204-190400");
        assert!(prepare(&log, &rotated, 4).expect("prepare"));
        let mut left = rotated_files(&log).expect("list");
        left.sort();
        assert_eq!(names(&left), ["0.log.20261204-190200.gz", "0.log.20261204-190300.gz"]);
        let mut text = String::new();
        let f = std::fs::File::open(dir.path().join("0.log.20261204-190300.gz")).expect("open");
        io::Read::read_to_string(&mut flate2::read::GzDecoder::new(f), &mut text).expect("gunzip");
        assert_eq!(text, "d");
        // A rotation in the same second is postponed, touching nothing.
        std::fs::write(&rotated, "x").expect("write");
        assert!(!prepare(&log, &rotated, 2).expect("prepare"));
        assert_eq!(rotated_files(&log).expect("list").len(), 3);
    }
}
