//! Test harness: a real `k1s server --disable-agent` on an ephemeral port in a temp data dir,
//! driven with stock kubectl (and curl for raw HTTP).
#![allow(dead_code)]

// The same etcd harness as the store's contract tests.
#[path = "../../../../pkg/store/tests/etcd_env/mod.rs"]
mod etcd;
#[allow(unused_imports)]
pub use etcd::{Cluster as EtcdCluster, Etcd};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The store the servers run on: `K1S_TEST_DATASTORE=etcd` gives each server its own etcd on
/// loopback (kept across its restarts); anything else, the embedded RocksDB.
fn datastore() -> Option<etcd::Etcd> {
    match std::env::var("K1S_TEST_DATASTORE").as_deref() {
        Ok("etcd") => Some(etcd::Etcd::start()),
        Ok("") | Ok("rocksdb") | Err(_) => None,
        Ok(other) => panic!("K1S_TEST_DATASTORE={other}: expected etcd or rocksdb"),
    }
}

pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into())
}

/// The `k1s` binary under test: this build's, or `K1S_BENCH_BIN` (a benchmark comparing the
/// server of another commit).
pub fn k1s_bin() -> String {
    std::env::var("K1S_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_k1s").to_string())
}

pub struct Server {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    pub port: u16,
    extra: Vec<String>,
    /// Runs the node agent (containerd + kubelet), not only the control plane.
    agent: bool,
    /// Without an agent: whether the controllers run too.
    controllers: bool,
    /// Without an agent: whether the scheduler runs too (only with the controllers).
    scheduler: bool,
    /// Extra environment of the server process.
    env: Vec<(String, String)>,
    /// The etcd the server stores in (`K1S_TEST_DATASTORE=etcd`); dropped after the server.
    etcd: Option<etcd::Etcd>,
}

impl Server {
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }
    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    pub fn start() -> Server {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        let mut s = Server {
            dir,
            child: None,
            port: 0,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            agent: false,
            controllers: false,
            scheduler: false,
            env: Vec::new(),
            etcd: datastore(),
        };
        s.spawn();
        s
    }

    /// The control plane with its controllers, without the scheduler and the agent.
    pub fn start_controllers() -> Server {
        let mut s = Self::start_unspawned();
        s.controllers = true;
        s.spawn();
        s
    }

    /// [`Server::start_controllers`] with `extra` flags.
    pub fn start_controllers_with(extra: &[&str]) -> Server {
        let mut s = Self::start_unspawned();
        s.controllers = true;
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    fn start_unspawned() -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        Server {
            dir,
            child: None,
            port: 0,
            extra: Vec::new(),
            agent: false,
            controllers: false,
            scheduler: false,
            env: Vec::new(),
            etcd: datastore(),
        }
    }

    /// A whole node: control plane, containerd and kubelet, using the local registry's images.
    /// Fails loudly when the machine cannot run it (not root, containerd missing, no registry).
    pub fn start_node() -> Server {
        node_prerequisites();
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        let mut s = Server {
            dir,
            child: None,
            port: 0,
            extra: Vec::new(),
            agent: true,
            controllers: true,
            scheduler: false,
            env: Vec::new(),
            etcd: datastore(),
        };
        s.spawn();
        s.wait_node_ready();
        s
    }

    /// The API server alone (as [`Server::start`]) on a data dir that `prepare` makes before the
    /// server first starts (e.g. mounts a small file system on it).
    pub fn start_prepared(prepare: impl FnOnce(&Path)) -> Server {
        let mut s = Self::start_unspawned();
        std::fs::create_dir_all(s.data_dir()).expect("data dir");
        prepare(&s.data_dir());
        s.spawn();
        s
    }

    /// A whole node whose data dir `prepare` fills before the server first starts (e.g. with
    /// image archives in `agent/images`).
    pub fn start_node_prepared(prepare: impl FnOnce(&Path)) -> Server {
        node_prerequisites();
        let mut s = Self::start_unspawned();
        s.agent = true;
        s.controllers = true;
        std::fs::create_dir_all(s.data_dir()).expect("data dir");
        prepare(&s.data_dir());
        s.spawn();
        s.wait_node_ready();
        s
    }

    /// A whole node with extra environment for the server (e.g. `NOTIFY_SOCKET`), returned as
    /// soon as the API serves, without waiting for the node.
    pub fn start_node_with_env(env: &[(&str, &str)]) -> Server {
        node_prerequisites();
        let mut s = Self::start_unspawned();
        s.agent = true;
        s.controllers = true;
        s.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        s.spawn();
        s
    }

    /// The control plane and the kubelet, with `extra` flags (e.g. a
    /// `--container-runtime-endpoint` served by the test's fake CRI), not waiting for the node.
    pub fn start_agent_with(extra: &[&str]) -> Server {
        let mut s = Self::start_unspawned();
        s.agent = true;
        s.controllers = true;
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    /// Whether the controllers run from the next (re)start on (control plane without agent).
    pub fn set_controllers(&mut self, on: bool) {
        self.controllers = on;
    }

    /// The API server alone on an etcd of its own, whatever `K1S_TEST_DATASTORE` says.
    pub fn start_on_etcd(extra: &[&str]) -> Server {
        let mut s = Self::start_unspawned();
        s.etcd = Some(etcd::Etcd::start());
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    /// The API server alone on a datastore it shares with other servers: `extra` names it
    /// (`--datastore-endpoint`, or `--server` and `--token`), whatever `K1S_TEST_DATASTORE` says.
    pub fn start_shared(extra: &[&str]) -> Server {
        let mut s = Self::start_unspawned();
        s.etcd = None;
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    /// A whole control plane (API server, controllers, scheduler) without the agent.
    pub fn start_control_plane() -> Server {
        let mut s = Self::start_unspawned();
        s.controllers = true;
        s.scheduler = true;
        s.spawn();
        s
    }

    /// A whole control plane (API server, controllers, scheduler) without the agent, with `extra`
    /// flags naming the datastore it shares with other servers.
    pub fn start_control_plane_shared(extra: &[&str]) -> Server {
        let mut s = Self::start_unspawned();
        s.etcd = None;
        s.controllers = true;
        s.scheduler = true;
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    /// A whole node (with the agent) whose datastore `extra` names, not waiting for the node.
    pub fn start_node_shared(extra: &[&str]) -> Server {
        node_prerequisites();
        let mut s = Self::start_unspawned();
        s.etcd = None;
        s.agent = true;
        s.controllers = true;
        s.extra = extra.iter().map(|s| s.to_string()).collect();
        s.spawn();
        s
    }

    /// SIGKILLs the server and leaves it stopped.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("kill -9");
            let _ = c.wait();
        }
    }

    /// The client URL of the server's etcd, when it runs on one.
    pub fn etcd_url(&self) -> Option<String> {
        self.etcd.as_ref().map(|e| e.url.clone())
    }

    /// The data dir of the server's etcd, when it runs on one.
    pub fn etcd_data_dir(&self) -> Option<PathBuf> {
        self.etcd.as_ref().map(|e| e.data_dir())
    }

    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// The containerd socket of this node.
    pub fn containerd_socket(&self) -> PathBuf {
        self.run_dir().join("containerd").join("containerd.sock")
    }

    pub fn wait_node_ready(&self) {
        eventually(Duration::from_secs(90), "the node to be Ready", || {
            let out = self.kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            (String::from_utf8_lossy(&out.stdout).trim() == "True").then_some(())
        });
    }

    fn spawn(&mut self) {
        let _ = std::fs::remove_file(self.kubeconfig());
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log()).expect("log");
        let mut cmd = Command::new(k1s_bin());
        cmd.arg("server");
        if self.agent {
            cmd.arg("--pause-image=127.0.0.1:5000/pause:3.10")
                .arg("--cluster-dns-upstream=none")
                .arg("--kubelet-port=0")
                .arg(format!("--run-dir={}", self.run_dir().display()))
                .arg(format!("--pod-log-dir={}", self.dir.path().join("logs").display()))
                .arg(format!("--registries-config={}", self.dir.path().join("registries.yaml").display()));
        } else {
            // The API server alone: controllers would write status behind the tests' backs.
            cmd.arg("--disable-agent");
            if !(self.controllers && self.scheduler) {
                cmd.arg(if self.controllers { "--disable=scheduler" } else { "--disable=controllers,scheduler" });
            }
        }
        cmd.arg("--https-listen-port=0")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--config={}", self.dir.path().join("config.yaml").display()))
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--write-kubeconfig={}", self.kubeconfig().display()))
            .args(self.etcd.as_ref().map(|e| format!("--datastore-endpoint={}", e.url)))
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", std::env::var("K1S_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::null())
            .stderr(log);
        self.child = Some(cmd.spawn().expect("spawn k1s"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(kc) = std::fs::read_to_string(self.kubeconfig()) {
                if let Some(port) = kc.lines().find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:")) {
                    self.port = port.trim().parse().expect("port");
                    let out = self.kubectl(&["get", "--raw", "/readyz"]);
                    if out.status.success() {
                        return;
                    }
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("k1s exited early: {status}\n{}", self.logs());
            }
            assert!(Instant::now() < deadline, "k1s did not become ready:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server process's id (0 when it is not running).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Graceful stop (SIGTERM) and start again on the same data dir.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Graceful stop, `between` on the stopped server's data dir (e.g. remounting it), and start
    /// again.
    pub fn restart_after(&mut self, between: impl FnOnce(&Path)) {
        self.stop();
        between(&self.data_dir());
        self.spawn();
    }

    /// `kill -9` and start again.
    pub fn crash_and_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("kill -9");
            let _ = c.wait();
        }
        self.spawn();
    }

    pub fn stop(&mut self) {
        let _ = self.stop_status();
    }

    /// SIGTERM, then the exit status; `None` when it was not running or had to be killed after
    /// 15 s.
    pub fn stop_status(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(status) = c.try_wait().ok().flatten() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(kubectl_bin());
        c.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path().join("home"))
            .env_remove("KUBERNETES_SERVICE_HOST");
        c
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd(args).output().expect("run kubectl")
    }

    /// Runs kubectl with `stdin` as input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut c = self
            .kubectl_cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        c.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
        c.wait_with_output().expect("kubectl output")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}\nserver log tail:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            tail(&self.logs(), 30)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_stdin(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).expect("kubectl json output")
    }

    fn tls(&self) -> PathBuf {
        self.data_dir().join("server").join("tls")
    }

    /// A raw HTTPS request with the admin certificate: (status, body).
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&Path>,
    ) -> (u16, serde_json::Value) {
        let header = content_type.map(|ct| format!("Content-Type: {ct}"));
        let (code, text) = self.curl_text(method, path, header.as_slice(), body);
        (code, serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
    }

    /// A raw HTTPS request with the admin certificate and `headers` ("Name: value"): (status,
    /// body text).
    pub fn curl_text(&self, method: &str, path: &str, headers: &[String], body: Option<&Path>) -> (u16, String) {
        let tls = self.tls();
        let mut c = Command::new("curl");
        c.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method])
            .arg("--cacert")
            .arg(tls.join("server-ca.crt"))
            .arg("--cert")
            .arg(tls.join("client-admin.crt"))
            .arg("--key")
            .arg(tls.join("client-admin.key"));
        for h in headers {
            c.arg("-H").arg(h);
        }
        if let Some(b) = body {
            c.arg("--data-binary").arg(format!("@{}", b.display()));
        }
        c.arg(format!("https://127.0.0.1:{}{}", self.port, path));
        let out = c.output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// Same as `curl` without a client certificate.
    pub fn curl_anonymous(&self, path: &str) -> u16 {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(self.tls().join("server-ca.crt"))
            .arg(format!("https://127.0.0.1:{}{}", self.port, path))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
    }

    pub fn write_file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).expect("write file");
        p
    }
}

impl Server {
    /// Deletes every pod and waits until the kubelet has torn them down, so no container outlives
    /// the test.
    fn remove_all_pods(&self) {
        // Workload controllers first, or they replace the deleted pods (whose sandboxes the
        // stop below would then leave with their CNI addresses and rules on the host).
        let workloads = "cronjobs,jobs,deployments,replicasets,statefulsets,daemonsets,replicationcontrollers";
        let _ = self.kubectl(&["delete", workloads, "--all", "-A", "--wait=false"]);
        let delete_pods = || {
            let _ = self.kubectl(&["delete", "pods", "--all", "-A", "--grace-period=0", "--force", "--wait=false"]);
        };
        delete_pods();
        let pods_dir = self.data_dir().join("agent/kubelet/pods");
        let started = Instant::now();
        let mut deleted = started;
        while started.elapsed() < Duration::from_secs(60) {
            let empty = std::fs::read_dir(&pods_dir).map(|mut d| d.next().is_none()).unwrap_or(true);
            if empty {
                return;
            }
            // A controller that had not seen its owner's deletion yet may have made another.
            if deleted.elapsed() > Duration::from_secs(5) {
                delete_pods();
                deleted = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        eprintln!("test teardown: pods still on the node after 60 s; their sandboxes are left behind");
    }

    /// Kills whatever still references this test's directory (shims, containerd) and
    /// unmounts what was mounted under it.
    fn scrub(&self) {
        let dir = self.dir.path().display().to_string();
        let _ = Command::new("pkill").args(["-KILL", "-f", &dir]).status();
        // Containers outlive their killed shims: kill what is left in this node's pod cgroups.
        if let Ok(pods) = std::fs::read_dir(self.data_dir().join("agent/kubelet/pods")) {
            for uid in pods.flatten() {
                let pod = format!("k1s/pod{}", uid.file_name().to_string_lossy());
                for root in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"] {
                    kill_cgroup_tree(&Path::new(root).join(&pod));
                }
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<String> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
            .filter(|p| p.starts_with(&dir))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let _ = Command::new("umount").args(["-l", &p]).status();
        }
    }
}

/// SIGKILLs every process in the cgroup `dir` and its children.
fn kill_cgroup_tree(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.path().is_dir() {
            kill_cgroup_tree(&e.path());
        }
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace() {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.agent {
            if self.child.is_some() {
                self.remove_all_pods();
            }
            self.stop();
            self.scrub();
        } else if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The join token of the server `s` (`k1s token create`).
pub fn join_token(s: &Server) -> String {
    let out =
        Command::new(k1s_bin()).args(["token", "create", "-d"]).arg(s.data_dir()).output().expect("k1s token create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The ports of the `kubernetes` Service's EndpointSlices (one slice per API server port),
/// sorted.
pub fn kubernetes_api_ports(s: &Server) -> Vec<u16> {
    let v = s.json(&[
        "get",
        "endpointslices",
        "-n",
        "default",
        "-l",
        "kubernetes.io/service-name=kubernetes",
        "-o",
        "json",
    ]);
    let mut ports: Vec<u16> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|i| i["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["port"].as_u64().and_then(|p| u16::try_from(p).ok()))
        .collect();
    ports.sort();
    ports
}

/// Runs `k1s server` (API only, in a temp data dir) with `extra`, expecting it to refuse to
/// start: returns its log once it exited non-zero (within 60 s).
pub fn server_refuses(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.yaml"), "").expect("config");
    let log = dir.path().join("server.log");
    let mut child = Command::new(k1s_bin())
        .args(["server", "--disable-agent", "--disable=controllers,scheduler", "--https-listen-port=0"])
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--config={}", dir.path().join("config.yaml").display()))
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--write-kubeconfig={}", dir.path().join("kubeconfig.yaml").display()))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn k1s");
    let status = exit_within(&mut child, Duration::from_secs(60), &log, &format!("k1s {extra:?}"));
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "k1s {extra:?} should have refused to start:\n{out}");
    assert!(!dir.path().join("kubeconfig.yaml").exists(), "no kubeconfig from a refused start");
    out
}

/// Waits for `child` (which logs to `log`) to exit within `limit`; kills it and fails the test
/// with the log if it is still running then.
pub fn exit_within(child: &mut Child, limit: Duration, log: &Path, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} still running after {limit:?}:\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Root, containerd and the local registry with the test images, once per test binary.
pub fn node_prerequisites() {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = READY.get_or_init(|| {
        if std::env::var("K1S_SKIP_NODE_TESTS").is_ok() {
            return Err("K1S_SKIP_NODE_TESTS is set, but node tests cannot be skipped silently".into());
        }
        let id = Command::new("id").arg("-u").output().map_err(|e| e.to_string())?;
        if String::from_utf8_lossy(&id.stdout).trim() != "0" {
            return Err("node tests need root (containerd, CNI, cgroups)".into());
        }
        for bin in ["containerd", "runc", "skopeo", "umoci", "docker-registry"] {
            let ok = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {bin} >/dev/null"))
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                return Err(format!("{bin} is not installed: run hack/install-deps.sh"));
            }
        }
        let hack = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack");
        for script in ["registry.sh start", "images.sh"] {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("{}/{script}", hack.display()))
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("hack/{script} failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        Ok(())
    });
    if let Err(e) = r {
        panic!("cannot run node tests: {e}");
    }
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Polls `f` until it returns Some, or panics after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Server {
    /// The API server alone (`--disable-agent`, no controllers) on a datastore another server
    /// may share (`--datastore-endpoint=endpoint`), whatever `K1S_TEST_DATASTORE` says, with
    /// extra flags and environment.
    pub fn start_on_datastore(endpoint: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut s = Self::start_unspawned();
        s.etcd = None;
        s.extra = std::iter::once(format!("--datastore-endpoint={endpoint}"))
            .chain(extra.iter().map(|s| s.to_string()))
            .collect();
        s.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        s.spawn();
        s
    }
}
