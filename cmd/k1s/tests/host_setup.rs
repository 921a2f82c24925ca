//! Issue 19, the server side: `k1s check` and the preflight `k1s server` runs, the config file
//! and its `config.yaml.d` drop-ins, certificate renewal without a restart, `k1s certificate`,
//! and sd_notify (`STATUS=`, `READY=1`, `WATCHDOG=1`). Every test runs the real binary.
//! None of them starts the node agent, so none needs the host-wide e2e lock.

mod common;

use common::{eventually, k1s_bin, Server};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0").expect("bind").local_addr().expect("addr").port()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `k1s check` with a config file of its own in `dir` (never the host's /etc/k1s).
fn check(dir: &Path, args: &[&str], path_var: Option<&str>) -> Output {
    let mut c = Command::new(k1s_bin());
    c.arg("check")
        .arg(format!("--config={}", dir.join("config.yaml").display()))
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .args(args)
        .env_remove("K1S_CONFIG_FILE");
    if let Some(p) = path_var {
        c.env("PATH", p);
    }
    c.output().expect("run k1s check")
}

/// Runs `k1s server` to its exit (it must exit within `limit`).
fn server_exits(dir: &Path, args: &[&str], path_var: Option<&str>, limit: Duration) -> Output {
    // Into a file, not a pipe: a server that says much cannot block on a full pipe.
    let log_path = dir.join("server.log");
    let log = std::fs::File::create(&log_path).expect("server log");
    let mut c = Command::new(k1s_bin());
    c.arg("server")
        .arg(format!("--config={}", dir.join("config.yaml").display()))
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg(format!("--write-kubeconfig={}", dir.join("kubeconfig.yaml").display()))
        .args(args)
        .env_remove("K1S_CONFIG_FILE")
        .env_remove("NOTIFY_SOCKET")
        .stdout(log.try_clone().expect("server log"))
        .stderr(log);
    if let Some(p) = path_var {
        c.env("PATH", p);
    }
    let mut child = c.spawn().expect("spawn k1s server");
    let status = common::exit_within(&mut child, limit, &log_path, "k1s server");
    Output { status, stdout: std::fs::read(&log_path).unwrap_or_default(), stderr: Vec::new() }
}

fn temp_with_config(config: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::write(d.path().join("config.yaml"), config).expect("config");
    d
}

#[test]
fn check_passes_on_this_machine_with_the_node_agent() {
    let d = temp_with_config("");
    let (api, kubelet) = (free_port().to_string(), free_port().to_string());
    let out = check(d.path(), &[&format!("--https-listen-port={api}"), &format!("--kubelet-port={kubelet}")], None);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for line in [
        "PASS kernel version",
        "PASS root",
        "PASS kernel module br_netfilter",
        "PASS kernel module overlay",
        "PASS kernel module nf_tables",
        "PASS binary containerd",
        "PASS binary runc",
        "PASS binary nft",
        "PASS CNI plugin bridge",
        "PASS CNI plugin host-local",
        "PASS CNI plugin loopback",
        "PASS CNI plugin portmap",
        &format!("PASS port {api}"),
        &format!("PASS port {kubelet}"),
        "PASS free disk space",
        "PASS clock",
        "k1s server can start here",
    ] {
        assert!(t.contains(line), "missing {line:?} in:\n{t}");
    }
    assert!(t.contains("cgroup v1 controller memory") || t.contains("cgroup v2 controller memory"), "{t}");
    assert!(!t.contains("FAIL"), "{t}");
}

/// The acceptance case: with `PATH` lacking `runc`, `k1s check` names it and exits non-zero,
/// and `k1s server` refuses to start with the same line, before touching anything.
#[test]
fn without_runc_in_path_check_and_server_name_runc_and_exit_non_zero() {
    let d = temp_with_config("");
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    for tool in ["containerd", "nft"] {
        let found = ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"]
            .iter()
            .map(|dir| Path::new(dir).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is not installed: run hack/install-deps.sh"));
        std::os::unix::fs::symlink(found, bin.join(tool)).expect("symlink");
    }
    let path_var = bin.display().to_string();
    let ports = [format!("--https-listen-port={}", free_port()), "--kubelet-port=0".to_string()];
    let ports: Vec<&str> = ports.iter().map(String::as_str).collect();

    let out = check(d.path(), &ports, Some(&path_var));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    let fail = "FAIL binary runc: runc not found in PATH (fix: apt-get install runc)";
    assert!(t.contains(fail), "{t}");
    assert!(t.contains("PASS binary containerd"), "{t}");
    let failures: Vec<&str> = t.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failures, [fail], "only runc is missing: {t}");

    let out = server_exits(d.path(), &ports, Some(&path_var), Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("preflight failed"), "{t}");
    assert!(t.contains(fail), "the same line as k1s check: {t}");
    assert!(!d.path().join("data").exists(), "nothing was created before the refusal: {t}");
    assert!(!d.path().join("kubeconfig.yaml").exists(), "{t}");
}

#[test]
fn a_config_yaml_d_drop_in_overrides_the_main_file() {
    let busy = std::net::TcpListener::bind("0.0.0.0:0").expect("bind");
    let busy_port = busy.local_addr().expect("addr").port();
    let free = free_port();
    let d = temp_with_config(&format!("https-listen-port: {busy_port}\ndisable-agent: true\n"));
    let out = check(d.path(), &[], None);
    let t = text(&out);
    assert!(!out.status.success(), "the main file's port is taken: {t}");
    assert!(t.contains(&format!("FAIL port {busy_port}: in use")), "{t}");

    let drop_in = d.path().join("config.yaml.d");
    std::fs::create_dir_all(&drop_in).expect("mkdir");
    std::fs::write(drop_in.join("10-port.yaml"), "https-listen-port: 1\n").expect("write");
    std::fs::write(drop_in.join("20-port.yaml"), format!("https-listen-port: {free}\n")).expect("write");
    let out = check(d.path(), &[], None);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(&format!("PASS port {free}")), "the last drop-in by name wins: {t}");
    assert!(!t.contains("binary runc"), "disable-agent from the main file still applies: {t}");
    drop(busy);
}

#[test]
fn an_unknown_key_and_a_false_kubeconfig_mode_stop_the_server_naming_file_key_and_type() {
    let d = temp_with_config("disable-agent: true\n");
    let drop_in = d.path().join("config.yaml.d");
    std::fs::create_dir_all(&drop_in).expect("mkdir");
    let typo = drop_in.join("50-typo.yaml");
    std::fs::write(&typo, "tls-sans: [k1s.example]\n").expect("write");
    let out = server_exits(d.path(), &["--https-listen-port=0"], None, Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains(&format!("config file {}: key \"tls-sans\": unknown key", typo.display())),
        "names the file and the key: {t}"
    );
    std::fs::remove_file(&typo).expect("rm");

    std::fs::write(d.path().join("config.yaml"), "disable-agent: true\nwrite-kubeconfig-mode: false\n").expect("write");
    let out = server_exits(d.path(), &["--https-listen-port=0"], None, Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    let main = d.path().join("config.yaml");
    assert!(
        t.contains(&format!(
            "config file {}: key \"write-kubeconfig-mode\": expected a string, got the boolean false",
            main.display()
        )),
        "{t}"
    );
    assert!(!d.path().join("kubeconfig.yaml").exists(), "{t}");
}

/// The serial number of the certificate the API server presents to a new connection.
fn serving_serial(port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .expect("openssl (apt-get install openssl)");
    let s = String::from_utf8_lossy(&out.stdout).trim().to_uppercase();
    let Some(hex) = s.strip_prefix("SERIAL=") else { panic!("openssl: {s} {}", String::from_utf8_lossy(&out.stderr)) };
    hex.trim_start_matches('0').to_string()
}

fn client_cert_in(kubeconfig: &Path) -> String {
    let kc = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    kc.lines().find(|l| l.contains("client-certificate-data")).expect("client cert").trim().to_string()
}

/// Also the components' clients (issue 19): they follow their kubeconfig, so once the first
/// certificates have expired (and the API server refuses a connection's expired certificate on
/// its next request, as upstream's does) the controllers still write, over new connections with
/// their renewed certificates.
#[test]
fn the_server_renews_certificates_in_the_background_and_an_open_watch_survives() {
    let s = Server::start_controllers_with(&["--test-cert-validity=20s"]);
    let first = serving_serial(s.port);
    let first_admin = client_cert_in(&s.kubeconfig());
    let controller_kubeconfig = s.data_dir().join("server/cred/controller.kubeconfig");
    let first_controller = client_cert_in(&controller_kubeconfig);
    // The controllers' connections are busy before the renewal: they are pooled and reused.
    s.ok(&["create", "deployment", "before-renewal", "--image=127.0.0.1:5000/busybox:1.36"]);
    eventually(Duration::from_secs(20), "a ReplicaSet for the first Deployment", || {
        let out = s.kubectl(&["get", "replicasets", "-l", "app=before-renewal", "-o", "name"]);
        (!String::from_utf8_lossy(&out.stdout).trim().is_empty()).then_some(())
    });

    let mut watch = s
        .kubectl_cmd(&["get", "configmaps", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl watch");
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let saw = |name: &str, within: Duration| {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(l) if l.trim() == format!("configmap/{name}") => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    s.ok(&["create", "configmap", "before-renewal"]);
    assert!(saw("before-renewal", Duration::from_secs(10)), "the watch works");

    // 20 s certificates are renewed with a quarter of their life left: about 15 s in.
    let renewed = eventually(Duration::from_secs(60), "a renewed serving certificate", || {
        let now = serving_serial(s.port);
        (now != first).then_some(now)
    });
    assert_ne!(renewed, first);
    // The same renewal pass rewrites the kubeconfigs just after it swaps the serving certificate.
    eventually(Duration::from_secs(5), "the admin kubeconfig with its renewed certificate", || {
        (client_cert_in(&s.kubeconfig()) != first_admin).then_some(())
    });
    // Wait past the first certificates' end: new connections only work with renewed ones.
    std::thread::sleep(Duration::from_secs(6));
    s.ok(&["create", "configmap", "after-renewal"]);
    assert!(saw("after-renewal", Duration::from_secs(10)), "the watch opened before the renewal still delivers");
    assert!(watch.try_wait().expect("wait").is_none(), "the watch is still running");
    let _ = watch.kill();
    let _ = watch.wait();

    // The controller-manager's first certificate has expired: its writes now go over new
    // connections with the renewed one.
    assert_ne!(client_cert_in(&controller_kubeconfig), first_controller, "the controller's kubeconfig was renewed");
    s.ok(&["create", "deployment", "after-renewal", "--image=127.0.0.1:5000/busybox:1.36"]);
    eventually(Duration::from_secs(20), "a ReplicaSet for the Deployment created after the renewal", || {
        let out = s.kubectl(&["get", "replicasets", "-l", "app=after-renewal", "-o", "name"]);
        (!String::from_utf8_lossy(&out.stdout).trim().is_empty()).then_some(())
    });
    let logs = s.logs();
    assert!(
        logs.lines().any(|l| l.contains("new connections use its credentials") && l.contains("controller.kubeconfig")),
        "the controllers' client followed its kubeconfig:\n{}",
        common::tail(&logs, 40)
    );

    let out = Command::new(k1s_bin())
        .args(["certificate", "check", "--data-dir"])
        .arg(s.data_dir())
        .output()
        .expect("k1s certificate check");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let line = t.lines().find(|l| l.starts_with("serving-kube-apiserver.crt")).unwrap_or_else(|| panic!("{t}"));
    assert!(line.contains("CN=kube-apiserver"), "{line}");
    let ca = t.lines().find(|l| l.starts_with("server-ca.crt")).unwrap_or_else(|| panic!("{t}"));
    assert!(ca.contains("(CA)"), "{ca}");
    let year = |l: &str| -> Vec<u32> {
        l.split_whitespace()
            .filter(|w| w.ends_with('Z') && w.contains('T'))
            .filter_map(|w| w.get(..4).and_then(|y| y.parse().ok()))
            .collect()
    };
    let (ca_years, leaf_years) = (year(ca), year(line));
    assert!(ca_years[1] - ca_years[0] >= 10, "the CA lasts 10 years: {ca}");
    assert!(leaf_years[1] - leaf_years[0] <= 1, "{line}");
}

fn serial_of_rotated(out: &str, file: &str) -> String {
    let line = out.lines().find(|l| l.contains(file)).unwrap_or_else(|| panic!("{file} not rotated: {out}"));
    let arrow = line.split('▶').nth(1).expect("old ▶ new");
    arrow.split(')').next().expect("serial").trim().to_uppercase().trim_start_matches('0').to_string()
}

#[test]
fn certificate_rotate_renews_offline_and_the_restarted_server_presents_it() {
    let mut s = Server::start();
    let before = serving_serial(s.port);
    s.stop();
    let out = Command::new(k1s_bin())
        .args(["certificate", "rotate", "--service", "kube-apiserver", "--data-dir"])
        .arg(s.data_dir())
        .output()
        .expect("k1s certificate rotate");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(t.lines().filter(|l| l.starts_with("rotated ")).count(), 1, "only that service: {t}");
    let new = serial_of_rotated(&t, "serving-kube-apiserver.crt");
    s.restart();
    let after = serving_serial(s.port);
    assert_ne!(after, before);
    assert_eq!(after, new, "{t}");
    s.ok(&["get", "--raw", "/readyz"]);

    let out = Command::new(k1s_bin()).args(["certificate", "rotate-ca"]).output().expect("rotate-ca");
    assert!(!out.status.success());
    assert!(text(&out).contains("out of scope"), "{}", text(&out));
}

/// A fake systemd: the datagrams `k1s server` sends to `NOTIFY_SOCKET`.
fn notify_socket(dir: &Path) -> (PathBuf, mpsc::Receiver<(Instant, String)>) {
    let path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).expect("bind notify socket");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = sock.recv(&mut buf) {
            for line in String::from_utf8_lossy(&buf[..n]).lines() {
                if tx.send((Instant::now(), line.to_string())).is_err() {
                    return;
                }
            }
        }
    });
    (path, rx)
}

/// With the agent disabled, READY=1 comes once the API serves (not before), after STATUS lines
/// for the start steps, and WATCHDOG=1 pings follow when WATCHDOG_USEC is set. (The node-Ready
/// rule with the agent is not covered here: it needs a node.)
#[test]
fn ready_is_sent_once_the_api_serves_after_status_lines_then_watchdog_pings() {
    let d = temp_with_config("");
    let (sock, rx) = notify_socket(d.path());
    let kubeconfig = d.path().join("kubeconfig.yaml");
    let mut child = Command::new(k1s_bin())
        .args(["server", "--disable-agent", "--disable=controllers,scheduler", "--https-listen-port=0"])
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--config={}", d.path().join("config.yaml").display()))
        .arg(format!("--data-dir={}", d.path().join("data").display()))
        .arg(format!("--write-kubeconfig={}", kubeconfig.display()))
        .env("NOTIFY_SOCKET", &sock)
        .env("WATCHDOG_USEC", "400000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready_at = loop {
        let left = deadline.checked_duration_since(Instant::now()).unwrap_or_default();
        match rx.recv_timeout(left) {
            Ok((at, m)) if m == "READY=1" => break at,
            Ok((_, m)) => seen.push(m),
            Err(_) => {
                let _ = child.kill();
                panic!("no READY=1 within 60 s; got {seen:?}");
            }
        }
    };
    // At READY=1 the API already answers: no retry.
    let out = Command::new(common::kubectl_bin())
        .args(["get", "--raw", "/readyz"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl");
    assert!(out.status.success(), "the API serves at READY=1: {}", text(&out));
    assert!(ready_at.elapsed() < Duration::from_secs(10));
    for status in [
        "STATUS=checking the host",
        "STATUS=generating the cluster CA and certificates",
        "STATUS=starting the API server",
    ] {
        assert!(seen.iter().any(|m| m == status), "{status} before READY=1: {seen:?}");
    }
    let mut after = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok((_, m)) => after.push(m),
            Err(_) => break,
        }
    }
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    assert!(after.iter().filter(|m| *m == "WATCHDOG=1").count() >= 5, "a ping every 200 ms: {after:?}");
    assert!(!after.iter().any(|m| m == "READY=1"), "READY=1 once: {after:?}");
    eventually(Duration::from_secs(5), "STOPPING=1", || rx.try_iter().any(|(_, m)| m == "STOPPING=1").then_some(()));
}
