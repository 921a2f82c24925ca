use super::*;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

struct Probe(Arc<AtomicBool>);

impl RunningProbe for Probe {
    fn running(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        let v = self.0.load(Ordering::SeqCst);
        Box::pin(async move { v })
    }
}

const SAMPLE: &str = "\
2026-11-29T21:00:00.000000001Z stdout F one
2026-11-29T21:00:01.000000000Z stderr F two
2026-11-29T21:00:02.000000000Z stdout P thr
2026-11-29T21:00:02.100000000Z stdout P e
2026-11-29T21:00:02.200000000Z stdout F e!
2026-11-29T21:00:03.000000000Z stdout F four
";

fn write_log(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).expect("write log");
    p
}

fn opts(query: &str) -> LogOptions {
    let pairs: Vec<(String, String)> = form_pairs(query);
    let now: Timestamp = "2026-11-29T21:00:05Z".parse().expect("now");
    LogOptions::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), now).expect("options")
}

fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

async fn read_all(path: &Path, o: LogOptions, running: bool) -> String {
    let reader = LogReader::open(path, o).await.expect("open");
    let (tx, mut rx) = mpsc::channel(8);
    let probe = Probe(Arc::new(AtomicBool::new(running)));
    let task = tokio::spawn(async move { reader.stream(&probe, tx).await });
    let mut out = Vec::new();
    while let Some(b) = rx.recv().await {
        out.extend_from_slice(&b);
    }
    task.await.expect("join").expect("stream");
    String::from_utf8(out).expect("utf8")
}

#[tokio::test]
async fn whole_log_joins_fragments() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    assert_eq!(read_all(&p, opts(""), false).await, "one\ntwo\nthree!\nfour\n");
}

#[tokio::test]
async fn timestamps_prefix_each_line_with_its_first_record_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    let out = read_all(&p, opts("timestamps=true&tailLines=2"), false).await;
    assert_eq!(out, "2026-11-29T21:00:02.000000000Z three!\n2026-11-29T21:00:03.000000000Z four\n");
}

#[tokio::test]
async fn tail_lines_counts_joined_lines() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    assert_eq!(read_all(&p, opts("tailLines=1"), false).await, "four\n");
    assert_eq!(read_all(&p, opts("tailLines=0"), false).await, "");
    assert_eq!(read_all(&p, opts("tailLines=99"), false).await, "one\ntwo\nthree!\nfour\n");
    assert_eq!(read_all(&p, opts("tail=all"), false).await, "one\ntwo\nthree!\nfour\n");
}

#[tokio::test]
async fn since_time_and_since_seconds_skip_older_lines() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    assert_eq!(read_all(&p, opts("sinceTime=2026-11-29T21:00:01Z"), false).await, "two\nthree!\nfour\n");
    // now is 21:00:05, so 3 s ago is 21:00:02.
    assert_eq!(read_all(&p, opts("sinceSeconds=3"), false).await, "three!\nfour\n");
    // Both: the later wins.
    assert_eq!(read_all(&p, opts("sinceSeconds=60&sinceTime=2026-11-29T21:00:03Z"), false).await, "four\n");
}

#[tokio::test]
async fn limit_bytes_cuts_the_output() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    assert_eq!(read_all(&p, opts("limitBytes=6"), false).await, "one\ntw");
    assert_eq!(read_all(&p, opts("limitBytes=4"), false).await, "one\n");
}

#[tokio::test]
async fn malformed_records_are_skipped() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", "not a record\n2026-11-29T21:00:00Z stdout F ok\n");
    assert_eq!(read_all(&p, opts(""), false).await, "ok\n");
}

#[tokio::test]
async fn symlinked_log_paths_are_followed() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", SAMPLE);
    let link = dir.path().join("current.log");
    std::os::unix::fs::symlink(&p, &link).expect("symlink");
    assert_eq!(read_all(&link, opts("tailLines=1"), false).await, "four\n");
}

#[tokio::test]
async fn missing_file_is_an_open_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let err = LogReader::open(&dir.path().join("nope.log"), LogOptions::default()).await.err();
    assert!(matches!(err, Some(LogError::Open { .. })), "{err:?}");
}

#[test]
fn invalid_options_are_rejected() {
    let now = Timestamp::UNIX_EPOCH;
    for q in [("tailLines", "-1"), ("limitBytes", "0"), ("sinceSeconds", "0"), ("sinceTime", "yesterday")] {
        assert!(LogOptions::from_query([q], now).is_err(), "{q:?} accepted");
    }
    let o =
        LogOptions::from_query([("follow", "true"), ("previous", "1"), ("timestamps", "false")], now).expect("options");
    assert!(o.follow && o.previous && !o.timestamps);
}

fn append(path: &Path, s: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).expect("open for append");
    f.write_all(s.as_bytes()).expect("append");
}

async fn next_text(rx: &mut mpsc::Receiver<Bytes>) -> String {
    let b = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("output in time").expect("chunk");
    String::from_utf8(b.to_vec()).expect("utf8")
}

#[tokio::test]
async fn follow_streams_new_lines_survives_rotation_and_ends_when_the_container_stops() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", "2026-11-29T21:00:00Z stdout F first\n");
    let running = Arc::new(AtomicBool::new(true));
    let reader = LogReader::open(&p, opts("follow=true")).await.expect("open");
    let (tx, mut rx) = mpsc::channel(8);
    let probe = Probe(running.clone());
    let task = tokio::spawn(async move { reader.stream(&probe, tx).await });
    assert_eq!(next_text(&mut rx).await, "first\n");

    // A record written in two steps is sent once it is complete.
    append(&p, "2026-11-29T21:00:01Z stdout F sec");
    tokio::time::sleep(Duration::from_millis(250)).await;
    append(&p, "ond\n");
    assert_eq!(next_text(&mut rx).await, "second\n");

    // Rotation: the file is renamed away and a new one created at the same path.
    std::fs::rename(&p, dir.path().join("0.log.20261129")).expect("rotate");
    std::fs::write(&p, "2026-11-29T21:00:02Z stdout F after rotation\n").expect("recreate");
    assert_eq!(next_text(&mut rx).await, "after rotation\n");

    // Truncation in place starts over at the beginning.
    std::fs::write(&p, "").expect("truncate");
    tokio::time::sleep(Duration::from_millis(300)).await;
    append(&p, "2026-11-29T21:00:03Z stdout F after truncation\n");
    assert_eq!(next_text(&mut rx).await, "after truncation\n");

    // The container stops: what it wrote last is still sent, then the stream ends.
    append(&p, "2026-11-29T21:00:04Z stdout F last words\n");
    running.store(false, Ordering::SeqCst);
    let mut rest = String::new();
    while let Ok(Some(b)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        rest.push_str(std::str::from_utf8(&b).expect("utf8"));
    }
    assert_eq!(rest, "last words\n");
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("ends").expect("join").expect("stream");
}

#[tokio::test]
async fn follow_ends_when_the_client_goes_away() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = write_log(dir.path(), "0.log", "2026-11-29T21:00:00Z stdout F first\n");
    let reader = LogReader::open(&p, opts("follow=true")).await.expect("open");
    let (tx, mut rx) = mpsc::channel(8);
    let probe = Probe(Arc::new(AtomicBool::new(true)));
    let task = tokio::spawn(async move { reader.stream(&probe, tx).await });
    assert_eq!(next_text(&mut rx).await, "first\n");
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("ends").expect("join").expect("stream");
}
