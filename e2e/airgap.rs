//! End to end with real containerd: images for a node without a registry. `k1s images save`
//! pulls from a second local registry (stopped afterwards), the archive goes into the images
//! folder of a fresh node, and a pod with `imagePullPolicy: Never` runs from it; an archive
//! dropped in while the server runs is imported too, a restart imports nothing again, and
//! `k1s images import` of a corrupt archive fails and imports nothing (CRI ListImages).

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use k1s_cri::v1::{ImageSpec, ImageStatusRequest, ListImagesRequest};
use k1s_cri::ImageService as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A second plain-HTTP `docker-registry` on a free loopback port; the shared one at
/// 127.0.0.1:5000 is left alone. Stopped when dropped.
struct Registry {
    child: Option<Child>,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n  secret: k1s-airgap-test\n",
                dir.path().join("storage").display()
            ),
        )
        .expect("config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry (apt-get install docker-registry)");
        let r = Registry { child: Some(child), addr, _dir: dir };
        eventually(Duration::from_secs(20), "the second registry to answer", || r.answers().then_some(()));
        r
    }

    fn answers(&self) -> bool {
        Command::new("curl")
            .args(["-fsS", "-o", "/dev/null", "--max-time", "2", &format!("http://{}/v2/", self.addr)])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Copies an image of the shared registry into this one.
    fn copy_from_shared(&self, from: &str, to: &str) {
        let out = Command::new("skopeo")
            .args(["copy", "--src-tls-verify=false", "--dest-tls-verify=false"])
            .arg(format!("docker://127.0.0.1:5000/{from}"))
            .arg(format!("docker://{}/{to}", self.addr))
            .output()
            .expect("skopeo");
        assert!(out.status.success(), "skopeo copy {from}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn k1s(args: &[&str]) -> std::process::Output {
    Command::new(common::k1s_bin()).args(args).output().expect("run k1s")
}

fn save(image: &str, out: &Path, registries: &Path) {
    let o = k1s(&[
        "images",
        "save",
        image,
        "-o",
        &out.display().to_string(),
        &format!("--registries-config={}", registries.display()),
    ]);
    assert!(o.status.success(), "k1s images save {image}: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains(image), "{stdout}");
}

/// The image names containerd's CRI reports for the node.
fn cri_images(s: &Server) -> Vec<String> {
    let endpoint = format!("unix://{}", s.containerd_socket().display());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let cri = k1s_cri::RemoteRuntime::connect(&endpoint).await.expect("connect to CRI");
        let list = cri.list_images(ListImagesRequest::default()).await.expect("ListImages");
        list.images.into_iter().flat_map(|i| i.repo_tags).collect()
    })
}

/// CRI ImageStatus of `image`: its id and size when containerd's CRI knows it.
fn cri_image_status(s: &Server, image: &str) -> Option<(String, u64)> {
    let endpoint = format!("unix://{}", s.containerd_socket().display());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let cri = k1s_cri::RemoteRuntime::connect(&endpoint).await.expect("connect to CRI");
        let req = ImageStatusRequest {
            image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
            verbose: false,
        };
        let status = cri.image_status(req).await.expect("ImageStatus");
        status.image.map(|i| (i.id, i.size))
    })
}

/// Flips one byte in the middle of the largest file of a plain tar (a layer).
fn corrupt_largest_entry(path: &Path) {
    let mut data = std::fs::read(path).expect("read archive");
    let (mut pos, mut best) = (0usize, None::<(usize, usize)>);
    while pos + 512 <= data.len() && data[pos] != 0 {
        let size_field = String::from_utf8_lossy(&data[pos + 124..pos + 136]).trim_matches(['\0', ' ']).to_string();
        let size = usize::from_str_radix(&size_field, 8).expect("tar size");
        if best.is_none_or(|(_, s)| size > s) {
            best = Some((pos + 512, size));
        }
        pos += 512 + size.div_ceil(512) * 512;
    }
    let (start, size) = best.expect("a file in the archive");
    data[start + size / 2] ^= 0x55;
    std::fs::write(path, data).expect("write archive");
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: airgapped}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: IMAGE
    imagePullPolicy: Never
    command: ["sleep", "3600"]
"#;

#[test]
fn archives_in_the_images_folder_run_pods_without_a_registry_and_corrupt_ones_import_nothing() {
    common::node_prerequisites();
    let work = tempfile::tempdir().expect("tempdir");
    let no_registries = work.path().join("registries.yaml");
    let mut registry = Registry::start();
    let image = format!("{}/airgap/busybox:1.36", registry.addr);
    let late = format!("{}/airgap/late:1", registry.addr);
    let corrupt = format!("{}/airgap/corrupt:1", registry.addr);
    registry.copy_from_shared("busybox:1.36", "airgap/busybox:1.36");
    registry.copy_from_shared("busybox:1.36", "airgap/late:1");
    registry.copy_from_shared("pause:3.10", "airgap/corrupt:1");
    let archive = work.path().join("airgap.tar.zst");
    let late_archive = work.path().join("late.tar.gz");
    let corrupt_archive = work.path().join("corrupt.tar");
    save(&image, &archive, &no_registries);
    save(&late, &late_archive, &no_registries);
    save(&corrupt, &corrupt_archive, &no_registries);
    registry.stop();
    assert!(!registry.answers(), "the second registry is stopped");

    let mut s = Server::start_node_prepared(|data| {
        let images = data.join("agent/images");
        std::fs::create_dir_all(&images).expect("images folder");
        std::fs::copy(&archive, images.join("airgap.tar.zst")).expect("copy archive");
    });
    assert!(cri_images(&s).contains(&image), "imported at start: {:?}", cri_images(&s));
    let (id, size) = cri_image_status(&s, &image).expect("CRI ImageStatus knows the imported image");
    assert!(id.starts_with("sha256:") && size > 0, "{id} {size}");
    if let Some(line) = s.logs().lines().find(|l| l.contains("imported image archive")) {
        eprintln!("import at start: {line}");
    }
    s.ok_stdin(&["apply", "-f", "-"], &POD.replace("IMAGE", &image));
    s.ok(&["wait", "--for=condition=Ready", "pod/airgapped", "--timeout=120s"]);

    // A file dropped in while the server runs.
    let images_dir: PathBuf = s.data_dir().join("agent/images");
    std::fs::copy(&late_archive, images_dir.join("late.tar.gz")).expect("copy late archive");
    eventually(Duration::from_secs(30), "the new archive to be imported", || {
        cri_images(&s).contains(&late).then_some(())
    });

    // A restart does not import unchanged files again.
    let imports = |logs: &str| logs.lines().filter(|l| l.contains("imported image archive")).count();
    // CRI sees the image once ctr has created it, a moment before ctr returns and k1s logs it.
    eventually(Duration::from_secs(30), "the import to be logged", || (imports(&s.logs()) == 2).then_some(()));
    s.restart();
    s.wait_node_ready();
    assert_eq!(imports(&s.logs()), 2, "nothing imported again after the restart");

    // A corrupt archive: refused with a message, nothing of it in containerd.
    corrupt_largest_entry(&corrupt_archive);
    let o = k1s(&[
        "images",
        "import",
        &format!("--data-dir={}", s.data_dir().display()),
        &corrupt_archive.display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "importing a corrupt archive fails");
    assert!(stderr.contains("corrupt") && stderr.contains("digest"), "{stderr}");
    assert!(stderr.contains("corrupt.tar"), "the message names the file: {stderr}");
    let listed = cri_images(&s);
    assert!(!listed.iter().any(|i| i.contains("airgap/corrupt")), "{listed:?}");

    // The uncorrupted images still import on demand (gzip) and through the same command.
    let o = k1s(&[
        "images",
        "import",
        &format!("--data-dir={}", s.data_dir().display()),
        &late_archive.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&late));

    // A docker-archive (docker save's format, here written by skopeo), gzip-compressed.
    let dock = "127.0.0.1:5000/airgap/dock:1";
    let dock_tar = work.path().join("dock.tar");
    let out = Command::new("skopeo")
        .args(["copy", "--src-tls-verify=false", "docker://127.0.0.1:5000/busybox:1.36"])
        .arg(format!("docker-archive:{}:{dock}", dock_tar.display()))
        .output()
        .expect("skopeo");
    assert!(out.status.success(), "skopeo docker-archive: {}", String::from_utf8_lossy(&out.stderr));
    let gz = Command::new("gzip").arg(&dock_tar).status().expect("gzip");
    assert!(gz.success());
    let dock_gz = work.path().join("dock.tar.gz");
    let o =
        k1s(&["images", "import", &format!("--data-dir={}", s.data_dir().display()), &dock_gz.display().to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(cri_images(&s).iter().any(|i| i == dock), "{:?}", cri_images(&s));
}
