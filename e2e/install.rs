//! End to end: k1s installed and removed like a product (issue 19). The Debian package built from
//! this test build's binary installs, runs a node with a pod and goes away with dpkg; `k1s
//! killall` leaves no shim or mount and a later start runs the pods again; `k1s uninstall` leaves
//! the host's networking, mounts and processes as they were; installing the tarball again upgrades
//! in place and the pods keep their containers.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, node_prerequisites, Server};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The flags that keep a node's folders inside `dir` (as the test harness runs it).
fn node_dirs(dir: &Path) -> Vec<String> {
    vec![
        format!("--data-dir={}", dir.join("data").display()),
        format!("--run-dir={}", dir.join("run").display()),
        format!("--pod-log-dir={}", dir.join("logs").display()),
    ]
}

/// `k1s uninstall` of the harness node `s` (its folders; its own config dir).
fn uninstall(bin: &str, dir: &Path) -> Output {
    run(Command::new(bin)
        .arg("uninstall")
        .args(node_dirs(dir))
        .arg(format!("--config-dir={}", dir.join("etc").display())))
}

fn pods_manifest(names: &[&str]) -> String {
    let mut m = String::new();
    for name in names {
        m.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {name}}}}}\nspec:\n  \
             terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {IMAGE}\n    \
             command: [\"sh\", \"-c\", \"mkdir -p /www; echo {name} > /www/index.html; exec httpd -f -p 8080 -h /www\"]\n    \
             readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}\n    \
             volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n  volumes: [{{name: scratch, emptyDir: {{}}}}]\n"
        ));
    }
    m
}

fn wait_running(s: &Server, names: &[&str]) {
    for name in names {
        eventually(Duration::from_secs(90), &format!("pod {name} Ready"), || {
            let out =
                s.kubectl(&["get", "pod", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"]);
            (text(&out).trim() == "True").then_some(())
        });
    }
}

fn container_ids(s: &Server, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            s.ok(&["get", "pod", n, "-o", "jsonpath={.status.containerStatuses[0].containerID}"]).trim().to_string()
        })
        .collect()
}

/// Shims of the containerd whose socket is under `run_dir`.
fn shims_of(run_dir: &Path) -> Vec<String> {
    let socket = run_dir.join("containerd").join("containerd.sock").display().to_string();
    process_lines().into_iter().filter(|l| l.contains("containerd-shim") && l.contains(&socket)).collect()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.starts_with(&d)))
        .map(str::to_string)
        .collect()
}

/// The command lines of the processes k1s could leave behind: k1s, containerd, shims and
/// anything in the pods' cgroups (`/k1s/…`).
fn process_lines() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if e.file_name().to_str().is_none_or(|n| !n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else { continue };
        if raw.is_empty() {
            continue;
        }
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ").trim().to_string();
        let name = cmdline.split_whitespace().next().and_then(|a| a.rsplit('/').next()).unwrap_or("").to_string();
        let cgroup = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        let in_pod = cgroup.lines().any(|l| l.contains(":/k1s/"));
        // Other test servers on this machine that never start containerd are not this test's.
        let foreign = cmdline.contains("--disable-agent") || cmdline.contains("--container-runtime-endpoint");
        if (name == "k1s" || name == "containerd" || name.starts_with("containerd-shim") || in_pod) && !foreign {
            out.push(cmdline);
        }
    }
    out.sort();
    out
}

/// An nftables rule without its packet and byte counts (other traffic moves them).
fn without_counters(rule: &str) -> String {
    let words: Vec<&str> = rule.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "packets" || words[i] == "bytes" {
            i += 2;
            continue;
        }
        out.push(words[i]);
        i += 1;
    }
    out.join(" ")
}

/// What the host looks like to someone checking that k1s left nothing behind. Interfaces by
/// name and type only (their counters, state and qdisc legitimately vary).
fn host_snapshot() -> BTreeSet<String> {
    let mut lines = BTreeSet::new();
    let cmd = |args: &[&str]| text(&run(Command::new(args[0]).args(&args[1..])));
    for l in cmd(&["nft", "list", "ruleset"]).lines() {
        lines.insert(format!("nft: {}", without_counters(l)));
    }
    for l in cmd(&["ip", "rule"]).lines() {
        lines.insert(format!("ip rule: {l}"));
    }
    for l in cmd(&["ip", "route", "show", "table", "all"]).lines() {
        lines.insert(format!("ip route: {l}"));
    }
    for l in cmd(&["ip", "-o", "link"]).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let kind = f.iter().position(|w| w.starts_with("link/")).map_or("", |i| f[i]);
        lines.insert(format!("ip link: {} {kind}", f.get(1).unwrap_or(&"")));
    }
    for l in cmd(&["ip", "netns"]).lines() {
        lines.insert(format!("ip netns: {l}"));
    }
    for l in std::fs::read_to_string("/proc/mounts").expect("/proc/mounts").lines() {
        lines.insert(format!("mount: {l}"));
    }
    for l in process_lines() {
        lines.insert(format!("process: {l}"));
    }
    lines
}

#[test]
fn killall_leaves_no_shim_or_mount_and_a_restart_runs_the_pods_again_from_the_api() {
    let mut s = Server::start_node();
    let names = ["one", "two", "three"];
    s.ok_stdin(&["apply", "-f", "-"], &pods_manifest(&names));
    wait_running(&s, &names);
    let before = container_ids(&s, &names);
    assert!(!shims_of(&s.run_dir()).is_empty(), "the pods run in shims");

    let out = run(Command::new(common::k1s_bin()).arg("killall").args(node_dirs(s.dir.path())));
    println!("{}", text(&out));
    assert_eq!(shims_of(&s.run_dir()), Vec::<String>::new(), "no shim may survive killall");
    assert_eq!(mounts_under(s.dir.path()), Vec::<String>::new(), "no mount may survive killall");
    assert!(s.data_dir().join("server").exists(), "killall keeps the data dir");
    assert!(
        !process_lines().iter().any(|l| l.contains(&s.data_dir().display().to_string())),
        "no k1s or containerd of this node may survive killall: {:?}",
        process_lines()
    );

    s.restart();
    s.wait_node_ready();
    // The API still shows the killed containers until the kubelet has started new ones: an
    // adopted stale container would keep its id forever.
    eventually(Duration::from_secs(90), "new containers for every pod", || {
        let after = container_ids(&s, &names);
        before.iter().zip(&after).all(|(b, a)| !a.is_empty() && a != b).then_some(())
    });
    wait_running(&s, &names);
    assert_eq!(shims_of(&s.run_dir()).len(), names.len(), "one shim per pod, none left over");
}

#[test]
fn uninstall_leaves_the_host_as_it_was() {
    node_prerequisites();
    // What earlier nodes on this host left (their nftables table, routing rules, bridge) is not
    // this test's subject: start from a host without k1s.
    let clean = tempfile::tempdir().expect("tempdir");
    uninstall(&common::k1s_bin(), clean.path());
    let before = host_snapshot();

    let s = Server::start_node();
    let names = ["web1", "web2", "web3"];
    s.ok_stdin(&["apply", "-f", "-"], &pods_manifest(&names));
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: NodePort\n  selector: {app: web1}\n  \
         ports: [{port: 80, targetPort: 8080}]\n",
    );
    wait_running(&s, &names);
    let node_port = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    eventually(Duration::from_secs(30), "the NodePort rules", || {
        let rules = text(&run(Command::new("nft").args(["list", "table", "ip", "k1s"])));
        rules.contains(node_port.trim()).then_some(())
    });
    let during = host_snapshot();
    assert!(during.difference(&before).count() > 5, "a running node changes the host");

    let started = Instant::now();
    let out = uninstall(&common::k1s_bin(), s.dir.path());
    println!("k1s uninstall took {:?}:\n{}", started.elapsed(), text(&out));
    let after = host_snapshot();
    let added: Vec<_> = after.difference(&before).collect();
    let removed: Vec<_> = before.difference(&after).collect();
    assert!(added.is_empty() && removed.is_empty(), "uninstall left the host changed:\n+ {added:#?}\n- {removed:#?}");
    assert!(!s.data_dir().exists(), "the data dir must be gone");
}

/// A `k1s server` run from the installed package's binary, in the foreground as a user would
/// where systemd is not PID 1, with its folders in a temp dir.
struct Installed {
    dir: tempfile::TempDir,
    child: std::process::Child,
}

impl Installed {
    fn start(bin: &str) -> Installed {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
        let child = Command::new(bin)
            .arg("server")
            .args(node_dirs(dir.path()))
            .arg("--pause-image=127.0.0.1:5000/pause:3.10")
            .arg("--cluster-dns-upstream=none")
            .arg("--kubelet-port=0")
            .arg("--https-listen-port=0")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--write-kubeconfig={}", dir.path().join("kubeconfig.yaml").display()))
            .arg(format!("--registries-config={}", dir.path().join("registries.yaml").display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the installed k1s");
        Installed { dir, child }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(common::kubectl_bin())
            .args(args)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig.yaml"))
            .env("HOME", self.dir.path())
            .output()
            .expect("kubectl")
    }

    fn wait(&mut self, what: &str, args: &[&str], want: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if text(&self.kubectl(args)).trim() == want {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the installed k1s exited ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        common::tail(&std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default(), 40)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test must not leave its pods for the next run.
        if std::thread::panicking() {
            let _ = Command::new(common::k1s_bin())
                .arg("uninstall")
                .args(node_dirs(self.dir.path()))
                .arg(format!("--config-dir={}", self.dir.path().join("etc").display()))
                .output();
        }
    }
}

/// Purges the package when the test fails after installing it, so the next run starts clean.
struct PurgeOnFailure;

impl Drop for PurgeOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new("dpkg").args(["--purge", "k1s"]).output();
        }
    }
}

const PACKAGE_FILES: &[&str] = &[
    "/usr/bin/k1s",
    "/usr/bin/k1s-uninstall.sh",
    "/usr/bin/k1s-killall.sh",
    "/lib/systemd/system/k1s.service",
    "/etc/k1s/config.yaml",
];

#[test]
fn the_debian_package_installs_runs_a_pod_and_is_removed_and_purged() {
    node_prerequisites();
    assert!(!Path::new("/usr/bin/k1s").exists(), "/usr/bin/k1s already exists: this test installs the package there");
    let dist = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    run(Command::new(repo().join("hack/package.sh")).env("K1S_BINARY", common::k1s_bin()).env("K1S_DIST", dist.path()));
    println!("hack/package.sh took {:?}", started.elapsed());
    let files: Vec<PathBuf> = std::fs::read_dir(dist.path()).expect("dist").flatten().map(|e| e.path()).collect();
    let find = |prefix: &str, suffix: &str| {
        files
            .iter()
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
            })
            .unwrap_or_else(|| panic!("no {prefix}*{suffix} in {files:?}"))
            .clone()
    };
    let deb = find("k1s_", ".deb");
    let tarball = find("k1s-", "-linux-amd64.tar.gz");
    let listing = text(&run(Command::new("tar").arg("-tzf").arg(&tarball)));
    for f in ["/bin/k1s", "/bin/k1s-uninstall.sh", "/bin/k1s-killall.sh", "/systemd/k1s.service", "/install.sh"] {
        assert!(listing.lines().any(|l| l.ends_with(f)), "the tarball lacks {f}:\n{listing}");
    }

    // lintian: no error-level tag.
    let lint = Command::new("lintian").arg(&deb).output().expect("lintian (hack/install-deps.sh installs it)");
    let report = format!("{}{}", text(&lint), String::from_utf8_lossy(&lint.stderr));
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E: ")).collect();
    assert!(errors.is_empty(), "lintian errors:\n{report}");

    let _purge = PurgeOnFailure;
    run(Command::new("apt-get").args(["install", "-y", "-qq"]).arg(&deb).env("DEBIAN_FRONTEND", "noninteractive"));
    for f in PACKAGE_FILES {
        assert!(Path::new(f).exists(), "the package did not install {f}");
    }
    let conffiles = text(&run(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "k1s"])));
    assert!(conffiles.contains("/etc/k1s/config.yaml"), "config.yaml must be a conffile: {conffiles}");
    let depends = text(&run(Command::new("dpkg-query").args(["-W", "-f=${Depends}", "k1s"])));
    for d in ["containerd", "runc", "containernetworking-plugins", "nftables", "iproute2", "conntrack"] {
        assert!(depends.contains(d), "Depends lacks {d}: {depends}");
    }
    // systemd need not be PID 1 for this.
    run(Command::new("systemd-analyze").args(["verify", "/lib/systemd/system/k1s.service"]));
    let unit = std::fs::read_to_string("/lib/systemd/system/k1s.service").expect("unit");
    assert!(unit.contains("KillMode=process") && unit.contains("ExecStart=/usr/bin/k1s server"), "{unit}");

    let mut node = Installed::start("/usr/bin/k1s");
    let ready = "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}";
    node.wait("the node to be Ready", &["get", "nodes", "-o", ready], "True");
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: hello}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  \
         - {{name: c, image: \"{IMAGE}\", command: [sleep, \"3600\"]}}\n"
    );
    let mut apply = Command::new(common::kubectl_bin())
        .args(["apply", "-f", "-"])
        .env("KUBECONFIG", node.dir.path().join("kubeconfig.yaml"))
        .env("HOME", node.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("kubectl apply");
    std::io::Write::write_all(&mut apply.stdin.take().expect("stdin"), pod.as_bytes()).expect("write manifest");
    assert!(apply.wait().expect("kubectl apply").success());
    node.wait("pod hello Running", &["get", "pod", "hello", "-o", "jsonpath={.status.phase}"], "Running");

    // The packaged uninstall script takes the node down (the test node's folders).
    let dir = node.dir.path().to_path_buf();
    run(Command::new("/usr/bin/k1s-uninstall.sh")
        .args(node_dirs(&dir))
        .arg(format!("--config-dir={}", dir.join("etc").display())));
    assert!(node.child.try_wait().expect("wait").is_some(), "k1s-uninstall.sh must stop the server");
    assert!(!dir.join("data").exists(), "the data dir must be gone");

    run(Command::new("dpkg").args(["-r", "k1s"]));
    for f in PACKAGE_FILES.iter().filter(|f| !f.starts_with("/etc/")) {
        assert!(!Path::new(f).exists(), "dpkg -r left {f}");
    }
    assert!(Path::new("/etc/k1s/config.yaml").exists(), "dpkg -r keeps the conffile");
    run(Command::new("dpkg").args(["--purge", "k1s"]));
    assert!(!Path::new("/etc/k1s").exists(), "dpkg --purge must remove /etc/k1s");
}

/// `hack/install.sh` run from the tarball where systemd is not PID 1: the server in the
/// foreground with the default folders and ports. Stopped (SIGTERM, as `KillMode=process` stops
/// only k1s) and, when the test fails, uninstalled on drop.
struct Foreground {
    child: std::process::Child,
    log: PathBuf,
}

const KUBECONFIG: &str = "/etc/k1s/k1s.yaml";

impl Foreground {
    fn install(tarball: &Path, log: PathBuf) -> Foreground {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("log");
        let child = Command::new(repo().join("hack/install.sh"))
            .env("K1S_ARTIFACT", tarball)
            .env("K1S_PAUSE_IMAGE", "127.0.0.1:5000/pause:3.10")
            .env("K1S_CLUSTER_DNS_UPSTREAM", "none")
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("hack/install.sh");
        Foreground { child, log }
    }

    fn kubectl(args: &[&str]) -> String {
        let out =
            Command::new(common::kubectl_bin()).args(args).env("KUBECONFIG", KUBECONFIG).output().expect("kubectl");
        text(&out).trim().to_string()
    }

    fn wait(&mut self, what: &str, args: &[&str], want: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Self::kubectl(args) != want {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the installed k1s exited ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM to the server (install.sh exec'd into it), then its exit.
    fn stop(&mut self) {
        run(Command::new("kill").args(["-TERM", &self.child.id().to_string()]));
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "k1s server exited with {status} on SIGTERM:\n{}", self.log());
    }

    fn log(&self) -> String {
        common::tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 40)
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = Command::new("/usr/local/bin/k1s").arg("uninstall").output();
        }
    }
}

/// Issue 19: re-running `hack/install.sh` upgrades in place. Only the server restarts (the
/// unit's `KillMode=process`; here SIGTERM to the foreground server), the pod goes on in the
/// same container, adopted by the new server.
#[test]
fn installing_the_tarball_again_upgrades_in_place_and_the_pod_keeps_its_container() {
    node_prerequisites();
    for path in ["/usr/local/bin/k1s", "/var/lib/k1s", KUBECONFIG] {
        assert!(!Path::new(path).exists(), "{path} already exists: this test installs k1s with its defaults");
    }
    let dist = tempfile::tempdir().expect("tempdir");
    run(Command::new(repo().join("hack/package.sh")).env("K1S_BINARY", common::k1s_bin()).env("K1S_DIST", dist.path()));
    let tarball = std::fs::read_dir(dist.path())
        .expect("dist")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "gz"))
        .expect("a tarball in dist");
    let log = dist.path().join("install.log");
    let ready = ["get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}"];

    let mut first = Foreground::install(&tarball, log.clone());
    first.wait("the node Ready", &ready, "True");
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: kept}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  \
         - {{name: c, image: \"{IMAGE}\", command: [sleep, \"3600\"]}}\n"
    );
    let manifest = dist.path().join("pod.yaml");
    std::fs::write(&manifest, pod).expect("manifest");
    Foreground::kubectl(&["apply", "-f", &manifest.display().to_string()]);
    first.wait("pod kept Running", &["get", "pod", "kept", "-o", "jsonpath={.status.phase}"], "Running");
    let container = ["get", "pod", "kept", "-o", "jsonpath={.status.containerStatuses[0].containerID}"];
    let before = Foreground::kubectl(&container);
    assert!(before.starts_with("containerd://"), "{before}");
    first.stop();

    let mut second = Foreground::install(&tarball, log);
    second.wait("the node Ready again", &ready, "True");
    second.wait(
        "pod kept Running in the same container",
        &["get", "pod", "kept", "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].containerID}"],
        &format!("Running {before}"),
    );
    let restarts =
        Foreground::kubectl(&["get", "pod", "kept", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"]);
    assert_eq!(restarts, "0", "{}", second.log());
    second.stop();
    run(Command::new("/usr/local/bin/k1s").arg("uninstall"));
    assert!(!Path::new("/var/lib/k1s").exists() && !Path::new("/usr/local/bin/k1s").exists());
}
