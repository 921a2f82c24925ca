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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port").port()
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
        let bin = std::env::var("K1S_ETCD_BIN").unwrap_or_else(|_| "/usr/bin/etcd".into());
        assert!(
            std::path::Path::new(&bin).exists(),
            "{bin} not found: the etcd backend's tests need a real etcd (Debian package etcd-server; hack/install-deps.sh)"
        );
        let dir = tempfile::tempdir().expect("tmp");
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
        let child = Command::new(&bin)
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=test={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        let mut etcd = Etcd { child, url, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !healthy(client) {
            if let Ok(Some(status)) = etcd.child.try_wait() {
                panic!("etcd exited with {status}: {}", etcd.log());
            }
            assert!(Instant::now() < deadline, "etcd not healthy within 30 s: {}", etcd.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
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
