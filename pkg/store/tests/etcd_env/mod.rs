//! A real etcd v3 server for tests: Debian's `etcd` (package `etcd-server`, or `K1S_ETCD_BIN`)
//! on free loopback ports with a data dir in a temp dir, stopped when dropped. A machine
//! without it fails the test loudly (`hack/install-deps.sh` installs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Etcd {
    child: Child,
    /// The client URL, `http://127.0.0.1:PORT`.
    pub url: String,
    dir: tempfile::TempDir,
}

/// A free loopback port no other etcd of this test process was given: the kernel may hand the
/// same port to two tests binding port 0 at once (each closes it before its etcd binds it), and
/// two servers on one etcd then trip over each other's data.
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Whether etcd answers `GET /health` with a healthy member.
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

impl Etcd {
    pub fn start() -> Etcd {
        let (client, peer) = (free_port(), free_port());
        let mut etcd = Etcd::spawn("test", client, peer, &format!("test=http://127.0.0.1:{peer}"));
        etcd.wait_healthy();
        etcd
    }

    /// A one-member etcd on the data `etcdctl snapshot restore` makes of the snapshot `db`
    /// (Debian package etcd-client).
    #[allow(dead_code)]
    pub fn start_from_snapshot(db: &std::path::Path) -> Etcd {
        let (client, peer) = (free_port(), free_port());
        let dir = tempfile::tempdir().expect("tmp");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg("snapshot")
            .arg("restore")
            .arg(db)
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--initial-cluster=test={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .output()
            .expect("etcdctl snapshot restore (Debian package etcd-client; hack/install-deps.sh)");
        assert!(out.status.success(), "etcdctl snapshot restore: {}", String::from_utf8_lossy(&out.stderr));
        let mut etcd = Etcd::spawn_in(dir, "test", client, peer, &format!("test={peer_url}"));
        etcd.wait_healthy();
        etcd
    }

    /// Starts one member of the cluster `initial_cluster` (`name=peer-url,...`) without waiting.
    fn spawn(name: &str, client: u16, peer: u16, initial_cluster: &str) -> Etcd {
        Etcd::spawn_in(tempfile::tempdir().expect("tmp"), name, client, peer, initial_cluster)
    }

    /// [`Etcd::spawn`] on the data dir `<dir>/data` (new, or restored from a snapshot).
    fn spawn_in(dir: tempfile::TempDir, name: &str, client: u16, peer: u16, initial_cluster: &str) -> Etcd {
        let bin = std::env::var("K1S_ETCD_BIN").unwrap_or_else(|_| "/usr/bin/etcd".into());
        assert!(
            std::path::Path::new(&bin).exists(),
            "{bin} not found: the etcd backend's tests need a real etcd (Debian package etcd-server; hack/install-deps.sh)"
        );
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
        let child = Command::new(&bin)
            .arg(format!("--name={name}"))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg("--initial-cluster-token=k1s-test")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        Etcd { child, url, dir }
    }

    fn wait_healthy(&mut self) {
        let port: u16 = self.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("client port");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !healthy(port) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("etcd exited with {status}: {}", self.log());
            }
            assert!(Instant::now() < deadline, "etcd not healthy within 30 s: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Where this etcd keeps its data (WAL and database).
    #[allow(dead_code)]
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// The etcd process's id (benchmarks read its CPU time).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A cluster of etcd members on loopback, each stopped when dropped (or killed before).
#[allow(dead_code)] // used by the HA end-to-end test only
pub struct Cluster {
    pub members: Vec<Option<Etcd>>,
}

#[allow(dead_code)]
impl Cluster {
    /// `n` members, started together and healthy (a quorum elected a leader).
    pub fn start(n: usize) -> Cluster {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> =
            ports.iter().enumerate().map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}")).collect();
        let initial = initial.join(",");
        let mut members: Vec<Etcd> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, peer))| Etcd::spawn(&format!("m{i}"), *client, *peer, &initial))
            .collect();
        for m in &mut members {
            m.wait_healthy();
        }
        Cluster { members: members.into_iter().map(Some).collect() }
    }

    /// Every member's client URL, comma-separated (what `--datastore-endpoint` takes).
    pub fn urls(&self) -> String {
        self.members.iter().flatten().map(|m| m.url.clone()).collect::<Vec<_>>().join(",")
    }

    /// SIGKILLs member `i`.
    pub fn kill(&mut self, i: usize) {
        drop(self.members[i].take());
    }
}
