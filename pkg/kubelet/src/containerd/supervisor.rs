//! Supervision of the containerd process: start it with the generated config, wait until its
//! socket accepts connections, restart it with exponential back-off whenever it exits, and stop
//! it (SIGTERM, then SIGKILL after a grace period) when the cancellation token fires. Every
//! child is waited for, so none is left a zombie.
//!
//! A containerd left running by a previous k1s that died without stopping it (found through the
//! pid file and its command line) is stopped before a new one starts: two would fight over the
//! same root directory.
//!
//! Processes and the socket probe sit behind [`ProcessControl`] so that the restart logic is
//! unit-tested with a fake; [`OsProcessControl`] is the real one.

use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why containerd could not be started or supervised.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("preparing containerd log file {path}")]
    LogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting {binary}")]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("containerd exited ({status}) before its socket {socket} accepted connections; see {log}")]
    ExitedBeforeReady { status: String, socket: PathBuf, log: PathBuf },
    #[error("containerd socket {socket} did not accept connections within {timeout:?}; see {log}")]
    NotReady { socket: PathBuf, timeout: Duration, log: PathBuf },
    #[error("waiting for containerd (pid {pid:?})")]
    Wait {
        pid: Option<u32>,
        #[source]
        source: std::io::Error,
    },
    #[error("writing containerd pid file {path}")]
    PidFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("stopping containerd {pid} left by a previous run")]
    StopStale {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("cancelled before containerd was ready")]
    Cancelled,
    #[error("containerd supervisor task failed")]
    Join(#[source] tokio::task::JoinError),
}

/// The signals the supervisor sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Kill,
}

/// What to run and where its output goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnSpec {
    pub binary: PathBuf,
    pub args: Vec<String>,
    /// stdout and stderr are appended to this file.
    pub log_file: PathBuf,
}

/// A started process the supervisor owns.
pub trait ChildProcess: Send + 'static {
    /// Its pid, `None` once it has been waited for.
    fn id(&self) -> Option<u32>;
    /// Waits for it to exit and reaps it. Cancel-safe.
    fn wait(&mut self) -> impl Future<Output = std::io::Result<ExitStatus>> + Send;
    /// Sends `signal`; a no-op once it has been reaped.
    fn signal(&mut self, signal: StopSignal) -> std::io::Result<()>;
}

/// The OS side of supervision.
pub trait ProcessControl: Send + Sync + 'static {
    type Child: ChildProcess;
    /// Starts a process.
    fn spawn(&self, spec: &SpawnSpec) -> std::io::Result<Self::Child>;
    /// Whether the unix socket at `socket` accepts a connection now.
    fn socket_accepts(&self, socket: &Path) -> impl Future<Output = bool> + Send;
    /// Whether `pid` is alive and runs `binary` with `config_file` (a containerd of ours).
    fn is_supervised_containerd(&self, pid: u32, binary: &Path, config_file: &Path) -> bool;
    /// Sends `signal` to a process that is not our child.
    fn signal_pid(&self, pid: u32, signal: StopSignal) -> std::io::Result<()>;
}

/// Restart back-off: doubles from `initial` up to `max`; back to `initial` once a process has
/// run for `reset_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_millis(500), max: Duration::from_secs(30), reset_after: Duration::from_secs(60) }
    }
}

/// How to run and supervise containerd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisorConfig {
    /// `containerd` (looked up in PATH) or a path to the binary.
    pub binary: PathBuf,
    pub config_file: PathBuf,
    pub socket: PathBuf,
    pub log_file: PathBuf,
    /// Where the running containerd's pid is recorded, to find one a crashed k1s left behind.
    pub pid_file: PathBuf,
    /// How long a start may take until the socket accepts connections.
    pub ready_timeout: Duration,
    /// How long containerd gets between SIGTERM and SIGKILL.
    pub stop_grace: Duration,
    pub backoff: Backoff,
}

impl SupervisorConfig {
    /// Supervision of the containerd that `cfg` describes, with defaults: `containerd` from
    /// PATH, 60 s to become ready, 10 s to stop.
    pub fn for_config(cfg: &super::ContainerdConfig) -> Self {
        Self {
            binary: PathBuf::from("containerd"),
            config_file: cfg.config_file(),
            socket: cfg.socket.clone(),
            log_file: cfg.log_file(),
            pid_file: cfg.state_dir.join("k1s-containerd.pid"),
            ready_timeout: Duration::from_secs(60),
            stop_grace: Duration::from_secs(10),
            backoff: Backoff::default(),
        }
    }

    fn spawn_spec(&self) -> SpawnSpec {
        SpawnSpec {
            binary: self.binary.clone(),
            args: vec!["--config".to_string(), self.config_file.to_string_lossy().into_owned()],
            log_file: self.log_file.clone(),
        }
    }
}

/// What an observer sees of the supervised containerd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerdStatus {
    /// Pid of the current process, if one runs.
    pub pid: Option<u32>,
    /// Its socket accepts connections.
    pub ready: bool,
    /// How many times containerd was restarted after exiting.
    pub restarts: u32,
    /// How the last process exited (or the last restart failed), if one did.
    pub last_exit: Option<String>,
    /// How many times containerd has exited (or failed to restart) so far.
    pub failures: u32,
    /// The back-off before the next restart, while one is pending.
    pub restart_in: Option<Duration>,
    /// The supervisor has stopped containerd for good (cancelled).
    pub stopped: bool,
}

/// An Event about containerd for the node: Warning or Normal, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The Events a change of containerd's status makes: each exit (or failed restart) with the
/// back-off before the next try, each restart that came up.
pub fn status_events(before: &ContainerdStatus, now: &ContainerdStatus) -> Vec<StatusEvent> {
    let mut out = Vec::new();
    if now.failures > before.failures {
        let exit = now.last_exit.as_deref().unwrap_or("unknown");
        let next = now.restart_in.map_or_else(String::new, |d| format!("; restarting it in {d:?}"));
        out.push(StatusEvent {
            warning: true,
            reason: "ContainerdExited",
            message: format!("containerd exited ({exit}){next} (failure {})", now.failures),
        });
    }
    if now.restarts > before.restarts {
        out.push(StatusEvent {
            warning: false,
            reason: "ContainerdRestarted",
            message: format!("containerd was restarted and is ready (restart {})", now.restarts),
        });
    }
    out
}

/// Starts and supervises containerd.
pub struct Supervisor<P: ProcessControl = OsProcessControl> {
    config: SupervisorConfig,
    control: P,
}

impl Supervisor<OsProcessControl> {
    /// A supervisor of real processes.
    pub fn new(config: SupervisorConfig) -> Self {
        Self::with_control(config, OsProcessControl)
    }
}

impl<P: ProcessControl> Supervisor<P> {
    /// A supervisor using `control` for processes and the socket probe.
    pub fn with_control(config: SupervisorConfig, control: P) -> Self {
        Self { config, control }
    }

    /// Stops a containerd left by a previous run, starts containerd, and returns once its socket
    /// accepts connections; from then on a background task restarts it whenever it exits,
    /// until `cancel` fires, when it is stopped. A first start that fails is an error.
    pub async fn start(self, cancel: CancellationToken) -> Result<SupervisorHandle, SupervisorError> {
        let Supervisor { config, control } = self;
        stop_stale(&control, &config).await?;
        let (status_tx, status_rx) = watch::channel(ContainerdStatus::default());
        let started = Instant::now();
        let child = tokio::select! {
            child = start_once(&control, &config, &status_tx) => child?,
            () = cancel.cancelled() => {
                // start_once was dropped: the child it may have spawned was killed on drop
                // (OsProcessControl) and is reaped by tokio.
                let _ = std::fs::remove_file(&config.pid_file);
                return Err(SupervisorError::Cancelled);
            }
        };
        tracing::info!(
            pid = child.id(),
            socket = %config.socket.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "containerd is ready"
        );
        let socket = config.socket.clone();
        let task = tokio::spawn(supervise(control, config, child, status_tx, cancel));
        Ok(SupervisorHandle { socket, status: status_rx, task })
    }
}

/// The running supervision.
pub struct SupervisorHandle {
    socket: PathBuf,
    status: watch::Receiver<ContainerdStatus>,
    task: JoinHandle<Result<(), SupervisorError>>,
}

impl SupervisorHandle {
    /// The containerd socket (the CRI endpoint).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The current status.
    pub fn status(&self) -> ContainerdStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change (restarts, readiness).
    pub fn subscribe(&self) -> watch::Receiver<ContainerdStatus> {
        self.status.clone()
    }

    /// Waits for the supervision to end: after cancellation, once containerd has exited.
    pub async fn join(self) -> Result<(), SupervisorError> {
        self.task.await.map_err(SupervisorError::Join)?
    }
}

/// Stops a containerd recorded in the pid file that still runs our config.
async fn stop_stale<P: ProcessControl>(control: &P, config: &SupervisorConfig) -> Result<(), SupervisorError> {
    let Some(pid) = std::fs::read_to_string(&config.pid_file).ok().and_then(|s| s.trim().parse::<u32>().ok()) else {
        return Ok(());
    };
    if !control.is_supervised_containerd(pid, &config.binary, &config.config_file) {
        let _ = std::fs::remove_file(&config.pid_file);
        return Ok(());
    }
    tracing::warn!(pid, "stopping containerd left running by a previous k1s");
    let stale = |source| SupervisorError::StopStale { pid, source };
    control.signal_pid(pid, StopSignal::Term).map_err(stale)?;
    let deadline = Instant::now() + config.stop_grace;
    while control.is_supervised_containerd(pid, &config.binary, &config.config_file) {
        if Instant::now() >= deadline {
            control.signal_pid(pid, StopSignal::Kill).map_err(stale)?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_file(&config.pid_file);
    Ok(())
}

/// Spawns containerd and waits until its socket accepts connections. On failure the child is
/// stopped and reaped.
async fn start_once<P: ProcessControl>(
    control: &P,
    config: &SupervisorConfig,
    status: &watch::Sender<ContainerdStatus>,
) -> Result<P::Child, SupervisorError> {
    prepare_log(&config.log_file)?;
    let mut child = control
        .spawn(&config.spawn_spec())
        .map_err(|source| SupervisorError::Spawn { binary: config.binary.clone(), source })?;
    let pid = child.id();
    if let Some(pid) = pid {
        if let Err(source) = std::fs::write(&config.pid_file, format!("{pid}\n")) {
            stop_child(&mut child, config.stop_grace).await;
            return Err(SupervisorError::PidFile { path: config.pid_file.clone(), source });
        }
    }
    status.send_modify(|s| {
        s.pid = pid;
        s.ready = false;
    });
    let deadline = Instant::now() + config.ready_timeout;
    let mut poll = Duration::from_millis(10);
    loop {
        if control.socket_accepts(&config.socket).await {
            status.send_modify(|s| s.ready = true);
            return Ok(child);
        }
        if Instant::now() >= deadline {
            stop_child(&mut child, config.stop_grace).await;
            return Err(SupervisorError::NotReady {
                socket: config.socket.clone(),
                timeout: config.ready_timeout,
                log: config.log_file.clone(),
            });
        }
        tokio::select! {
            exited = child.wait() => {
                let status = exited.map_err(|source| SupervisorError::Wait { pid, source })?;
                return Err(SupervisorError::ExitedBeforeReady {
                    status: status.to_string(),
                    socket: config.socket.clone(),
                    log: config.log_file.clone(),
                });
            }
            () = tokio::time::sleep(poll) => {}
        }
        poll = (poll * 2).min(Duration::from_millis(200));
    }
}

/// Restarts containerd whenever it exits, until `cancel` fires.
async fn supervise<P: ProcessControl>(
    control: P,
    config: SupervisorConfig,
    mut child: P::Child,
    status: watch::Sender<ContainerdStatus>,
    cancel: CancellationToken,
) -> Result<(), SupervisorError> {
    let mut delay = config.backoff.initial;
    let mut started = Instant::now();
    loop {
        let pid = child.id();
        let exited = tokio::select! {
            exited = child.wait() => exited,
            () = cancel.cancelled() => {
                stop_child(&mut child, config.stop_grace).await;
                let _ = std::fs::remove_file(&config.pid_file);
                status.send_modify(|s| {
                    s.pid = None;
                    s.ready = false;
                    s.stopped = true;
                });
                tracing::info!(pid, "containerd stopped");
                return Ok(());
            }
        };
        let exit = match exited {
            Ok(exit) => exit.to_string(),
            Err(source) => return Err(SupervisorError::Wait { pid, source }),
        };
        if started.elapsed() >= config.backoff.reset_after {
            delay = config.backoff.initial;
        }
        tracing::warn!(pid, %exit, restart_in_ms = delay.as_millis() as u64, log = %config.log_file.display(), "containerd exited");
        status.send_modify(|s| {
            s.pid = None;
            s.ready = false;
            s.last_exit = Some(exit);
            s.failures += 1;
            s.restart_in = Some(delay);
        });
        // Restart until a start succeeds or we are cancelled.
        child = loop {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = cancel.cancelled() => {
                    let _ = std::fs::remove_file(&config.pid_file);
                    status.send_modify(|s| s.stopped = true);
                    return Ok(());
                }
            }
            delay = (delay * 2).min(config.backoff.max);
            let attempt = tokio::select! {
                attempt = start_once(&control, &config, &status) => attempt,
                () = cancel.cancelled() => {
                    let _ = std::fs::remove_file(&config.pid_file);
                    status.send_modify(|s| { s.pid = None; s.ready = false; s.stopped = true; });
                    return Ok(());
                }
            };
            match attempt {
                Ok(child) => break child,
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "containerd restart failed");
                    status.send_modify(|s| {
                        s.last_exit = Some(err.to_string());
                        s.failures += 1;
                        s.restart_in = Some(delay);
                    });
                }
            }
        };
        started = Instant::now();
        status.send_modify(|s| {
            s.restarts += 1;
            s.restart_in = None;
        });
        tracing::info!(pid = child.id(), "containerd restarted and ready");
    }
}

/// SIGTERM, wait up to `grace`, SIGKILL, wait: the child is always reaped.
async fn stop_child<C: ChildProcess>(child: &mut C, grace: Duration) {
    let pid = child.id();
    if let Err(err) = child.signal(StopSignal::Term) {
        tracing::warn!(?pid, error = %err, "sending SIGTERM to containerd");
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(_)) => return,
        Ok(Err(err)) => tracing::warn!(?pid, error = %err, "waiting for containerd"),
        Err(_) => tracing::warn!(?pid, ?grace, "containerd ignored SIGTERM: sending SIGKILL"),
    }
    if let Err(err) = child.signal(StopSignal::Kill) {
        tracing::warn!(?pid, error = %err, "sending SIGKILL to containerd");
    }
    if let Err(err) = child.wait().await {
        tracing::warn!(?pid, error = %err, "reaping containerd");
    }
}

/// Keeps at most one previous log (`containerd.log.1`) once the log passes 16 MiB.
fn prepare_log(path: &Path) -> Result<(), SupervisorError> {
    const MAX_LOG: u64 = 16 << 20;
    let err = |source| SupervisorError::LogFile { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_LOG) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(path, old).map_err(err)?;
    }
    Ok(())
}

/// Real processes: tokio children, signals through rustix, the socket probed with a connect.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsProcessControl;

/// A real child process (killed if dropped while running; tokio reaps it then).
pub struct OsChild(tokio::process::Child);

impl ChildProcess for OsChild {
    fn id(&self) -> Option<u32> {
        self.0.id()
    }

    fn wait(&mut self) -> impl Future<Output = std::io::Result<ExitStatus>> + Send {
        self.0.wait()
    }

    fn signal(&mut self, signal: StopSignal) -> std::io::Result<()> {
        // While we hold an unreaped child its pid cannot be reused.
        match self.0.id() {
            Some(pid) => send_signal(pid, signal),
            None => Ok(()),
        }
    }
}

impl ProcessControl for OsProcessControl {
    type Child = OsChild;

    fn spawn(&self, spec: &SpawnSpec) -> std::io::Result<OsChild> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&spec.log_file)?;
        let child = tokio::process::Command::new(&spec.binary)
            .args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // containerd must not notify systemd on behalf of k1s.
            .env_remove("NOTIFY_SOCKET")
            // Its own process group: a terminal's Ctrl-C reaches k1s, which stops it in order.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        Ok(OsChild(child))
    }

    fn socket_accepts(&self, socket: &Path) -> impl Future<Output = bool> + Send {
        let socket = socket.to_path_buf();
        async move { tokio::net::UnixStream::connect(&socket).await.is_ok() }
    }

    fn is_supervised_containerd(&self, pid: u32, binary: &Path, config_file: &Path) -> bool {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let Some(first) = args.first() else {
            return false;
        };
        let name = binary.file_name().map(|n| n.as_encoded_bytes());
        let first_name = Path::new(std::ffi::OsStr::from_bytes(first)).file_name().map(|n| n.as_encoded_bytes());
        let config = config_file.as_os_str().as_encoded_bytes();
        // A zombie has an empty cmdline and is not running.
        name.is_some() && name == first_name && args.contains(&config)
    }

    fn signal_pid(&self, pid: u32, signal: StopSignal) -> std::io::Result<()> {
        send_signal(pid, signal)
    }
}

fn send_signal(pid: u32, signal: StopSignal) -> std::io::Result<()> {
    let raw = i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
    let pid = rustix::process::Pid::from_raw(raw).ok_or_else(|| std::io::Error::other("pid 0 cannot be signalled"))?;
    let signal = match signal {
        StopSignal::Term => rustix::process::Signal::TERM,
        StopSignal::Kill => rustix::process::Signal::KILL,
    };
    match rustix::process::kill_process(pid, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(test)]
mod tests;
