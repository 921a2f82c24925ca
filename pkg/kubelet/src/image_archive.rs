//! Image archives (`docker save`, `ctr export`, `skopeo copy … oci-archive:`, `k1s images
//! save`): OCI image layout tars and docker-archive tars, optionally gzip- or zstd-compressed.
//!
//! [`decompress_to`] turns any of them into a plain tar (compression is recognised by its magic
//! bytes, not by the file name); [`validate`] reads a plain tar once and checks it before
//! anything is imported: every `blobs/<alg>/<hex>` file must hash to its name, every manifest an
//! index names (at least one platform of each index) must be there with its config and layers,
//! docker-archive layers must match their config's `diff_ids`, and at least one image must be
//! named. A corrupt archive is refused as a whole, so an import never leaves half an image.

use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// containerd's annotation for the full image name in an OCI layout's `index.json`.
pub const CONTAINERD_IMAGE_NAME: &str = "io.containerd.image.name";
/// The OCI annotation for the reference (containerd writes the tag, others the full name).
pub const OCI_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Blobs up to this size are kept in memory while reading (manifests, indexes, configs).
const SMALL_BLOB: u64 = 4 << 20;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// How an archive is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveFormat {
    /// An OCI image layout (`oci-layout`, `index.json`, `blobs/`).
    OciLayout,
    /// `docker save`'s format (`manifest.json`, configs and `<id>/layer.tar`).
    DockerArchive,
}

/// How an archive file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// What a valid archive holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveSummary {
    pub format: ArchiveFormat,
    /// The image names it carries, as containerd will name them.
    pub images: Vec<String>,
    /// Number of content files checked (blobs, configs, layers).
    pub blobs: usize,
}

/// Why an archive cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("reading image archive {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("decompressing image archive {} ({compression:?})", path.display())]
    Decompress {
        path: PathBuf,
        compression: Compression,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the decompressed copy {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("image archive is not a valid tar file: {0}")]
    Tar(#[source] std::io::Error),
    #[error("image archive is corrupt: {path} has digest {actual}, not the {expected} its name says")]
    BlobDigest { path: String, expected: String, actual: String },
    #[error("image archive is corrupt: layer {path} has digest {actual}, not the {expected} its config lists")]
    LayerDigest { path: String, expected: String, actual: String },
    #[error("image archive is incomplete: {what} {digest} is missing")]
    MissingBlob { what: &'static str, digest: String },
    #[error("image archive is corrupt: {what} {digest} has {actual} bytes, not the {expected} its descriptor says")]
    BlobSize { what: &'static str, digest: String, expected: u64, actual: u64 },
    #[error("image archive is incomplete: {0} is missing")]
    MissingFile(String),
    #[error("image archive has an invalid {file}: {message}")]
    Json { file: String, message: String },
    #[error("image archive has an unsupported digest {0} (only sha256 is checked)")]
    UnsupportedDigest(String),
    #[error("not an image archive: it has neither index.json (OCI image layout) nor manifest.json (docker-archive)")]
    UnknownFormat,
    #[error("image archive names no image (index.json needs an io.containerd.image.name annotation or an org.opencontainers.image.ref.name with a repository; manifest.json needs RepoTags)")]
    NoImageNames,
}

/// Recognises the compression of `path` by its first bytes.
pub fn detect_compression(path: &Path) -> Result<Compression, ArchiveError> {
    let read_err = |source| ArchiveError::Read { path: path.to_path_buf(), source };
    let mut f = std::fs::File::open(path).map_err(read_err)?;
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < magic.len() {
        match f.read(&mut magic[n..]).map_err(read_err)? {
            0 => break,
            m => n += m,
        }
    }
    Ok(if n >= 2 && magic[..2] == GZIP_MAGIC {
        Compression::Gzip
    } else if n >= 4 && magic == ZSTD_MAGIC {
        Compression::Zstd
    } else {
        Compression::None
    })
}

/// A reader of `path` that undoes its compression.
pub fn open_decompressed(path: &Path) -> Result<Box<dyn Read + Send>, ArchiveError> {
    let compression = detect_compression(path)?;
    let file = std::fs::File::open(path).map_err(|source| ArchiveError::Read { path: path.to_path_buf(), source })?;
    let file = std::io::BufReader::new(file);
    Ok(match compression {
        Compression::None => Box::new(file),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Zstd => {
            Box::new(ruzstd::decoding::StreamingDecoder::new(file).map_err(|e| ArchiveError::Decompress {
                path: path.to_path_buf(),
                compression,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
            })?)
        }
    })
}

/// Writes the plain tar inside `path` to `out` (when `path` is compressed) and returns the
/// path of the plain tar: `out`, or `path` itself when it was not compressed.
pub fn decompress_to(path: &Path, out: &Path) -> Result<PathBuf, ArchiveError> {
    let compression = detect_compression(path)?;
    if compression == Compression::None {
        return Ok(path.to_path_buf());
    }
    let mut reader = open_decompressed(path)?;
    let write_err = |source| ArchiveError::Write { path: out.to_path_buf(), source };
    let mut w = std::io::BufWriter::new(std::fs::File::create(out).map_err(write_err)?);
    std::io::copy(&mut reader, &mut w).map_err(|source| {
        if source.kind() == std::io::ErrorKind::InvalidData || source.kind() == std::io::ErrorKind::UnexpectedEof {
            ArchiveError::Decompress { path: path.to_path_buf(), compression, source }
        } else {
            ArchiveError::Write { path: out.to_path_buf(), source }
        }
    })?;
    w.flush().map_err(write_err)?;
    Ok(out.to_path_buf())
}

/// Decompresses (in memory, streaming) and validates the archive at `path`.
pub fn validate_file(path: &Path) -> Result<ArchiveSummary, ArchiveError> {
    validate(open_decompressed(path)?)
}

/// One regular file of the tar.
struct Entry {
    sha256: String,
    size: u64,
    /// Kept for small files only.
    data: Option<Vec<u8>>,
}

/// Reads a plain tar and checks it (see the module documentation).
pub fn validate(reader: impl Read) -> Result<ArchiveSummary, ArchiveError> {
    let mut archive = tar::Archive::new(reader);
    let mut files: BTreeMap<String, Entry> = BTreeMap::new();
    for entry in archive.entries().map_err(ArchiveError::Tar)? {
        let mut entry = entry.map_err(ArchiveError::Tar)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(ArchiveError::Tar)?;
        let name = normalize(&path.to_string_lossy());
        let size = entry.header().size().map_err(ArchiveError::Tar)?;
        let mut hasher = Sha256::new();
        let mut data = (size <= SMALL_BLOB).then(|| Vec::with_capacity(usize::try_from(size).unwrap_or(0)));
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = entry.read(&mut buf).map_err(ArchiveError::Tar)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            if let Some(d) = data.as_mut() {
                d.extend_from_slice(&buf[..n]);
            }
        }
        let sha256 = format!("{:x}", hasher.finalize());
        if let Some(rest) = name.strip_prefix("blobs/") {
            if let Some((alg, hex)) = rest.split_once('/') {
                if alg != "sha256" {
                    return Err(ArchiveError::UnsupportedDigest(format!("{alg}:{hex}")));
                }
                if hex != sha256 {
                    return Err(ArchiveError::BlobDigest {
                        expected: format!("sha256:{hex}"),
                        path: name.clone(),
                        actual: format!("sha256:{sha256}"),
                    });
                }
            }
        }
        files.insert(name, Entry { sha256, size, data });
    }
    let blobs = files.len();
    if let Some(index) = files.get("index.json") {
        let index = parse_json(index, "index.json")?;
        let mut images = Vec::new();
        for desc in descriptors(&index, "manifests", "index.json")? {
            check_descriptor(&files, &desc)?;
            if let Some(name) = image_name(&desc) {
                images.push(name);
            }
        }
        if images.is_empty() {
            return Err(ArchiveError::NoImageNames);
        }
        return Ok(ArchiveSummary { format: ArchiveFormat::OciLayout, images, blobs });
    }
    if let Some(manifest) = files.get("manifest.json") {
        let manifest = parse_json(manifest, "manifest.json")?;
        let images = check_docker_manifest(&files, &manifest)?;
        return Ok(ArchiveSummary { format: ArchiveFormat::DockerArchive, images, blobs });
    }
    Err(ArchiveError::UnknownFormat)
}

fn normalize(path: &str) -> String {
    path.trim_start_matches("./").trim_start_matches('/').to_string()
}

fn parse_json(entry: &Entry, file: &str) -> Result<serde_json::Value, ArchiveError> {
    let data = entry
        .data
        .as_deref()
        .ok_or_else(|| ArchiveError::Json { file: file.to_string(), message: "too large".into() })?;
    serde_json::from_slice(data).map_err(|e| ArchiveError::Json { file: file.to_string(), message: e.to_string() })
}

/// A content descriptor (`mediaType`, `digest`, `size`, `annotations`).
#[derive(Clone, Debug)]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    annotations: BTreeMap<String, String>,
}

fn descriptors(doc: &serde_json::Value, field: &str, file: &str) -> Result<Vec<Descriptor>, ArchiveError> {
    let bad = |message: String| ArchiveError::Json { file: file.to_string(), message };
    let Some(list) = doc.get(field).and_then(|v| v.as_array()) else {
        return Err(bad(format!("no {field} list")));
    };
    list.iter().map(|v| descriptor(v).ok_or_else(|| bad(format!("an entry of {field} is not a descriptor")))).collect()
}

fn descriptor(v: &serde_json::Value) -> Option<Descriptor> {
    Some(Descriptor {
        media_type: v.get("mediaType").and_then(|m| m.as_str()).unwrap_or_default().to_string(),
        digest: v.get("digest")?.as_str()?.to_string(),
        size: v.get("size")?.as_u64()?,
        annotations: v
            .get("annotations")
            .and_then(|a| a.as_object())
            .map(|a| a.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default(),
    })
}

fn blob_path(digest: &str) -> Result<String, ArchiveError> {
    match digest.split_once(':') {
        Some(("sha256", hex)) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(format!("blobs/sha256/{hex}"))
        }
        _ => Err(ArchiveError::UnsupportedDigest(digest.to_string())),
    }
}

fn blob<'a>(files: &'a BTreeMap<String, Entry>, what: &'static str, d: &Descriptor) -> Result<&'a Entry, ArchiveError> {
    let entry = files
        .get(&blob_path(&d.digest)?)
        .ok_or_else(|| ArchiveError::MissingBlob { what, digest: d.digest.clone() })?;
    if entry.size != d.size {
        return Err(ArchiveError::BlobSize { what, digest: d.digest.clone(), expected: d.size, actual: entry.size });
    }
    Ok(entry)
}

fn is_index(media_type: &str, doc: &serde_json::Value) -> bool {
    media_type.ends_with("image.index.v1+json")
        || media_type.ends_with("manifest.list.v2+json")
        || (media_type.is_empty() && doc.get("manifests").is_some())
}

/// Checks a manifest or index descriptor and everything below it. An index needs at least one
/// of its manifests present (archives often carry one platform of a multi-platform image).
fn check_descriptor(files: &BTreeMap<String, Entry>, d: &Descriptor) -> Result<(), ArchiveError> {
    let entry = blob(files, "manifest", d)?;
    let doc = parse_json(entry, &d.digest)?;
    if is_index(&d.media_type, &doc) {
        let children = descriptors(&doc, "manifests", &d.digest)?;
        let mut missing = None;
        let mut present = 0;
        for child in &children {
            match check_descriptor(files, child) {
                Ok(()) => present += 1,
                // A platform left out of the archive is fine; a corrupt or partial one is not.
                Err(ArchiveError::MissingBlob { what: "manifest", digest }) if digest == child.digest => {
                    missing.get_or_insert(digest);
                }
                Err(e) => return Err(e),
            }
        }
        if present == 0 {
            return Err(ArchiveError::MissingBlob {
                what: "manifest",
                digest: missing.unwrap_or_else(|| format!("(any, of index {})", d.digest)),
            });
        }
        return Ok(());
    }
    let config = doc
        .get("config")
        .and_then(descriptor)
        .ok_or_else(|| ArchiveError::Json { file: d.digest.clone(), message: "manifest without a config".into() })?;
    blob(files, "config", &config)?;
    for layer in descriptors(&doc, "layers", &d.digest)? {
        blob(files, "layer", &layer)?;
    }
    Ok(())
}

/// The name containerd gives the image an `index.json` entry describes.
fn image_name(d: &Descriptor) -> Option<String> {
    if let Some(name) = d.annotations.get(CONTAINERD_IMAGE_NAME) {
        return Some(name.clone());
    }
    // containerd takes a ref.name that is a full reference (has a registry or path).
    d.annotations.get(OCI_REF_NAME).filter(|n| n.contains('/')).cloned()
}

fn check_docker_manifest(
    files: &BTreeMap<String, Entry>,
    manifest: &serde_json::Value,
) -> Result<Vec<String>, ArchiveError> {
    let bad = |message: &str| ArchiveError::Json { file: "manifest.json".into(), message: message.into() };
    let list = manifest.as_array().ok_or_else(|| bad("not a list"))?;
    let mut images = BTreeSet::new();
    for item in list {
        let config_path = item.get("Config").and_then(|c| c.as_str()).ok_or_else(|| bad("an entry has no Config"))?;
        let config_path = normalize(config_path);
        let config = files.get(&config_path).ok_or_else(|| ArchiveError::MissingFile(config_path.clone()))?;
        // `<hex>.json` configs are named after their digest, as blobs are.
        if let Some(hex) = config_path.strip_suffix(".json").filter(|h| h.len() == 64) {
            if hex != config.sha256 {
                return Err(ArchiveError::BlobDigest {
                    path: config_path.clone(),
                    expected: format!("sha256:{hex}"),
                    actual: format!("sha256:{}", config.sha256),
                });
            }
        }
        let config_doc = parse_json(config, &config_path)?;
        let diff_ids: Vec<&str> = config_doc
            .pointer("/rootfs/diff_ids")
            .and_then(|d| d.as_array())
            .map(|d| d.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let layers = item.get("Layers").and_then(|l| l.as_array()).ok_or_else(|| bad("an entry has no Layers"))?;
        for (i, layer) in layers.iter().enumerate() {
            let path = normalize(layer.as_str().ok_or_else(|| bad("a layer is not a path"))?);
            let entry = files.get(&path).ok_or_else(|| ArchiveError::MissingFile(path.clone()))?;
            // Uncompressed layers must hash to their diff_id; compressed ones (rare in this
            // format) are checked by containerd when it unpacks them.
            let compressed =
                entry.data.as_deref().is_some_and(|d| d.starts_with(&GZIP_MAGIC) || d.starts_with(&ZSTD_MAGIC))
                    || path.ends_with(".gz")
                    || path.ends_with(".zst");
            if let Some(expected) = diff_ids.get(i) {
                let actual = format!("sha256:{}", entry.sha256);
                if !compressed && !path.starts_with("blobs/") && *expected != actual {
                    return Err(ArchiveError::LayerDigest { path, expected: expected.to_string(), actual });
                }
            }
        }
        for tag in item.get("RepoTags").and_then(|t| t.as_array()).into_iter().flatten() {
            if let Some(tag) = tag.as_str() {
                images.insert(normalize_docker_name(tag));
            }
        }
    }
    if images.is_empty() {
        return Err(ArchiveError::NoImageNames);
    }
    Ok(images.into_iter().collect())
}

/// `busybox:1` ▶ `docker.io/library/busybox:1`, as containerd names docker-archive tags.
pub fn normalize_docker_name(name: &str) -> String {
    let registry = crate::registries::image_registry(name);
    let explicit = name.split_once('/').is_some_and(|(first, _)| first.contains(['.', ':']) || first == "localhost");
    let mut full = if explicit {
        name.to_string()
    } else if name.contains('/') {
        format!("{registry}/{name}")
    } else {
        format!("{registry}/library/{name}")
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') && !last.contains('@') {
        full.push_str(":latest");
    }
    full
}

#[cfg(test)]
#[path = "image_archive/tests.rs"]
pub(crate) mod tests;
