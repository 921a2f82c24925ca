//! The supervisor's restart, back-off and stop logic against fake processes, in paused time.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};

use super::*;

/// How a fake containerd behaves once spawned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// Its socket accepts connections at once; it exits on SIGTERM.
    Listen,
    /// Like `Listen` but ignores SIGTERM (only SIGKILL ends it).
    ListenIgnoringTerm,
    /// Exits with status 1 right away.
    ExitAtOnce,
    /// Runs but never listens.
    NeverReady,
}

struct FakeProc {
    pid: u32,
    behaviour: Behaviour,
    exit: watch::Sender<Option<i32>>,
    reaped: bool,
    spawned_at: Instant,
}

#[derive(Default)]
struct FakeState {
    script: VecDeque<Behaviour>,
    procs: Vec<FakeProc>,
    signals: Vec<(u32, StopSignal)>,
    /// A containerd "left by a previous run": alive until signalled.
    stale_pid: Option<u32>,
    stale_ignores_term: bool,
}

#[derive(Clone, Default)]
struct FakeControl(Arc<Mutex<FakeState>>);

impl FakeControl {
    fn scripted(script: &[Behaviour]) -> Self {
        let fake = Self::default();
        fake.state().script = script.iter().copied().collect();
        fake
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().expect("fake state lock")
    }

    /// Makes process number `index` (in spawn order) exit with `code`.
    fn crash(&self, index: usize, code: i32) {
        let state = self.state();
        state.procs[index].exit.send_replace(Some(code << 8));
    }

    fn spawn_count(&self) -> usize {
        self.state().procs.len()
    }

    fn spawn_times(&self) -> Vec<Instant> {
        self.state().procs.iter().map(|p| p.spawned_at).collect()
    }

    fn signals(&self) -> Vec<(u32, StopSignal)> {
        self.state().signals.clone()
    }

    fn all_reaped(&self) -> bool {
        self.state().procs.iter().all(|p| p.reaped)
    }
}

struct FakeChild {
    pid: u32,
    control: FakeControl,
    exit: watch::Receiver<Option<i32>>,
    reaped: bool,
}

impl ChildProcess for FakeChild {
    fn id(&self) -> Option<u32> {
        (!self.reaped).then_some(self.pid)
    }

    fn wait(&mut self) -> impl Future<Output = std::io::Result<ExitStatus>> + Send {
        let mut exit = self.exit.clone();
        let control = self.control.clone();
        let pid = self.pid;
        let reaped = &mut self.reaped;
        async move {
            let raw =
                *exit.wait_for(Option::is_some).await.map_err(|_| std::io::Error::other("fake process vanished"))?;
            *reaped = true;
            if let Some(p) = control.state().procs.iter_mut().find(|p| p.pid == pid) {
                p.reaped = true;
            }
            Ok(ExitStatus::from_raw(raw.unwrap_or_default()))
        }
    }

    fn signal(&mut self, signal: StopSignal) -> std::io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        let mut state = self.control.state();
        state.signals.push((self.pid, signal));
        let proc = state.procs.iter().find(|p| p.pid == self.pid).expect("signalled process exists");
        let dies = match signal {
            StopSignal::Kill => Some(9),
            StopSignal::Term if proc.behaviour != Behaviour::ListenIgnoringTerm => Some(15),
            StopSignal::Term => None,
        };
        if let Some(raw) = dies {
            proc.exit.send_if_modified(|e| {
                let unset = e.is_none();
                if unset {
                    *e = Some(raw);
                }
                unset
            });
        }
        Ok(())
    }
}

impl ProcessControl for FakeControl {
    type Child = FakeChild;

    fn spawn(&self, _spec: &SpawnSpec) -> std::io::Result<FakeChild> {
        let mut state = self.state();
        let behaviour = state.script.pop_front().unwrap_or(Behaviour::Listen);
        let pid = 1000 + state.procs.len() as u32;
        let initial = (behaviour == Behaviour::ExitAtOnce).then_some(1 << 8);
        let (exit, rx) = watch::channel(initial);
        state.procs.push(FakeProc { pid, behaviour, exit, reaped: false, spawned_at: Instant::now() });
        Ok(FakeChild { pid, control: self.clone(), exit: rx, reaped: false })
    }

    fn socket_accepts(&self, _socket: &Path) -> impl Future<Output = bool> + Send {
        let state = self.state();
        let accepts = state.procs.last().is_some_and(|p| {
            p.exit.borrow().is_none() && matches!(p.behaviour, Behaviour::Listen | Behaviour::ListenIgnoringTerm)
        });
        std::future::ready(accepts)
    }

    fn is_supervised_containerd(&self, pid: u32, _binary: &Path, _config: &Path) -> bool {
        self.state().stale_pid == Some(pid)
    }

    fn signal_pid(&self, pid: u32, signal: StopSignal) -> std::io::Result<()> {
        let mut state = self.state();
        state.signals.push((pid, signal));
        let dies = signal == StopSignal::Kill || !state.stale_ignores_term;
        if dies && state.stale_pid == Some(pid) {
            state.stale_pid = None;
        }
        Ok(())
    }
}

fn config(dir: &Path) -> SupervisorConfig {
    SupervisorConfig {
        binary: PathBuf::from("containerd"),
        config_file: dir.join("config.toml"),
        socket: dir.join("containerd.sock"),
        log_file: dir.join("log/containerd.log"),
        pid_file: dir.join("containerd.pid"),
        ready_timeout: Duration::from_secs(5),
        stop_grace: Duration::from_secs(3),
        backoff: Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(4),
            reset_after: Duration::from_secs(60),
        },
    }
}

async fn wait_status(
    rx: &mut watch::Receiver<ContainerdStatus>,
    pred: impl FnMut(&ContainerdStatus) -> bool,
) -> ContainerdStatus {
    tokio::time::timeout(Duration::from_secs(600), rx.wait_for(pred))
        .await
        .expect("status reached in time")
        .expect("supervisor alive")
        .clone()
}

#[tokio::test(start_paused = true)]
async fn start_returns_once_the_socket_accepts_and_records_the_pid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let status = handle.status();
    assert!(status.ready);
    assert_eq!(status.pid, Some(1000));
    assert_eq!(status.restarts, 0);
    assert_eq!(handle.socket(), dir.path().join("containerd.sock"));
    let pid_file = std::fs::read_to_string(dir.path().join("containerd.pid")).expect("pid file");
    assert_eq!(pid_file.trim(), "1000");
    assert!(dir.path().join("log").is_dir(), "log directory created");
    cancel.cancel();
    handle.join().await.expect("join");
}

#[tokio::test(start_paused = true)]
async fn exited_containerd_is_restarted_after_the_initial_backoff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen, Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let mut rx = handle.subscribe();
    fake.crash(0, 2);
    let down = wait_status(&mut rx, |s| !s.ready).await;
    assert_eq!(down.last_exit.as_deref(), Some("exit status: 2"));
    let up = wait_status(&mut rx, |s| s.restarts == 1 && s.ready).await;
    assert_eq!(up.pid, Some(1001));
    let times = fake.spawn_times();
    assert!(times[1] - times[0] >= Duration::from_millis(500));
    assert!(fake.all_reaped() || fake.spawn_count() == 2);
    cancel.cancel();
    handle.join().await.expect("join");
    assert!(fake.all_reaped(), "every process was waited for");
}

#[tokio::test(start_paused = true)]
async fn failed_restarts_back_off_exponentially_up_to_the_maximum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[
        Behaviour::Listen,
        Behaviour::ExitAtOnce,
        Behaviour::ExitAtOnce,
        Behaviour::ExitAtOnce,
        Behaviour::ExitAtOnce,
        Behaviour::Listen,
    ]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let mut rx = handle.subscribe();
    fake.crash(0, 1);
    wait_status(&mut rx, |s| s.restarts == 1 && s.ready).await;
    let times = fake.spawn_times();
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let ms: Vec<u128> = gaps.iter().map(Duration::as_millis).collect();
    // 0.5 s, 1 s, 2 s, 4 s, then capped at 4 s.
    assert_eq!(ms, vec![500, 1000, 2000, 4000, 4000]);
    cancel.cancel();
    handle.join().await.expect("join");
    assert!(fake.all_reaped());
}

#[tokio::test(start_paused = true)]
async fn backoff_resets_after_a_long_healthy_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen, Behaviour::ExitAtOnce, Behaviour::Listen, Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let mut rx = handle.subscribe();
    fake.crash(0, 1);
    wait_status(&mut rx, |s| s.restarts == 1 && s.ready).await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    fake.crash(2, 1);
    wait_status(&mut rx, |s| s.restarts == 2 && s.ready).await;
    let times = fake.spawn_times();
    assert_eq!((times[3] - times[2] - Duration::from_secs(61)).as_millis(), 500);
    cancel.cancel();
    handle.join().await.expect("join");
}

#[tokio::test(start_paused = true)]
async fn cancellation_sends_sigterm_and_reaps_the_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let rx = handle.subscribe();
    cancel.cancel();
    handle.join().await.expect("join");
    assert_eq!(fake.signals(), vec![(1000, StopSignal::Term)]);
    assert!(fake.all_reaped());
    assert!(rx.borrow().stopped);
    assert!(!dir.path().join("containerd.pid").exists(), "pid file removed");
}

#[tokio::test(start_paused = true)]
async fn sigkill_follows_when_sigterm_is_ignored_for_the_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::ListenIgnoringTerm]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let before = Instant::now();
    cancel.cancel();
    handle.join().await.expect("join");
    assert!(before.elapsed() >= Duration::from_secs(3));
    assert_eq!(fake.signals(), vec![(1000, StopSignal::Term), (1000, StopSignal::Kill)]);
    assert!(fake.all_reaped());
}

#[tokio::test(start_paused = true)]
async fn first_start_that_exits_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::ExitAtOnce]);
    let err = Supervisor::with_control(config(dir.path()), fake.clone())
        .start(CancellationToken::new())
        .await
        .err()
        .expect("start fails");
    assert!(matches!(&err, SupervisorError::ExitedBeforeReady { status, .. } if status == "exit status: 1"), "{err}");
    assert!(fake.all_reaped());
}

#[tokio::test(start_paused = true)]
async fn first_start_that_never_listens_times_out_and_is_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::NeverReady]);
    let started = Instant::now();
    let err = Supervisor::with_control(config(dir.path()), fake.clone())
        .start(CancellationToken::new())
        .await
        .err()
        .expect("start fails");
    assert!(matches!(err, SupervisorError::NotReady { .. }), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert_eq!(fake.signals(), vec![(1000, StopSignal::Term)]);
    assert!(fake.all_reaped());
}

#[tokio::test(start_paused = true)]
async fn containerd_left_by_a_previous_run_is_stopped_before_starting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    std::fs::write(&cfg.pid_file, "4242\n").expect("write pid file");
    let fake = FakeControl::scripted(&[Behaviour::Listen]);
    {
        let mut state = fake.state();
        state.stale_pid = Some(4242);
        state.stale_ignores_term = true;
    }
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(cfg, fake.clone()).start(cancel.clone()).await.expect("start");
    assert_eq!(fake.signals(), vec![(4242, StopSignal::Term), (4242, StopSignal::Kill)]);
    assert_eq!(handle.status().pid, Some(1000));
    cancel.cancel();
    handle.join().await.expect("join");
}

#[tokio::test(start_paused = true)]
async fn a_pid_file_naming_another_process_is_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    std::fs::write(&cfg.pid_file, "4242\n").expect("write pid file");
    let fake = FakeControl::scripted(&[Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(cfg, fake.clone()).start(cancel.clone()).await.expect("start");
    assert!(fake.signals().is_empty(), "no signal to a process not ours");
    cancel.cancel();
    handle.join().await.expect("join");
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_restart_backoff_ends_supervision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let mut rx = handle.subscribe();
    fake.crash(0, 1);
    wait_status(&mut rx, |s| !s.ready).await;
    cancel.cancel();
    handle.join().await.expect("join");
    assert_eq!(fake.spawn_count(), 1, "no restart after cancellation");
    assert!(rx.borrow().stopped);
}

#[test]
fn spawn_spec_passes_the_config_file() {
    let cfg = config(Path::new("/k"));
    let spec = cfg.spawn_spec();
    assert_eq!(spec.binary, Path::new("containerd"));
    assert_eq!(spec.args, vec!["--config", "/k/config.toml"]);
    assert_eq!(spec.log_file, Path::new("/k/log/containerd.log"));
}

#[test]
fn large_logs_are_rotated_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("containerd.log");
    std::fs::write(&log, vec![b'x'; (16 << 20) + 1]).expect("write log");
    prepare_log(&log).expect("rotate");
    assert!(!log.exists());
    assert!(dir.path().join("containerd.log.1").exists());
}

#[tokio::test]
async fn real_processes_are_started_signalled_and_reaped() {
    // `sleep` stands in for containerd: spawn, SIGTERM, reap, through the real implementation.
    let dir = tempfile::tempdir().expect("tempdir");
    let spec =
        SpawnSpec { binary: PathBuf::from("sleep"), args: vec!["30".into()], log_file: dir.path().join("sleep.log") };
    let mut child = OsProcessControl.spawn(&spec).expect("spawn sleep");
    let pid = child.id().expect("pid");
    // Right after fork the child still shows our command line: wait for the exec.
    let mut recognized = false;
    for _ in 0..200 {
        recognized = OsProcessControl.is_supervised_containerd(pid, Path::new("/usr/bin/sleep"), Path::new("30"));
        if recognized {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(recognized, "sleep 30 recognized by its command line");
    assert!(!OsProcessControl.is_supervised_containerd(pid, Path::new("containerd"), Path::new("30")));
    stop_child(&mut child, Duration::from_secs(5)).await;
    assert_eq!(child.id(), None, "reaped");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "no zombie left");
    assert!(!OsProcessControl.socket_accepts(&dir.path().join("none.sock")).await);
}

#[test]
fn each_exit_and_each_restart_makes_an_event_for_the_node() {
    let up = ContainerdStatus { pid: Some(1000), ready: true, ..Default::default() };
    assert!(status_events(&up, &up).is_empty(), "no change, no event");
    let down = ContainerdStatus {
        pid: None,
        ready: false,
        last_exit: Some("signal: 9 (SIGKILL)".into()),
        failures: 1,
        restart_in: Some(Duration::from_millis(500)),
        ..up.clone()
    };
    assert_eq!(
        status_events(&up, &down),
        vec![StatusEvent {
            warning: true,
            reason: "ContainerdExited",
            message: "containerd exited (signal: 9 (SIGKILL)); restarting it in 500ms (failure 1)".into(),
        }]
    );
    // The observer may see only the latest of several changes: an exit and the restart after it.
    let again = ContainerdStatus { pid: Some(1001), ready: true, restarts: 1, restart_in: None, ..down.clone() };
    assert_eq!(
        status_events(&down, &again),
        vec![StatusEvent {
            warning: false,
            reason: "ContainerdRestarted",
            message: "containerd was restarted and is ready (restart 1)".into(),
        }]
    );
    let both = status_events(&up, &again);
    assert_eq!(both.iter().map(|e| e.reason).collect::<Vec<_>>(), ["ContainerdExited", "ContainerdRestarted"]);
}

#[tokio::test(start_paused = true)]
async fn failures_and_the_next_backoff_are_in_the_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeControl::scripted(&[Behaviour::Listen, Behaviour::ExitAtOnce, Behaviour::Listen]);
    let cancel = CancellationToken::new();
    let handle = Supervisor::with_control(config(dir.path()), fake.clone()).start(cancel.clone()).await.expect("start");
    let mut rx = handle.subscribe();
    fake.crash(0, 1);
    let first = wait_status(&mut rx, |s| s.failures == 1).await;
    assert_eq!(first.restart_in, Some(Duration::from_millis(500)));
    let second = wait_status(&mut rx, |s| s.failures == 2).await;
    assert_eq!(second.restart_in, Some(Duration::from_secs(1)), "doubled after a failed restart");
    let up = wait_status(&mut rx, |s| s.restarts == 1 && s.ready).await;
    assert_eq!((up.failures, up.restart_in), (2, None));
    cancel.cancel();
    handle.join().await.expect("join");
}
