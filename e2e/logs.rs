//! End to end with stock kubectl and real containerd: container logs are rotated as upstream's
//! kubelet rotates them (issue 20, "bounded logs"). A pod writes about 31 MiB of log; its log
//! folder never holds more than 5 files (`--container-log-max-files`) and no plain file grows
//! much past 10 MiB (`--container-log-max-size`); `kubectl logs --tail` still reads the end of
//! the log, across the rotated files, and `kubectl logs -f` sees every line across the
//! rotations; deleting the pod removes its log folder.
//!
//! The server checks logs every 500 ms (`K1S_CONTAINER_LOG_MONITOR_INTERVAL`, instead of 10 s)
//! and the pod paces its output (1 MiB, then a quarter second's pause), so a file cannot grow
//! far past the limit between two checks.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";
const MIB: u64 = 1024 * 1024;
/// How far past the limit a file may grow: what the pod writes between two checks, with room
/// for a slow check on a loaded machine.
const SLACK: u64 = 3 * MIB;

/// The log files of the container in use: leftovers of a compression in progress (`*.tmp`, a
/// plain file whose `.gz` is already written) are not counted.
fn in_use(dir: &Path) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let all: Vec<(String, u64)> = entries
        .flatten()
        .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), e.metadata().ok()?.len())))
        .collect();
    let mut out: Vec<(String, u64)> = all
        .iter()
        .filter(|(n, _)| !n.ends_with(".tmp") && !all.iter().any(|(o, _)| *o == format!("{n}.gz")))
        .cloned()
        .collect();
    out.sort();
    out
}

/// The batch and line numbers a line of the pod starts with.
fn numbers(line: &str) -> (u32, u32) {
    let mut f = line.split(' ');
    let i = f.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad line {line:.40}"));
    let j = f.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad line {line:.40}"));
    (i, j)
}

/// Each line follows the one before it: none missing or repeated across a rotation.
fn assert_consecutive(seq: &[(u32, u32)], what: &str) {
    for w in seq.windows(2) {
        let ((i, j), next) = (w[0], w[1]);
        let expected = if j == 1023 { (i + 1, 0) } else { (i, j + 1) };
        assert_eq!(next, expected, "{what}: lines out of order or missing across a rotation");
    }
}

#[test]
fn a_chatty_pod_keeps_at_most_five_log_files_of_about_ten_mib_and_its_folder_goes_with_it() {
    let s = Server::start_node_with_env(&[("K1S_CONTAINER_LOG_MONITOR_INTERVAL", "500ms")]);
    s.wait_node_ready();
    // 30 batches of 1024 lines of 1 KiB (about 1.05 MiB each on disk with the CRI prefix),
    // then a marker line, then quiet.
    let script = r#"l=x; for k in 1 2 3 4 5 6 7 8 9 10; do l=$l$l; done; i=0; while [ $i -lt 30 ]; do j=0; while [ $j -lt 1024 ]; do echo "$i $j $l"; j=$((j+1)); done; i=$((i+1)); usleep 250000; done; echo END-MARKER; exec sleep 3600"#;
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: chatty}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", {script:?}]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let uid = eventually(Duration::from_secs(60), "pod chatty running", || {
        let p = s.json(&["get", "pod", "chatty"]);
        (p["status"]["phase"] == "Running").then(|| p["metadata"]["uid"].as_str().unwrap_or_default().to_string())
    });
    // Follow from the start: the stream goes on in each new file after a rotation.
    let mut follow =
        s.kubectl_cmd(&["logs", "-f", "chatty"]).stdout(std::process::Stdio::piped()).spawn().expect("kubectl logs -f");
    let followed = {
        let stdout = follow.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            let mut seq = Vec::new();
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "END-MARKER" {
                    return (seq, true);
                }
                seq.push(numbers(&line));
            }
            (seq, false)
        })
    };
    let pod_dir: PathBuf = s.dir.path().join("logs").join(format!("default_chatty_{uid}"));
    let dir = pod_dir.join("c");

    // Watch the folder while the pod writes: never more than 5 files, none far over 10 MiB.
    let deadline = Instant::now() + Duration::from_secs(300);
    let (mut most_files, mut biggest, mut rotations_seen) = (0usize, 0u64, 0usize);
    loop {
        let files = in_use(&dir);
        most_files = most_files.max(files.len());
        biggest = biggest.max(files.iter().filter(|(n, _)| !n.ends_with(".gz")).map(|(_, l)| *l).max().unwrap_or(0));
        rotations_seen = rotations_seen.max(files.iter().filter(|(n, _)| n.starts_with("0.log.")).count());
        assert!(files.len() <= 5, "more than 5 log files: {files:?}");
        assert!(biggest <= 10 * MIB + SLACK, "a log file grew to {biggest} bytes: {files:?}");
        let out = s.kubectl(&["logs", "chatty", "--tail=1"]);
        if String::from_utf8_lossy(&out.stdout).trim() == "END-MARKER" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pod did not finish writing: {files:?}\n{}",
            common::tail(&s.logs(), 30)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The last rotation may still be due: wait until the current file is under the limit.
    let files = eventually(Duration::from_secs(30), "the current log under 10 MiB", || {
        let files = in_use(&dir);
        files.iter().any(|(n, l)| n == "0.log" && *l < 10 * MIB).then_some(files)
    });
    assert!(files.len() <= 5, "{files:?}");
    let gz: Vec<&(String, u64)> = files.iter().filter(|(n, _)| n.ends_with(".gz")).collect();
    // 31 MiB at 10 MiB (and a bit, written between two checks) a file: at least two
    // rotations, the older one compressed.
    assert!(!gz.is_empty() && files.len() >= 3, "{files:?}");
    for (name, len) in &files {
        assert!(*len <= 10 * MIB + SLACK, "{name} has {len} bytes");
        if name.ends_with(".gz") {
            assert!(*len < MIB, "{name} is compressed ({len} bytes)");
        }
    }
    eprintln!("log files: {files:?}; at most {most_files} at once, largest plain file {biggest} bytes, {rotations_seen} rotated files seen at once");

    // The end of the log, and a tail longer than the current file: it reaches back into the
    // rotated file, in order.
    assert_eq!(s.ok(&["logs", "chatty", "--tail=1"]).trim(), "END-MARKER");
    let tail = s.ok(&["logs", "chatty", "--tail=15000"]);
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 15000, "15000 lines asked for");
    assert_eq!(lines.last().copied(), Some("END-MARKER"));
    let seq: Vec<(u32, u32)> = lines[..lines.len() - 1].iter().map(|l| numbers(l)).collect();
    assert_eq!(seq.last().copied(), Some((29, 1023)));
    assert_consecutive(&seq, "kubectl logs --tail=15000");

    let (seq, ended) = followed.join().expect("follower");
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(ended, "kubectl logs -f did not see the last line; it got {} lines", seq.len());
    assert_consecutive(&seq, "kubectl logs -f");
    assert_eq!(seq.len(), 30 * 1024, "kubectl logs -f saw every line across the rotations");

    // Deleting the pod removes its log folder.
    s.ok(&["delete", "pod", "chatty", "--wait=true"]);
    eventually(Duration::from_secs(30), "the pod's log folder removed", || (!pod_dir.exists()).then_some(()));
}
