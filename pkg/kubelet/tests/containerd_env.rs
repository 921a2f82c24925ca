//! The node's runtime environment end to end, on the real machine: the local registry and test
//! images (`hack/registry.sh`, `hack/images.sh`), the containerd config, CNI conflist and
//! registry hosts rendered by this crate, containerd started through [`Supervisor`] (CRI plugin
//! loaded, an image pulled through a mirror that only the rendered hosts.toml knows, a killed
//! containerd restarted), and the kubelet root made a shared mount.
//!
//! Needs root and the packages of `hack/install-deps.sh`. Without them the test says why and
//! passes, unless `K1S_TEST_REQUIRE_CONTAINERD=1`, when it fails. Everything it starts is
//! stopped and removed at the end: containerd, the registry (only if this test started it),
//! the bind mount and the temporary directory.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use k1s_kubelet::containerd::{
    ensure_shared_mount, parse_mountinfo, ContainerdConfig, HostFacts, Supervisor, SupervisorConfig, SupervisorHandle,
};
use k1s_kubelet::registries::Registries;
use tokio_util::sync::CancellationToken;

const REGISTRY: &str = "127.0.0.1:5000";
const TOOLS: &[&str] = &[
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "docker-registry",
    "umoci",
    "skopeo",
    "curl",
    "mount",
    "umount",
];

fn hack(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack").join(script)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// What is missing to run this test here.
fn missing_prerequisites() -> Vec<String> {
    let mut missing: Vec<String> = TOOLS.iter().filter(|t| !on_path(t)).map(|t| format!("{t} (not on PATH)")).collect();
    if !Path::new("/bin/busybox").is_file() {
        missing.push("/bin/busybox (busybox-static)".into());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root =
        status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1)) == Some("0");
    if !root {
        missing.push("root (effective uid 0)".into());
    }
    missing
}

async fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Result<Output, String> {
    let program = program.as_ref().to_owned();
    let output = tokio::process::Command::new(&program)
        .args(args)
        .output()
        .await
        .map_err(|e| format!("running {program:?} {args:?}: {e}"))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(format!(
            "{program:?} {args:?} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

async fn registry_answers() -> bool {
    let url = format!("http://{REGISTRY}/v2/");
    run("curl", &["-fsS", "-o", "/dev/null", "--max-time", "2", &url]).await.is_ok()
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// What the test set up, for the cleanup.
#[derive(Default)]
struct Started {
    registry: bool,
    supervisor: Option<(SupervisorHandle, CancellationToken)>,
    bind_mount: Option<PathBuf>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_runs_with_the_generated_config_and_pulls_from_the_local_registry() {
    let require = std::env::var("K1S_TEST_REQUIRE_CONTAINERD").is_ok_and(|v| v == "1");
    let missing = missing_prerequisites();
    if !missing.is_empty() {
        assert!(!require, "K1S_TEST_REQUIRE_CONTAINERD=1 but this machine lacks: {}", missing.join(", "));
        eprintln!(
            "SKIPPED containerd environment test: missing {} (set K1S_TEST_REQUIRE_CONTAINERD=1 to fail instead)",
            missing.join(", ")
        );
        return;
    }
    let tmp = tempfile::Builder::new().prefix("k1s-ctrd-").tempdir().expect("tempdir");
    let mut started = Started::default();
    let result = scenario(tmp.path(), &mut started).await;
    let cleanup = cleanup(tmp.path(), started).await;
    drop(tmp);
    if let Err(err) = result {
        panic!("{err}");
    }
    if let Err(err) = cleanup {
        panic!("cleanup: {err}");
    }
}

async fn scenario(dir: &Path, started: &mut Started) -> Result<(), String> {
    // 1. Registry and images.
    let t = Instant::now();
    if !registry_answers().await {
        run(hack("registry.sh"), &["start"]).await?;
        started.registry = true;
    }
    eprintln!("registry ready in {:?} (started by this test: {})", t.elapsed(), started.registry);
    let t = Instant::now();
    run(hack("images.sh"), &[]).await?;
    eprintln!("images built/pushed (or found) in {:?}", t.elapsed());

    // 2. Config, CNI conflist, registry hosts, rendered by this crate.
    let facts = HostFacts::detect().map_err(|e| format!("host facts: {e}"))?;
    let cfg = ContainerdConfig::new(&dir.join("data"), &dir.join("run"), format!("{REGISTRY}/pause:3.10"), facts);
    k1s_kubelet::cni::write_conflist(&cfg.cni_conf_dir, "10.42.0.0/16", "cni0", None, true)
        .map_err(|e| format!("conflist: {e}"))?;
    let mut registries =
        Registries::parse("mirrors:\n  k1s-mirror.invalid:\n    endpoint: [\"http://127.0.0.1:5000\"]\n")
            .map_err(|e| format!("registries: {e}"))?;
    registries.add_plain_http_registry(REGISTRY);
    registries.write_hosts_dir(&cfg.registry_config_dir).map_err(|e| format!("hosts.toml: {e}"))?;
    let config_file = cfg.write().map_err(|e| format!("config: {e}"))?;
    eprintln!("rendered {} (restrict_oom_score_adj = {})", config_file.display(), cfg.restrict_oom_score_adj);

    // 3. The kubelet root as a shared mount.
    let kubelet_root = dir.join("kubelet");
    let change = ensure_shared_mount(&kubelet_root).map_err(|e| format!("shared mount: {e}"))?;
    if change.bind_mounted {
        started.bind_mount = Some(kubelet_root.clone());
    }
    let canonical = std::fs::canonicalize(&kubelet_root).map_err(|e| e.to_string())?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let shared = parse_mountinfo(&table).iter().any(|m| m.mount_point == canonical && m.shared);
    if !shared {
        return Err(format!("{} is not a shared mount", canonical.display()));
    }

    // 4. containerd through the supervisor.
    let sup_config = SupervisorConfig::for_config(&cfg);
    let log = sup_config.log_file.clone();
    let t = Instant::now();
    let cancel = CancellationToken::new();
    let handle = Supervisor::new(sup_config)
        .start(cancel.clone())
        .await
        .map_err(|e| format!("starting containerd: {e}\n{}", log_tail(&log)))?;
    eprintln!("containerd ready in {:?}", t.elapsed());
    let socket = handle.socket().to_string_lossy().into_owned();
    let first_pid = handle.status().pid;
    started.supervisor = Some((handle, cancel));

    // 5. The CRI plugin loaded.
    let check_cri = |socket: String| async move {
        let plugins = run("ctr", &["--address", &socket, "plugins", "ls"]).await?;
        let text = String::from_utf8_lossy(&plugins.stdout).into_owned();
        let cri_ok = text.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.first() == Some(&"io.containerd.grpc.v1")
                && fields.get(1) == Some(&"cri")
                && fields.last() == Some(&"ok")
        });
        if cri_ok {
            Ok(())
        } else {
            Err(format!("CRI plugin not ok:\n{text}"))
        }
    };
    check_cri(socket.clone()).await.map_err(|e| format!("{e}\n{}", log_tail(&log)))?;

    // 6. Pulls: the brief's plain-HTTP pull, then one that only the rendered hosts.toml routes.
    let t = Instant::now();
    let image = format!("{REGISTRY}/busybox:1.36");
    let ns = ["--address", &socket, "-n", "k8s.io"];
    run("ctr", &[&ns[..], &["images", "pull", "--plain-http", &image]].concat()).await?;
    eprintln!("ctr pull --plain-http {image} in {:?}", t.elapsed());
    let certs = cfg.registry_config_dir.to_string_lossy().into_owned();
    let t = Instant::now();
    let via_mirror = "k1s-mirror.invalid/busybox:1.36";
    run("ctr", &[&ns[..], &["images", "pull", "--hosts-dir", &certs, via_mirror]].concat()).await?;
    eprintln!("ctr pull {via_mirror} through the rendered hosts.toml in {:?}", t.elapsed());
    let listed = run("ctr", &[&ns[..], &["images", "ls", "-q"]].concat()).await?;
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for name in [image.as_str(), via_mirror] {
        if !listed.lines().any(|l| l == name) {
            return Err(format!("{name} not in the image list:\n{listed}"));
        }
    }

    // 7. A killed containerd is restarted and serves again.
    let Some((handle, _)) = started.supervisor.as_ref() else {
        return Err("supervisor missing".into());
    };
    let pid = first_pid.ok_or("containerd has no pid")?;
    let mut status = handle.subscribe();
    let t = Instant::now();
    run("kill", &["-KILL", &pid.to_string()]).await?;
    tokio::time::timeout(Duration::from_secs(60), status.wait_for(|s| s.restarts == 1 && s.ready))
        .await
        .map_err(|_| format!("containerd not restarted within 60 s\n{}", log_tail(&log)))?
        .map_err(|e| e.to_string())?;
    let restarted = handle.status();
    eprintln!("containerd killed and restarted (pid {:?} -> {:?}) in {:?}", first_pid, restarted.pid, t.elapsed());
    if restarted.pid == first_pid {
        return Err("restarted containerd has the old pid".into());
    }
    check_cri(socket).await?;
    Ok(())
}

async fn cleanup(dir: &Path, started: Started) -> Result<(), String> {
    let mut errors = Vec::new();
    if let Some((handle, cancel)) = started.supervisor {
        let pid = handle.status().pid;
        cancel.cancel();
        if let Err(e) = handle.join().await {
            errors.push(format!("stopping containerd: {e}"));
        }
        if let Some(pid) = pid {
            if Path::new(&format!("/proc/{pid}")).exists() {
                errors.push(format!("containerd {pid} still exists after stop (zombie?)"));
            }
        }
    }
    // Anything containerd left mounted under the temporary directory, deepest first.
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut leftovers: Vec<PathBuf> =
        parse_mountinfo(&table).into_iter().map(|m| m.mount_point).filter(|m| m.starts_with(&canonical)).collect();
    leftovers.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    leftovers.dedup();
    for mount in leftovers {
        let path = mount.to_string_lossy().into_owned();
        if let Err(e) = run("umount", &[&path]).await {
            errors.push(e);
        }
    }
    if let Some(path) = started.bind_mount {
        let canonical = std::fs::canonicalize(&path).unwrap_or(path);
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if parse_mountinfo(&table).iter().any(|m| m.mount_point == canonical) {
            errors.push(format!("{} still mounted", canonical.display()));
        }
    }
    if started.registry {
        if let Err(e) = run(hack("registry.sh"), &["stop"]).await {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}
