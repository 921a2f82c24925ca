use super::*;

fn sha(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

fn tar_of(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, data.as_slice()).expect("append");
    }
    b.into_inner().expect("tar")
}

fn desc(media_type: &str, data: &[u8]) -> serde_json::Value {
    serde_json::json!({"mediaType": media_type, "digest": format!("sha256:{}", sha(data)), "size": data.len()})
}

/// An OCI layout holding one image (a layer, its config, its manifest) named `name`.
pub(crate) fn oci_files(name: &str) -> Vec<(String, Vec<u8>)> {
    let layer = tar_of(&[("hello", b"hello world\n".to_vec())]);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", sha(&layer))]}
    }))
    .expect("config");
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc("application/vnd.oci.image.config.v1+json", &config),
        "layers": [desc("application/vnd.oci.image.layer.v1.tar", &layer)]
    }))
    .expect("manifest");
    let mut entry = desc("application/vnd.oci.image.manifest.v1+json", &manifest);
    entry["annotations"] = serde_json::json!({CONTAINERD_IMAGE_NAME: name, OCI_REF_NAME: "1.0"});
    let index = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": [entry]})).expect("index");
    vec![
        ("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
        ("index.json".into(), index),
        (format!("blobs/sha256/{}", sha(&layer)), layer),
        (format!("blobs/sha256/{}", sha(&config)), config),
        (format!("blobs/sha256/{}", sha(&manifest)), manifest),
    ]
}

pub(crate) fn to_tar(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    tar_of(&refs)
}

fn docker_files(tag: &str) -> Vec<(String, Vec<u8>)> {
    let layer = tar_of(&[("bin/sh", b"#!".to_vec())]);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", sha(&layer))]}
    }))
    .expect("config");
    let config_name = format!("{}.json", sha(&config));
    let manifest = serde_json::to_vec(&serde_json::json!([
        {"Config": config_name, "RepoTags": [tag], "Layers": ["0123abcd/layer.tar"]}
    ]))
    .expect("manifest");
    vec![("manifest.json".into(), manifest), (config_name, config), ("0123abcd/layer.tar".into(), layer)]
}

#[test]
fn oci_layout_is_valid_and_named_by_its_containerd_annotation() {
    let s = validate(to_tar(&oci_files("127.0.0.1:5001/airgap/busybox:1.0")).as_slice()).expect("valid");
    assert_eq!(s.format, ArchiveFormat::OciLayout);
    assert_eq!(s.images, vec!["127.0.0.1:5001/airgap/busybox:1.0".to_string()]);
    assert_eq!(s.blobs, 5);
}

#[test]
fn docker_archive_is_valid_and_its_tags_are_normalized_as_containerd_does() {
    let s = validate(to_tar(&docker_files("busybox:1.36")).as_slice()).expect("valid");
    assert_eq!(s.format, ArchiveFormat::DockerArchive);
    assert_eq!(s.images, vec!["docker.io/library/busybox:1.36".to_string()]);
    assert_eq!(normalize_docker_name("127.0.0.1:5000/x/y"), "127.0.0.1:5000/x/y:latest");
    assert_eq!(normalize_docker_name("team/app:2"), "docker.io/team/app:2");
}

#[test]
fn gzip_and_zstd_archives_are_recognised_by_content_and_decompressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = to_tar(&oci_files("example.com/a:1"));
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&plain).expect("gzip");
        e.finish().expect("gzip")
    };
    let zst = ruzstd::encoding::compress_to_vec(plain.as_slice(), ruzstd::encoding::CompressionLevel::Fastest);
    // Names that lie about the compression: the magic bytes decide.
    for (name, data, compression) in [
        ("a.tar", plain.clone(), Compression::None),
        ("b.tar", gz, Compression::Gzip),
        ("c.tar.gz", zst, Compression::Zstd),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &data).expect("write");
        assert_eq!(detect_compression(&path).expect("detect"), compression, "{name}");
        let s = validate_file(&path).expect(name);
        assert_eq!(s.images, vec!["example.com/a:1".to_string()], "{name}");
        let out = decompress_to(&path, &dir.path().join(format!("{name}.plain"))).expect("decompress");
        assert_eq!(std::fs::read(&out).expect("read"), plain, "{name}");
        if compression == Compression::None {
            assert_eq!(out, path, "a plain tar is used as it is");
        }
    }
}

#[test]
fn a_blob_with_one_flipped_byte_is_refused_naming_its_digest() {
    let mut files = oci_files("example.com/a:1");
    let layer = files.iter_mut().find(|(_, d)| d.len() > 1000).expect("layer");
    let expected = layer.0.trim_start_matches("blobs/sha256/").to_string();
    layer.1[600] ^= 0x01;
    let err = validate(to_tar(&files).as_slice()).expect_err("corrupt");
    let msg = err.to_string();
    assert!(matches!(err, ArchiveError::BlobDigest { .. }), "{msg}");
    assert!(msg.contains(&format!("sha256:{expected}")) && msg.contains("corrupt"), "{msg}");
}

#[test]
fn a_missing_layer_is_refused() {
    let mut files = oci_files("example.com/a:1");
    files.retain(|(_, d)| d.len() <= 1000);
    let err = validate(to_tar(&files).as_slice()).expect_err("incomplete");
    assert!(matches!(err, ArchiveError::MissingBlob { what: "layer", .. }), "{err}");
}

#[test]
fn a_docker_layer_that_does_not_match_its_diff_id_is_refused() {
    let mut files = docker_files("busybox:1");
    files[2].1[10] ^= 0x20;
    let err = validate(to_tar(&files).as_slice()).expect_err("corrupt");
    assert!(matches!(err, ArchiveError::LayerDigest { .. }), "{err}");
}

#[test]
fn an_index_without_image_names_is_refused() {
    let mut files = oci_files("example.com/a:1");
    let index = serde_json::from_slice::<serde_json::Value>(&files[1].1).expect("index");
    let mut entry = index["manifests"][0].clone();
    entry["annotations"] = serde_json::json!({OCI_REF_NAME: "1.0"});
    files[1].1 = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": [entry]})).expect("json");
    let err = validate(to_tar(&files).as_slice()).expect_err("unnamed");
    assert!(matches!(err, ArchiveError::NoImageNames), "{err}");
}

#[test]
fn files_that_are_not_image_archives_are_refused() {
    let err = validate(tar_of(&[("etc/hosts", b"127.0.0.1 localhost\n".to_vec())]).as_slice()).expect_err("not");
    assert!(matches!(err, ArchiveError::UnknownFormat), "{err}");
    let err = validate(&b"this is not a tar file at all, just some text that is long enough"[..]);
    assert!(err.is_err());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cut.tar.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&to_tar(&oci_files("example.com/a:1"))).expect("gzip");
    let gz = e.finish().expect("gzip");
    std::fs::write(&path, &gz[..gz.len() / 2]).expect("write");
    assert!(validate_file(&path).is_err(), "a truncated gzip archive is refused");
}
