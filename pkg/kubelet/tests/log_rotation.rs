//! Container log rotation on the fake CRI runtime: a log over the size limit is renamed to
//! `<log>.<time>` and reopened through CRI `ReopenContainerLog`; earlier rotations are
//! compressed (all but the newest) and pruned so at most `max_files` files remain; a failed
//! reopen puts the file back; and `kubectl logs`' reader reads the rotated files in order
//! (whole log, `tailLines` reaching back into compressed files, `follow` across a rotation).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use k1s_cri::v1 as cri;
use k1s_cri::{Code, CriError, CriOp, FailureRule, FakeRuntime, RuntimeService as _};
use k1s_kubelet::logs::rotation::{Checked, LogRotator, RotationPolicy};
use k1s_kubelet::logs::{LogOptions, LogReader, RunningProbe};
use tokio::sync::mpsc;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";
/// The fake clock starts here and moves on a minute per rotation.
const START: i64 = 1_796_410_800; // 2026-12-04T19:00:00Z

struct Node {
    fake: Arc<FakeRuntime>,
    _dir: tempfile::TempDir,
    id: String,
    log: PathBuf,
}

/// A running container `app` whose log is `<tmp>/default_web_uid-web/app/0.log`.
async fn node() -> Node {
    let fake = Arc::new(FakeRuntime::new());
    fake.add_image(IMAGE);
    let dir = tempfile::tempdir().expect("tmp");
    let log_directory = dir.path().join("default_web_uid-web");
    std::fs::create_dir_all(log_directory.join("app")).expect("log dir");
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: "web".into(),
            uid: "uid-web".into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: log_directory.display().to_string(),
        ..Default::default()
    };
    let sandbox = fake
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .expect("sandbox")
        .pod_sandbox_id;
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        log_path: "app/0.log".into(),
        labels: HashMap::from([("io.kubernetes.container.name".to_string(), "app".to_string())]),
        ..Default::default()
    };
    let id = fake
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox,
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        })
        .await
        .expect("create")
        .container_id;
    fake.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.expect("start");
    let log = log_directory.join("app/0.log");
    std::fs::write(&log, "").expect("log file");
    Node { fake, _dir: dir, id, log }
}

fn policy(max_size: u64, max_files: usize) -> RotationPolicy {
    RotationPolicy { max_size: Some(max_size), max_files, ..Default::default() }
}

/// A rotator whose clock moves on a minute at each reading.
fn rotator(n: &Node, p: &RotationPolicy) -> LogRotator {
    let t = Arc::new(AtomicI64::new(START));
    LogRotator::new(n.fake.clone(), p)
        .expect("rotation on")
        .with_clock(move || Timestamp::from_second(t.fetch_add(60, Ordering::SeqCst)).expect("time"))
}

/// Appends `count` records `line <first>`, `line <first+1>`... of about 100 bytes each.
fn write_lines(log: &Path, first: usize, count: usize) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(log).expect("open log");
    for i in first..first + count {
        writeln!(f, "2026-12-04T19:00:00.000000000Z stdout F line {i} {}", "x".repeat(50)).expect("write");
    }
}

/// The files of the log's folder, by name.
fn files(n: &Node) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(n.log.parent().expect("dir"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

struct Probe(Arc<AtomicBool>);

impl RunningProbe for Probe {
    fn running(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        let v = self.0.load(Ordering::SeqCst);
        Box::pin(async move { v })
    }
}

async fn read_log(log: &Path, opts: LogOptions) -> String {
    let reader = LogReader::open(log, opts).await.expect("open");
    let (tx, mut rx) = mpsc::channel::<Bytes>(8);
    let task = tokio::spawn(async move { reader.stream(&Probe(Arc::new(AtomicBool::new(false))), tx).await });
    let mut out = Vec::new();
    while let Some(b) = rx.recv().await {
        out.extend_from_slice(&b);
    }
    task.await.expect("join").expect("stream");
    String::from_utf8(out).expect("utf8")
}

/// The line numbers in a raw CRI log file's records.
fn raw_numbers(text: &str) -> Vec<usize> {
    text.lines().map(|l| l.split(' ').nth(4).and_then(|n| n.parse().ok()).expect("record of line N")).collect()
}

fn numbers(text: &str) -> Vec<usize> {
    text.lines().map(|l| l.split(' ').nth(1).and_then(|n| n.parse().ok()).expect("line N")).collect()
}

#[tokio::test]
async fn a_log_over_the_limit_is_renamed_with_its_time_and_reopened() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 5));
    write_lines(&n.log, 0, 5);
    assert_eq!(r.rotate_all().await.expect("round"), [(n.id.clone(), Checked::Kept)], "under the limit");
    assert_eq!(n.fake.count(CriOp::ReopenContainerLog), 0);

    write_lines(&n.log, 5, 10);
    let done = r.rotate_all().await.expect("round");
    let rotated = n.log.with_file_name("0.log.20261204-190000");
    assert_eq!(done, [(n.id.clone(), Checked::Rotated(rotated.clone()))]);
    assert_eq!(n.fake.calls_of(CriOp::ReopenContainerLog).len(), 1);
    assert_eq!(n.fake.calls_of(CriOp::ReopenContainerLog)[0].target, n.id);
    assert_eq!(files(&n), ["0.log", "0.log.20261204-190000"]);
    assert_eq!(std::fs::metadata(&n.log).expect("reopened").len(), 0, "the runtime writes to a fresh file");
    assert_eq!(raw_numbers(&std::fs::read_to_string(&rotated).expect("rotated")), (0..15).collect::<Vec<_>>());
}

#[tokio::test]
async fn older_rotations_are_compressed_and_pruned_to_max_files() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 4));
    for round in 0..6 {
        write_lines(&n.log, round * 15, 15);
        let done = r.rotate_all().await.expect("round");
        assert!(matches!(done[..], [(_, Checked::Rotated(_))]), "round {round}: {done:?}");
    }
    write_lines(&n.log, 90, 3);
    // The current file, the newest rotated one plain, two compressed: four files.
    assert_eq!(files(&n), ["0.log", "0.log.20261204-190300.gz", "0.log.20261204-190400.gz", "0.log.20261204-190500"]);
    assert_eq!(n.fake.count(CriOp::ReopenContainerLog), 6);
    // What is left reads in order, compressed files included.
    assert_eq!(numbers(&read_log(&n.log, LogOptions::default()).await), (45..93).collect::<Vec<_>>());
}

#[tokio::test]
async fn tail_reaches_back_into_rotated_and_compressed_files() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 5));
    for round in 0..3 {
        write_lines(&n.log, round * 15, 15);
        r.rotate_all().await.expect("round");
    }
    write_lines(&n.log, 45, 2);
    assert_eq!(files(&n).len(), 4, "{:?}", files(&n));
    let tail = |k: u64| LogOptions { tail_lines: Some(k), ..Default::default() };
    assert_eq!(numbers(&read_log(&n.log, tail(1)).await), [46]);
    assert_eq!(numbers(&read_log(&n.log, tail(2)).await), [45, 46]);
    // Into the plain rotated file, then into a compressed one.
    assert_eq!(numbers(&read_log(&n.log, tail(10)).await), (37..47).collect::<Vec<_>>());
    assert_eq!(numbers(&read_log(&n.log, tail(20)).await), (27..47).collect::<Vec<_>>());
    assert_eq!(numbers(&read_log(&n.log, tail(1000)).await), (0..47).collect::<Vec<_>>());
    // --previous-style reads of a log that is not current work the same: only the path differs.
    let limited = LogOptions { tail_lines: Some(20), limit_bytes: Some(10), ..Default::default() };
    assert_eq!(read_log(&n.log, limited).await, "line 27 xx");
}

#[tokio::test]
async fn a_line_split_across_a_rotation_counts_once() {
    let n = node().await;
    let rotated = n.log.with_file_name("0.log.20261204-185900");
    std::fs::write(
        &rotated,
        "2026-12-04T18:59:00Z stdout F one\n2026-12-04T18:59:01Z stdout F two\n2026-12-04T18:59:02Z stdout P thr\n",
    )
    .expect("rotated");
    std::fs::write(&n.log, "2026-12-04T18:59:03Z stdout F ee\n2026-12-04T18:59:04Z stdout F four\n").expect("log");
    let tail = |k: u64| LogOptions { tail_lines: Some(k), ..Default::default() };
    assert_eq!(read_log(&n.log, tail(2)).await, "three\nfour\n");
    assert_eq!(read_log(&n.log, tail(3)).await, "two\nthree\nfour\n");
    assert_eq!(read_log(&n.log, LogOptions::default()).await, "one\ntwo\nthree\nfour\n");
}

#[tokio::test]
async fn a_failed_reopen_puts_the_log_back_for_the_next_round() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 5));
    write_lines(&n.log, 0, 15);
    n.fake.inject_failure(
        FailureRule::new(CriOp::ReopenContainerLog, CriError::rpc(CriOp::ReopenContainerLog, Code::Unknown, "busy"))
            .times(1),
    );
    let err = r.check(&n.id).await.expect_err("reopen fails");
    assert!(err.to_string().contains(&n.id), "{err}");
    assert_eq!(files(&n), ["0.log"], "renamed back");
    assert_eq!(raw_numbers(&std::fs::read_to_string(&n.log).expect("log")).len(), 15);
    assert!(matches!(r.check(&n.id).await.expect("retried"), Checked::Rotated(_)));
    assert_eq!(files(&n), ["0.log", "0.log.20261204-190100"]);
}

#[tokio::test]
async fn a_missing_log_is_reopened_and_stopped_containers_are_left_alone() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 5));
    std::fs::remove_file(&n.log).expect("rm");
    assert_eq!(r.check(&n.id).await.expect("check"), Checked::Kept);
    assert!(n.log.exists(), "the runtime created it again");
    assert_eq!(n.fake.count(CriOp::ReopenContainerLog), 1);

    write_lines(&n.log, 0, 15);
    n.fake.exit_container(&n.id, 0).expect("exit");
    assert!(r.rotate_all().await.expect("round").is_empty(), "an exited container writes nothing more");
    assert_eq!(files(&n), ["0.log"]);
}

#[tokio::test]
async fn two_rotations_in_one_second_wait_for_the_next() {
    let n = node().await;
    let fixed = Timestamp::from_second(START).expect("time");
    let r = LogRotator::new(n.fake.clone(), &policy(1000, 5)).expect("on").with_clock(move || fixed);
    write_lines(&n.log, 0, 15);
    assert!(matches!(r.check(&n.id).await.expect("first"), Checked::Rotated(_)));
    write_lines(&n.log, 15, 15);
    assert_eq!(r.check(&n.id).await.expect("second"), Checked::Postponed);
    assert_eq!(files(&n), ["0.log", "0.log.20261204-190000"], "nothing overwritten");
}

#[tokio::test]
async fn follow_goes_on_in_the_new_file_after_a_rotation() {
    let n = node().await;
    let r = rotator(&n, &policy(1000, 5));
    write_lines(&n.log, 0, 15);
    let opts = LogOptions { follow: true, tail_lines: Some(1), ..Default::default() };
    let reader = LogReader::open(&n.log, opts).await.expect("open");
    let (tx, mut rx) = mpsc::channel::<Bytes>(8);
    let running = Arc::new(AtomicBool::new(true));
    let probe = Probe(running.clone());
    let task = tokio::spawn(async move { reader.stream(&probe, tx).await });
    let mut seen = next_chunk(&mut rx).await;
    assert_eq!(numbers(&seen), [14]);
    write_lines(&n.log, 15, 1);
    assert!(matches!(r.check(&n.id).await.expect("rotate"), Checked::Rotated(_)));
    write_lines(&n.log, 16, 2);
    while numbers(&seen).len() < 4 {
        seen.push_str(&next_chunk(&mut rx).await);
    }
    assert_eq!(numbers(&seen), [14, 15, 16, 17]);
    running.store(false, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("ends").expect("join").expect("stream");
}

async fn next_chunk(rx: &mut mpsc::Receiver<Bytes>) -> String {
    let b = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("in time").expect("chunk");
    String::from_utf8(b.to_vec()).expect("utf8")
}

#[test]
fn the_default_policy_is_upstreams() {
    let p = RotationPolicy::default();
    assert_eq!(p.max_size, Some(10 * 1024 * 1024));
    assert_eq!((p.max_files, p.workers, p.monitor_interval), (5, 1, Duration::from_secs(10)));
    let off = RotationPolicy { max_size: None, ..Default::default() };
    assert!(LogRotator::new(Arc::new(FakeRuntime::new()), &off).is_none(), "a negative size turns rotation off");
}
