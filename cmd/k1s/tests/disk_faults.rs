//! Disk faults under the embedded store: a data dir on a file system that fills up. A create
//! fails with a Status naming the cause, reads and watches keep working, and once space is freed
//! the same create succeeds without a restart, losing nothing acknowledged.

mod common;

use common::Server;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A file system mounted for the test; lazily unmounted (and its mount point removed) on drop,
/// so a failing test leaves nothing mounted. The image file of a loop mount is kept in its own
/// temp dir.
struct Mount(PathBuf, Option<tempfile::TempDir>);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Mount {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "k1s-disk-faults"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs on {} failed (these tests need root): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Mount(dir.to_path_buf(), None)
    }

    /// A fresh ext4 file system of `size` in an image file, loop-mounted on `dir` with
    /// `errors=remount-ro`.
    fn ext4(dir: &Path, size: &str) -> Mount {
        let images = tempfile::tempdir().expect("tempdir");
        let image = images.path().join("fs.img");
        run(Command::new("truncate").args(["-s", size]).arg(&image));
        run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image));
        let m = Mount(dir.to_path_buf(), Some(images));
        m.mount_image();
        m
    }

    fn mount_image(&self) {
        let image = self.1.as_ref().expect("an image").path().join("fs.img");
        run(Command::new("mount").args(["-o", "loop,errors=remount-ro"]).arg(&image).arg(&self.0));
    }

    /// Makes the ext4 file system read-only under its open files, as the kernel does on an
    /// error with `errors=remount-ro` (a plain `mount -o remount,ro` is refused while files are
    /// open for writing).
    fn make_read_only(&self) {
        let out = Command::new("findmnt").args(["-n", "-o", "SOURCE"]).arg(&self.0).output().expect("findmnt");
        let source = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let dev = Path::new(&source).file_name().expect("a loop device").to_string_lossy().into_owned();
        std::fs::write(format!("/sys/fs/ext4/{dev}/trigger_fs_error"), "disk_faults test")
            .expect("trigger an ext4 error");
        let err = std::fs::write(self.0.join("probe"), "x").expect_err("the file system is read-only");
        assert_eq!(err.raw_os_error(), Some(30), "EROFS: {err}");
    }

    /// Unmounts the (stopped server's) file system and mounts it again, writable.
    fn remount(&self) {
        run(Command::new("umount").arg(&self.0));
        self.mount_image();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed (these tests need root): {}", String::from_utf8_lossy(&out.stderr));
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
        if let Some(parent) = self.0.parent() {
            // The server's temp dir, which it could not remove while the mount was there.
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

/// Whether the servers of this run store in etcd, whose data dir is not under the test's file
/// system.
fn on_etcd() -> bool {
    std::env::var("K1S_TEST_DATASTORE").as_deref() == Ok("etcd")
}

/// Fills the file system of `dir` with a file until it reports ENOSPC; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("create filler");
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => {
                // Down to the last pages.
                if chunk.len() <= 512 {
                    break;
                }
                chunk.truncate(chunk.len() / 2);
            }
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
    path
}

/// A ConfigMap of about `size` bytes, written to a file outside the data dir's file system.
fn configmap(s: &Server, name: &str, size: usize) -> PathBuf {
    s.write_file(
        &format!("{name}.json"),
        &serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"payload": "x".repeat(size)},
        })
        .to_string(),
    )
}

fn create_sized(s: &Server, name: &str, size: usize) -> (u16, serde_json::Value) {
    let body = configmap(s, name, size);
    s.curl("POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(&body))
}

fn create(s: &Server, name: &str) -> (u16, serde_json::Value) {
    create_sized(s, name, 2048)
}

/// The size of the objects written into a full disk: large, so that the space RocksDB reserved
/// ahead for its write-ahead log (tens of MiB) is used up within a few dozen writes.
const BIG: usize = 512 * 1024;

fn names(s: &Server) -> Vec<String> {
    let v = s.json(&["get", "configmaps", "-n", "default"]);
    let mut n: Vec<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    n.sort();
    n
}

/// A watch of the default namespace's configmaps from `rv`, its events' "TYPE name" arriving on
/// the receiver.
fn watch(s: &Server, rv: &str) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = s
        .kubectl_cmd(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=300"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl watch");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
            let ev = format!(
                "{} {}",
                e["type"].as_str().unwrap_or("?"),
                e["object"]["metadata"]["name"].as_str().unwrap_or("?")
            );
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn wait_event(rx: &mpsc::Receiver<String>, want: &str, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(ev) => {
                let done = ev == want;
                seen.push(ev);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("the watch did not deliver {want:?} within {within:?}; it delivered {seen:?}");
}

fn alive(s: &Server) -> bool {
    s.pid() != 0 && Path::new(&format!("/proc/{}", s.pid())).exists()
}

#[test]
fn a_full_disk_fails_writes_with_a_status_keeps_reads_and_recovers_when_space_is_freed() {
    if on_etcd() {
        eprintln!(
            "disk_faults: skipped under K1S_TEST_DATASTORE=etcd: the server's etcd keeps its data outside the \
             test's small file system, so filling that file system does not fault the store"
        );
        return;
    }
    let started = Instant::now();
    let mut mount = None;
    // `k1s server` refuses a data dir with under 256 MiB free, so the file system is filled after
    // the start; 400 MiB leaves enough free for the restart at the end, after the test's writes.
    let mut s = Server::start_prepared(|d| mount = Some(Mount::tmpfs(d, "400m")));
    // `mount` outlives `s`: the server is stopped before its file system is unmounted.
    assert!(mount.is_some(), "mounted");

    let mut acked = Vec::new();
    for i in 0..3 {
        let name = format!("before-{i}");
        let (code, body) = create(&s, &name);
        assert_eq!(code, 201, "create {name}: {body}");
        acked.push(name);
    }
    let rv = s.ok(&["get", "configmap", "before-2", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let (mut watcher, events) = watch(&s, &rv);

    let filler = fill(&s.data_dir());

    // Creates on the full disk succeed only as long as the log's reserved space lasts (and are
    // then durable like any other); the first that does not fit fails with a Status naming the
    // cause, never a success.
    let mut failed = None;
    for i in 0..400 {
        let name = format!("full-{i:03}");
        let (code, body) = create_sized(&s, &name, BIG);
        if code == 201 {
            acked.push(name);
            continue;
        }
        failed = Some((name, code, body));
        break;
    }
    let Some((during, code, body)) = failed else {
        panic!("400 creates of {BIG} bytes all fit on a full disk:\n{}", common::tail(&s.logs(), 30));
    };
    let during = during.as_str();
    eprintln!("disk_faults: {} creates fit in the reserved space before {during} failed", acked.len() - 3);
    assert!(code == 500 || code == 507, "create on a full disk: HTTP {code} {body}\n{}", common::tail(&s.logs(), 30));
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"].as_u64(), Some(u64::from(code)), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    eprintln!("disk_faults: HTTP {code}: {message}");
    assert!(message.contains("No space left on device"), "the message names the cause: {body}");
    // Again, while still full (the store must not be left wedged by the first failure nor pass
    // the second one).
    let (code2, body2) = create_sized(&s, during, BIG);
    assert!(code2 == 500 || code2 == 507, "second create on a full disk: HTTP {code2} {body2}");

    // Reads keep working and the failed create is not half visible.
    assert!(alive(&s), "the server died on a full disk:\n{}", common::tail(&s.logs(), 30));
    assert_eq!(s.ok(&["get", "configmap", "before-0", "-o", "jsonpath={.metadata.name}"]), "before-0");
    let (code, body) = s.curl("GET", &format!("/api/v1/namespaces/default/configmaps/{during}"), None, None);
    assert_eq!(code, 404, "the failed create is not visible: {body}");
    assert_eq!(names(&s), acked, "the list on a full disk");
    // A new watch can be opened, too.
    let (mut watcher2, events2) = watch(&s, &rv);

    std::fs::remove_file(&filler).expect("remove filler");

    // The same create succeeds once space is freed, without a restart.
    let freed = Instant::now();
    let deadline = freed + Duration::from_secs(30);
    let pid = s.pid();
    loop {
        let (code, body) = create_sized(&s, during, BIG);
        if code == 201 {
            break;
        }
        assert!(code == 500 || code == 507, "create after freeing space: HTTP {code} {body}");
        assert!(
            Instant::now() < deadline,
            "writes did not resume within 30 s of freeing space: {body}\n{}",
            common::tail(&s.logs(), 30)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("disk_faults: writes resumed {:?} after the space was freed", freed.elapsed());
    assert_eq!(s.pid(), pid, "no restart");
    assert!(alive(&s), "the server is still running");
    acked.push(during.to_string());
    acked.sort();
    assert_eq!(names(&s), acked, "the list after the disk was freed");
    // Both watches saw the create, and nothing of the failed attempts.
    for rx in [&events, &events2] {
        let seen = wait_event(rx, &format!("ADDED {during}"), Duration::from_secs(10));
        let want: Vec<String> = acked.iter().filter(|n| n.starts_with("full-")).map(|n| format!("ADDED {n}")).collect();
        assert_eq!(seen, want, "watch events: each acknowledged create once, nothing of the failed attempts");
    }
    // And the write path stays healthy.
    let (code, body) = create(&s, "after");
    assert_eq!(code, 201, "create after recovery: {body}");
    assert_eq!(wait_event(&events, "ADDED after", Duration::from_secs(10)), ["ADDED after"]);
    let _ = watcher.kill();
    let _ = watcher.wait();
    let _ = watcher2.kill();
    let _ = watcher2.wait();
    assert!(!s.logs().contains("panicked"), "no panic:\n{}", common::tail(&s.logs(), 30));
    acked.push("after".into());
    acked.sort();

    // Nothing acknowledged is lost on disk either: the log written after the failed appends
    // replays whole after a kill -9.
    s.crash_and_restart();
    assert_eq!(names(&s), acked, "the list after kill -9 and restart");
    eprintln!("disk_faults: full disk case took {:?}", started.elapsed());
}

#[test]
fn a_read_only_data_dir_fails_writes_with_a_status_keeps_reads_and_loses_nothing() {
    if on_etcd() {
        eprintln!(
            "disk_faults: skipped under K1S_TEST_DATASTORE=etcd: the server's etcd keeps its data outside the \
             test's file system, so making that file system read-only does not fault the store"
        );
        return;
    }
    let started = Instant::now();
    let mut mount = None;
    let mut s = Server::start_prepared(|d| mount = Some(Mount::ext4(d, "400M")));
    // `mount` outlives `s`: the server is stopped before its file system is unmounted.
    let fs = mount.as_ref().expect("mounted");

    let mut acked = Vec::new();
    for i in 0..3 {
        let name = format!("before-{i}");
        let (code, body) = create(&s, &name);
        assert_eq!(code, 201, "create {name}: {body}");
        acked.push(name);
    }
    let rv = s.ok(&["get", "configmap", "before-2", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let (mut watcher, events) = watch(&s, &rv);

    fs.make_read_only();

    let (code, body) = create(&s, "during");
    assert!(
        code == 500 || code == 507,
        "create on a read-only disk: HTTP {code} {body}\n{}",
        common::tail(&s.logs(), 30)
    );
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"].as_u64(), Some(u64::from(code)), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    eprintln!("disk_faults: HTTP {code}: {message}");
    assert!(message.contains("Read-only file system"), "the message names the cause: {body}");
    let (code2, body2) = create(&s, "during");
    assert!(code2 == 500 || code2 == 507, "second create on a read-only disk: HTTP {code2} {body2}");

    assert!(alive(&s), "the server died on a read-only disk:\n{}", common::tail(&s.logs(), 30));
    assert_eq!(s.ok(&["get", "configmap", "before-0", "-o", "jsonpath={.metadata.name}"]), "before-0");
    let (code, body) = s.curl("GET", "/api/v1/namespaces/default/configmaps/during", None, None);
    assert_eq!(code, 404, "the failed create is not visible: {body}");
    assert_eq!(names(&s), acked, "the list on a read-only disk");
    let (mut watcher2, events2) = watch(&s, &rv);
    for rx in [&events, &events2] {
        assert!(rx.recv_timeout(Duration::from_secs(2)).is_err(), "no event from a failed write");
    }
    assert!(watcher.try_wait().expect("wait").is_none(), "the watch opened before is still open");
    assert!(watcher2.try_wait().expect("wait").is_none(), "the watch opened after is still open");
    let _ = watcher.kill();
    let _ = watcher.wait();
    let _ = watcher2.kill();
    let _ = watcher2.wait();
    assert!(!s.logs().contains("panicked"), "no panic:\n{}", common::tail(&s.logs(), 30));

    // An ext4 file system the kernel made read-only stays so until it is unmounted: the server
    // is restarted on it mounted again, and then has everything acknowledged and takes the
    // same create.
    s.restart_after(|_| fs.remount());
    assert_eq!(names(&s), acked, "the list after the file system was mounted again");
    let (code, body) = create(&s, "during");
    assert_eq!(code, 201, "create after the file system was mounted again: {body}");
    acked.push("during".into());
    acked.sort();
    assert_eq!(names(&s), acked, "the list after the create");
    eprintln!("disk_faults: read-only case took {:?}", started.elapsed());
}

#[test]
fn a_corrupt_store_at_start_is_reported_with_the_file_and_how_to_recover_and_exits_non_zero() {
    if on_etcd() {
        eprintln!("disk_faults: skipped under K1S_TEST_DATASTORE=etcd: the embedded store is not used");
        return;
    }
    let mut s = Server::start();
    assert_eq!(create(&s, "before").0, 201);
    let data_dir = s.data_dir();
    let k1s = |args: &[&str]| {
        let out = Command::new(common::k1s_bin())
            .args(args)
            .arg(format!("--data-dir={}", data_dir.display()))
            .output()
            .expect("run k1s");
        assert!(out.status.success(), "k1s {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    k1s(&["snapshot", "save", "--name=good"]);
    assert_eq!(create(&s, "after-the-snapshot").0, 201);
    s.stop();
    let db = s.data_dir().join("server/db");
    let manifests: Vec<PathBuf> = std::fs::read_dir(&db)
        .expect("the store's folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-")))
        .collect();
    assert!(!manifests.is_empty(), "a MANIFEST in {}", db.display());
    for m in &manifests {
        let mut f = std::fs::OpenOptions::new().write(true).open(m).expect("open MANIFEST");
        f.write_all(b"not a RocksDB manifest, not at all: garbage").expect("corrupt");
    }
    let log = s.dir.path().join("corrupt-start.log");
    let mut child = Command::new(common::k1s_bin())
        .args(["server", "--disable-agent", "--disable=controllers,scheduler", "--https-listen-port=0"])
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--config={}", s.dir.path().join("config.yaml").display()))
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .arg(format!("--write-kubeconfig={}", s.dir.path().join("corrupt-kubeconfig.yaml").display()))
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn k1s");
    let status = common::exit_within(&mut child, Duration::from_secs(60), &log, "k1s on a corrupt store");
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "a corrupt store must stop the server:\n{out}");
    assert!(!out.contains("panicked") && !out.contains("backtrace"), "no panic, no backtrace:\n{out}");
    assert!(out.contains(&format!("the store in {} is corrupt", db.display())), "{out}");
    assert!(out.contains("MANIFEST-"), "names the file:\n{out}");
    assert!(out.contains("--cluster-reset-restore-path") && out.contains("k1s snapshot ls"), "says how:\n{out}");

    // Following the message brings the cluster back as the snapshot had it.
    let aside = db.with_file_name("db.corrupt");
    std::fs::rename(&db, &aside).expect("mv the corrupt store aside");
    let snapshots = aside.join("snapshots");
    let listed = Command::new(common::k1s_bin())
        .args(["snapshot", "ls", &format!("--dir={}", snapshots.display())])
        .output()
        .expect("k1s snapshot ls");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let file = std::fs::read_dir(&snapshots)
        .expect("snapshots")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("good-")))
        .expect("the snapshot taken before");
    assert!(listed.contains(&*file.file_name().expect("name").to_string_lossy()), "listed:\n{listed}");
    let kubeconfig = format!("--write-kubeconfig={}", s.dir.path().join("restore-kubeconfig.yaml").display());
    k1s(&["server", &kubeconfig, &format!("--cluster-reset-restore-path={}", file.display())]);
    s.restart();
    let names = names(&s);
    assert!(names.contains(&"before".to_string()), "{names:?}");
    assert!(!names.contains(&"after-the-snapshot".to_string()), "{names:?}");
}
