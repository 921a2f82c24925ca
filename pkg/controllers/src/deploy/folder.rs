//! Reading the manifests folder: which files count, what each asks for, and the name of the
//! `Addon` that tracks it. No API calls here.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The extensions of manifest files.
const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];
/// `NAME.yaml.skip` disables `NAME.yaml`.
const SKIP_SUFFIX: &str = ".skip";

/// One manifest file as read from the folder.
#[derive(Debug)]
pub struct File {
    /// The file name inside the folder (`dns.yaml`).
    pub name: String,
    pub path: PathBuf,
    /// The `Addon` tracking it (in kube-system).
    pub addon: String,
    /// `sha256:<hex>` of its bytes.
    pub checksum: String,
    /// Its objects in file order, or why it cannot be applied.
    pub objects: Result<Vec<Value>, String>,
}

/// What the folder holds.
#[derive(Debug, Default)]
pub struct Scan {
    /// Manifest files, by file name.
    pub files: Vec<File>,
    /// The `Addon` names of files disabled by a `.skip` file: neither applied nor pruned.
    pub skipped: BTreeSet<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("reading the manifests folder {}", dir.display())]
pub struct ScanError {
    pub dir: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn is_manifest(name: &str) -> bool {
    !name.starts_with('.')
        && name.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// The `Addon` name for a manifest file name: its stem, made a valid object name (k3s names
/// its Addons the same way: `coredns.yaml` ▶ `coredns`).
pub fn addon_name(file: &str) -> String {
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let mut name: String = stem
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    name.truncate(253);
    let name = name.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if name.is_empty() {
        "addon".to_owned()
    } else {
        name.to_owned()
    }
}

/// Reads the folder: every `*.yaml`, `*.yml` and `*.json` (not hidden, not disabled by a
/// `.skip` file), sorted by name. A file that cannot be read or parsed is returned with its error.
pub fn scan(dir: &Path) -> Result<Scan, ScanError> {
    let err = |source| ScanError { dir: dir.to_path_buf(), source };
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        // Symlinks count as what they point to; a dangling one is left out.
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            if let Some(name) = entry.file_name().to_str() {
                names.insert(name.to_owned());
            }
        }
    }
    let mut scan = Scan::default();
    let mut taken = BTreeSet::new();
    for name in &names {
        if !is_manifest(name) {
            if let Some(target) = name.strip_suffix(SKIP_SUFFIX).filter(|t| is_manifest(t)) {
                scan.skipped.insert(addon_name(target));
            }
            continue;
        }
        if names.contains(&format!("{name}{SKIP_SUFFIX}")) {
            continue;
        }
        let mut addon = addon_name(name);
        // `a.yaml` and `a.json` both exist: the second gets its extension in its name.
        if !taken.insert(addon.clone()) {
            addon = addon_name(&name.replace('.', "-"));
            taken.insert(addon.clone());
        }
        let path = dir.join(name);
        let (checksum, objects) = match std::fs::read(&path) {
            Ok(bytes) => (checksum(&bytes), parse(name, &bytes)),
            Err(e) => (String::new(), Err(format!("reading the file: {e}"))),
        };
        scan.files.push(File { name: name.clone(), path, addon, checksum, objects });
    }
    // A skipped file's Addon keeps its objects even when another file now maps to that name.
    scan.files.retain(|f| !scan.skipped.contains(&f.addon));
    Ok(scan)
}

pub fn checksum(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The objects of one file: YAML (several documents) or JSON; `kind: List` (and other `…List`
/// kinds with `items`) are unpacked as kubectl does. Empty documents are ignored.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let docs: Vec<Value> = if name.ends_with(".json") {
        let mut out = Vec::new();
        for doc in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
            out.push(doc.map_err(|e| format!("invalid JSON: {e}"))?);
        }
        out
    } else {
        serde_saphyr::from_multiple::<Value>(text).map_err(|e| format!("invalid YAML: {e}"))?
    };
    let mut objects = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let is_list = doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
            && doc.get("items").is_some_and(Value::is_array);
        let items = match doc {
            Value::Object(mut m) if is_list => match m.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
            doc => vec![doc],
        };
        for item in items {
            check(&item).map_err(|e| format!("document {}: {e}", i + 1))?;
            objects.push(item);
        }
    }
    Ok(objects)
}

/// What every object must carry to be applied.
fn check(obj: &Value) -> Result<(), String> {
    let Some(map) = obj.as_object() else {
        return Err("not an object (a mapping with apiVersion, kind and metadata)".into());
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let api_version = text(map.get("apiVersion")).ok_or("apiVersion is required")?;
    let kind = text(map.get("kind")).ok_or_else(|| format!("{api_version}: kind is required"))?;
    if text(map.get("metadata").and_then(|m| m.get("name"))).is_none() {
        return Err(format!("{kind}: metadata.name is required (generateName cannot be applied)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_become_objects_and_empty_documents_are_ignored() {
        let yaml = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# only a comment\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n\
                    - {apiVersion: v1, kind: Namespace, metadata: {name: c}}\n";
        let objs = parse("x.yaml", yaml.as_bytes()).expect("valid");
        let names: Vec<_> = objs.iter().map(|o| o["metadata"]["name"].as_str().unwrap_or_default()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let json = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}"#;
        assert_eq!(parse("x.json", json.as_bytes()).expect("json").len(), 1);
    }

    #[test]
    fn an_object_without_kind_or_name_or_bad_syntax_is_an_error_naming_the_document() {
        let e = parse(
            "x.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
        )
        .expect_err("no kind");
        assert_eq!(e, "document 2: v1: kind is required");
        let e =
            parse("x.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n").expect_err("no name");
        assert!(e.contains("metadata.name is required"), "{e}");
        let e = parse("x.yaml", b"apiVersion: v1\nkind: [unclosed\n").expect_err("syntax");
        assert!(e.starts_with("invalid YAML"), "{e}");
        assert!(parse("x.json", b"{\"apiVersion\": ").expect_err("json").starts_with("invalid JSON"));
    }

    #[test]
    fn addon_names_are_file_stems_made_valid_object_names() {
        assert_eq!(addon_name("dns.yaml"), "dns");
        assert_eq!(addon_name("My_App.v2.yml"), "my-app.v2");
        assert_eq!(addon_name("__.json"), "addon");
    }

    #[test]
    fn the_scan_takes_manifests_only_and_honours_skip_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |n: &str, s: &str| std::fs::write(dir.path().join(n), s).expect("write");
        let cm = |n: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}}}\n");
        write("a.yaml", &cm("a"));
        write("a.json", r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aj"}}"#);
        write("b.yml", &cm("b"));
        write("b.yml.skip", "");
        write("c.yaml.skip", "");
        write(".hidden.yaml", &cm("h"));
        write("notes.txt", "not a manifest");
        write("bad.yaml", "kind: [");
        std::fs::create_dir(dir.path().join("sub.yaml")).expect("dir");
        let scan = scan(dir.path()).expect("scan");
        let files: Vec<_> = scan.files.iter().map(|f| (f.name.as_str(), f.addon.as_str())).collect();
        assert_eq!(files, [("a.json", "a"), ("a.yaml", "a-yaml"), ("bad.yaml", "bad")]);
        assert_eq!(scan.skipped.iter().map(String::as_str).collect::<Vec<_>>(), ["b", "c"]);
        assert!(scan.files[2].objects.is_err());
        assert!(scan.files[0].checksum.starts_with("sha256:") && scan.files[0].checksum.len() == 71);
    }
}
