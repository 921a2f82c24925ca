//! End to end with the official Python client (`pip install kubernetes`) and real containerd:
//! exec and attach over WebSocket with stdin sent as text and as binary frames, on
//! `v5.channel.k8s.io` (translated to SPDY by the API server) and `v4.channel.k8s.io` (passed
//! through to the runtime), and v5's stdin close ending `cat` (issue 16, defect 3).

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e/python").join(name)
}

/// Fails loudly when the client is missing: hack/install-deps.sh installs it.
fn python_client_prerequisite() {
    let out = Command::new("python3")
        .args(["-c", "import kubernetes, kubernetes.stream; print(kubernetes.__version__)"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the Python `kubernetes` client is missing (hack/install-deps.sh installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("python kubernetes client {}", String::from_utf8_lossy(&out.stdout).trim());
}

#[test]
fn python_client_exec_and_attach_send_stdin_as_text_and_binary_frames_and_close_it() {
    python_client_prerequisite();
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: py}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: ["sleep", "3600"]
  - name: reader
    image: {IMAGE}
    stdin: true
    command: ["sh", "-c", "while read l; do echo \"got $l\"; done"]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    eventually(Duration::from_secs(60), "pod py Running", || {
        let out = s.kubectl(&["get", "pod", "py", "-o", "json"]);
        let p: Value = serde_json::from_slice(&out.stdout).ok()?;
        (p["status"]["phase"] == "Running").then_some(())
    });
    let out = Command::new("python3")
        .arg(script("exec_stdin.py"))
        .arg(s.kubeconfig())
        .arg("py")
        .env("HOME", s.dir.path().join("home"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("exec_stdin.py:\n{stdout}{stderr}");
    assert!(
        out.status.success(),
        "exec_stdin.py failed ({:?}):\n{stdout}\n{stderr}\nserver log:\n{}",
        out.status.code(),
        common::tail(&s.logs(), 40)
    );
    for line in [
        "ok v5 text stdin: 'from-a-text-frame'",
        "ok v5 binary stdin: 'from-a-binary-frame'",
        "ok v5 exit code: 7",
        "ok v4 subprotocol: 'v4.channel.k8s.io'",
        "ok v4 text stdin: 'from-a-text-frame'",
        "ok v4 binary stdin: 'from-a-binary-frame'",
        "ok v4 exit code: 7",
        "ok v5 cat echo: 'cat me'",
        "ok v5 cat exit code after stdin closed: 0",
        "ok attach text stdin: 'got text'",
        "ok attach binary stdin: 'got binary'",
        "all checks passed",
    ] {
        assert!(stdout.lines().any(|l| l == line), "missing {line:?} in:\n{stdout}\n{stderr}");
    }
}
