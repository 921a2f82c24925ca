use super::*;
use crate::image_archive::tests::{oci_files, to_tar};
use std::io::Write as _;
use std::sync::Mutex;

/// Records the plain tars it is given (their first bytes and whether they were plain tars).
#[derive(Default)]
struct FakeImporter {
    got: Mutex<Vec<(PathBuf, Vec<u8>)>>,
}

#[async_trait::async_trait]
impl ImageImporter for FakeImporter {
    async fn import_tar(&self, plain_tar: &Path) -> Result<(), ImportError> {
        let data = std::fs::read(plain_tar).map_err(|source| ImportError::Io { path: plain_tar.into(), source })?;
        self.got.lock().expect("lock").push((plain_tar.to_path_buf(), data));
        Ok(())
    }
}

impl FakeImporter {
    fn count(&self) -> usize {
        self.got.lock().expect("lock").len()
    }
}

fn file(name: &str, size: u64, mtime_ns: u128) -> FolderFile {
    FolderFile { name: name.into(), size, mtime_ns }
}

#[test]
fn pending_takes_new_and_changed_archives_that_have_settled() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let old = Duration::from_secs(900).as_nanos();
    let fresh = Duration::from_millis(999_500).as_nanos();
    let mut state = ImportState::new();
    state.insert("same.tar".into(), ImportedFile { size: 10, mtime_ns: old, images: vec![], error: None });
    state.insert("grown.tar".into(), ImportedFile { size: 10, mtime_ns: old, images: vec![], error: None });
    let files = vec![
        file("same.tar", 10, old),
        file("grown.tar", 20, old),
        file("new.tar.zst", 5, old),
        file("writing.tar.gz", 5, fresh),
        file("notes.txt", 5, old),
        file(".hidden.tar", 5, old),
    ];
    let names = |v: Vec<FolderFile>| v.into_iter().map(|f| f.name).collect::<Vec<_>>();
    assert_eq!(names(pending(&files, &state, Some(now))), vec!["grown.tar", "new.tar.zst"]);
    assert_eq!(
        names(pending(&files, &state, None)),
        vec!["grown.tar", "new.tar.zst", "writing.tar.gz"],
        "at start nothing waits"
    );
}

#[tokio::test]
async fn folder_imports_each_archive_once_even_across_restarts_and_again_when_it_changes() {
    let data = tempfile::tempdir().expect("tempdir");
    let folder = ImagesFolder::for_data_dir(data.path());
    std::fs::create_dir_all(&folder.dir).expect("dir");
    let archive = to_tar(&oci_files("example.com/a:1"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&archive).expect("gzip");
    std::fs::write(folder.dir.join("a.tar.gz"), gz.finish().expect("gzip")).expect("write");
    let importer = FakeImporter::default();
    assert_eq!(folder.import_new(&importer, false).await.expect("import"), 1);
    {
        let got = importer.got.lock().expect("lock");
        assert_eq!(got[0].1, archive, "containerd gets the decompressed tar");
        assert!(!got[0].0.exists(), "the decompressed copy is removed afterwards");
    }
    // A restart: a new folder object reading the record.
    let folder = ImagesFolder::for_data_dir(data.path());
    assert_eq!(folder.import_new(&importer, false).await.expect("again"), 0);
    assert_eq!(importer.count(), 1);
    let record: ImportState = serde_json::from_slice(&std::fs::read(&folder.state_file).expect("state")).expect("json");
    assert_eq!(record["a.tar.gz"].images, vec!["example.com/a:1".to_string()]);
    // Replaced by another archive: imported again.
    std::fs::write(folder.dir.join("a.tar.gz"), &archive).expect("rewrite");
    assert_eq!(folder.import_new(&importer, false).await.expect("changed"), 1);
    assert_eq!(importer.count(), 2);
}

#[tokio::test]
async fn a_corrupt_archive_never_reaches_containerd_and_is_recorded_as_failed() {
    let data = tempfile::tempdir().expect("tempdir");
    let folder = ImagesFolder::for_data_dir(data.path());
    std::fs::create_dir_all(&folder.dir).expect("dir");
    let mut files = oci_files("example.com/bad:1");
    let layer = files.iter_mut().find(|(_, d)| d.len() > 1000).expect("layer");
    layer.1[700] ^= 0x80;
    std::fs::write(folder.dir.join("bad.tar"), to_tar(&files)).expect("write");
    let importer = FakeImporter::default();
    assert_eq!(folder.import_new(&importer, false).await.expect("scan"), 0);
    assert_eq!(importer.count(), 0, "nothing of a corrupt archive is imported");
    let record: ImportState = serde_json::from_slice(&std::fs::read(&folder.state_file).expect("state")).expect("json");
    let err = record["bad.tar"].error.clone().expect("error recorded");
    assert!(err.contains("corrupt"), "{err}");
    // Not retried until the file changes.
    assert_eq!(folder.import_new(&importer, false).await.expect("scan"), 0);
    let direct = import_archive(&importer, &folder.dir.join("bad.tar"), &folder.scratch).await;
    assert!(matches!(direct, Err(ImportError::Archive { .. })), "{direct:?}");
    assert_eq!(importer.count(), 0);
}
