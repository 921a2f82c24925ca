//! The config file, as k3s reads its own: `/etc/k1s/config.yaml` (or `--config`) and then every
//! `config.yaml.d/*.yaml` next to it, in name order. Keys are `k1s server`'s long flag names;
//! a later file overrides a key, except `KEY+:` which appends to a list flag (`tls-san+: [...]`).
//! Every key is checked against the flag it sets: an unknown key or a value of the wrong type
//! (`false` for a string, `null`, a map...) is an error naming the file, the key and the
//! expected type. The result is a list of flags placed before the command line's, so flags win.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Keys that are flags of `k1s server` but make no sense in a config file.
const NOT_IN_FILE: [&str; 3] = ["config", "help", "version"];

/// One merged key: its value and the file that set it last.
#[derive(Debug)]
struct Entry {
    key: String,
    value: Value,
    file: PathBuf,
}

/// The drop-in directory of `path`: `config.yaml` ▶ `config.yaml.d`.
fn drop_in_dir(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".d");
    path.with_file_name(name)
}

/// The files to read, in order: the main file (when present; required when `explicit`), then
/// the drop-ins by name.
fn files(path: &Path, explicit: bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    match std::fs::metadata(path) {
        Ok(_) => out.push(path.to_path_buf()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {}
        Err(e) => return Err(e).with_context(|| format!("reading config file {}", path.display())),
    }
    let dir = drop_in_dir(path);
    match std::fs::read_dir(&dir) {
        Ok(rd) => {
            let mut extra: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect();
            extra.sort();
            out.extend(extra);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading config directory {}", dir.display())),
    }
    Ok(out)
}

/// Reads and merges every file.
fn merged(path: &Path, explicit: bool) -> Result<Vec<Entry>> {
    let mut entries: Vec<Entry> = Vec::new();
    for file in files(path, explicit)? {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading config file {}", file.display()))?;
        if text.trim().is_empty() {
            continue;
        }
        let doc: Value =
            serde_saphyr::from_str(&text).with_context(|| format!("parsing config file {}", file.display()))?;
        let map = match doc {
            Value::Object(m) => m,
            Value::Null => continue,
            _ => bail!("config file {}: must be a map of flag names to values", file.display()),
        };
        for (k, v) in map {
            match k.strip_suffix('+') {
                Some(key) => match entries.iter_mut().find(|e| e.key == key) {
                    Some(e) => {
                        let mut items = match std::mem::take(&mut e.value) {
                            Value::Array(a) => a,
                            other => vec![other],
                        };
                        match v {
                            Value::Array(a) => items.extend(a),
                            other => items.push(other),
                        }
                        e.value = Value::Array(items);
                        e.file = file.clone();
                    }
                    None => entries.push(Entry { key: key.to_string(), value: v, file: file.clone() }),
                },
                None => match entries.iter_mut().find(|e| e.key == k) {
                    Some(e) => {
                        e.value = v;
                        e.file = file.clone();
                    }
                    None => entries.push(Entry { key: k, value: v, file: file.clone() }),
                },
            }
        }
    }
    Ok(entries)
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a map".into(),
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What a value-taking flag expects, found by asking its own parser.
fn expected_type(cmd: &clap::Command, key: &str) -> &'static str {
    let ok = |v: &str| cmd.clone().try_get_matches_from(["k1s", &format!("--{key}={v}")]).is_ok();
    if ok("any text") {
        "a string"
    } else if ok("false") {
        "a boolean"
    } else if ok("10Mi") {
        "a quantity (e.g. 10Mi)"
    } else if ok("1") {
        "a number"
    } else if ok("127.0.0.1") {
        "an IP address"
    } else if ok("30s") {
        "a duration (e.g. 30s)"
    } else {
        "a value"
    }
}

/// The flags the config files under `path` set, checked against `cmd` (the subcommand whose
/// flags they are: `k1s server`'s, or `k1s check`'s that include them).
pub fn args(path: &Path, explicit: bool, cmd: &clap::Command) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for Entry { key, value, file } in merged(path, explicit)? {
        let at = || format!("config file {}: key {key:?}", file.display());
        let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(key.as_str())) else {
            bail!("{}: unknown key (not a flag of `k1s server`)", at())
        };
        if NOT_IN_FILE.contains(&key.as_str()) {
            bail!("{}: unknown key (cannot be set in a config file)", at())
        }
        let flag = format!("--{key}");
        let mut mine = Vec::new();
        let expected = match arg.get_action() {
            clap::ArgAction::SetTrue => {
                match value {
                    Value::Bool(true) => mine.push(flag),
                    Value::Bool(false) => {}
                    other => bail!("{}: expected a boolean (true or false), got {}", at(), describe(&other)),
                }
                "a boolean"
            }
            clap::ArgAction::Append => {
                let items = match value {
                    Value::Array(a) => a,
                    other => vec![other],
                };
                for i in &items {
                    let Some(s) = scalar(i) else {
                        bail!("{}: expected a list of strings, got {} in it", at(), describe(i))
                    };
                    mine.push(format!("{flag}={s}"));
                }
                "a list of strings"
            }
            _ => {
                let expected = expected_type(cmd, &key);
                // A flag with a boolean value (`--anonymous-auth=false`) takes a YAML boolean.
                let value = if expected == "a boolean" {
                    match value {
                        Value::Bool(b) => Value::String(b.to_string()),
                        other => bail!("{}: expected a boolean (true or false), got {}", at(), describe(&other)),
                    }
                } else {
                    value
                };
                let Some(s) = scalar(&value) else { bail!("{}: expected {expected}, got {}", at(), describe(&value)) };
                mine.push(format!("{flag}={s}"));
                expected
            }
        };
        if !mine.is_empty() {
            let argv = std::iter::once("k1s".to_string()).chain(mine.iter().cloned());
            if let Err(e) = cmd.clone().try_get_matches_from(argv) {
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or_default().trim_start_matches("error: ");
                bail!("{}: expected {expected}: {first}", at())
            }
        }
        out.extend(mine);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    fn server_cmd() -> clap::Command {
        crate::Cli::command().find_subcommand("server").cloned().expect("server subcommand")
    }

    struct Files(tempfile::TempDir);

    impl Files {
        fn new(main: &str) -> Files {
            let d = tempfile::tempdir().expect("tmp");
            std::fs::write(d.path().join("config.yaml"), main).expect("write");
            Files(d)
        }
        fn drop_in(&self, name: &str, text: &str) -> &Self {
            let dir = self.0.path().join("config.yaml.d");
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join(name), text).expect("write");
            self
        }
        fn path(&self) -> PathBuf {
            self.0.path().join("config.yaml")
        }
        fn args(&self) -> Result<Vec<String>> {
            args(&self.path(), true, &server_cmd())
        }
    }

    #[test]
    fn drop_ins_override_in_name_order_and_plus_keys_append() {
        let f = Files::new("https-listen-port: 7443\ntls-san: [a.example]\ndisable-agent: true\ndebug: false\n");
        f.drop_in("20-port.yaml", "https-listen-port: 9443\n")
            .drop_in("10-port.yaml", "https-listen-port: 8443\ntls-san+: [b.example]\n")
            .drop_in("30-san.yaml", "tls-san+: c.example\n")
            .drop_in("notes.txt", "not: read");
        let args = f.args().expect("valid");
        assert_eq!(
            args,
            [
                "--https-listen-port=9443",
                "--tls-san=a.example",
                "--tls-san=b.example",
                "--tls-san=c.example",
                "--disable-agent",
            ]
        );
        f.drop_in("40-san.yaml", "tls-san: [only.example]\n");
        assert!(f.args().expect("valid").contains(&"--tls-san=only.example".to_string()));
        assert!(!f.args().expect("valid").contains(&"--tls-san=a.example".to_string()), "a plain key replaces");
    }

    #[test]
    fn an_unknown_key_names_the_file_and_the_key() {
        let f = Files::new("data-dir: /tmp/x\n");
        f.drop_in("50-typo.yaml", "tls-sans: [a]\n");
        let err = f.args().expect_err("unknown").to_string();
        let file = f.0.path().join("config.yaml.d/50-typo.yaml");
        assert_eq!(
            err,
            format!("config file {}: key \"tls-sans\": unknown key (not a flag of `k1s server`)", file.display())
        );
    }

    #[test]
    fn false_and_null_for_a_string_key_are_errors_with_the_expected_type() {
        let f = Files::new("write-kubeconfig-mode: false\n");
        let err = f.args().expect_err("false").to_string();
        assert!(err.ends_with("key \"write-kubeconfig-mode\": expected a string, got the boolean false"), "{err}");
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        let err = Files::new("node-name:\n").args().expect_err("null").to_string();
        assert!(err.ends_with("key \"node-name\": expected a string, got null"), "{err}");
        let err = Files::new("https-listen-port: true\n").args().expect_err("bool").to_string();
        assert!(err.ends_with("key \"https-listen-port\": expected a number, got the boolean true"), "{err}");
        let err = Files::new("https-listen-port: lots\n").args().expect_err("text").to_string();
        assert!(err.contains("key \"https-listen-port\": expected a number: invalid value 'lots'"), "{err}");
        let err = Files::new("disable-agent: \"yes\"\n").args().expect_err("string").to_string();
        assert!(err.ends_with("expected a boolean (true or false), got the string \"yes\""), "{err}");
        let err = Files::new("tls-san: [{a: b}]\n").args().expect_err("map").to_string();
        assert!(err.ends_with("expected a list of strings, got a map in it"), "{err}");
        let err = Files::new("cluster-dns: 10.43.0.x\n").args().expect_err("ip").to_string();
        assert!(err.contains("expected an IP address"), "{err}");
        let err = Files::new("container-log-max-size: true\n").args().expect_err("bool").to_string();
        assert!(err.ends_with("expected a quantity (e.g. 10Mi), got the boolean true"), "{err}");
        let err = Files::new("container-log-max-size: lots\n").args().expect_err("text").to_string();
        assert!(err.contains("key \"container-log-max-size\": expected a quantity (e.g. 10Mi)"), "{err}");
        let ok = Files::new("container-log-max-size: 20Mi\ncontainer-log-max-files: 3\n").args().expect("valid");
        assert_eq!(ok, ["--container-log-max-size=20Mi", "--container-log-max-files=3"]);
        let err = Files::new("tls-san+: [a]\n").args();
        assert!(err.is_ok(), "appending to nothing starts the list: {err:?}");
    }

    #[test]
    fn a_flag_with_a_boolean_value_takes_a_yaml_boolean() {
        assert_eq!(Files::new("anonymous-auth: false\n").args().expect("valid"), ["--anonymous-auth=false"]);
        assert_eq!(Files::new("anonymous-auth: true\n").args().expect("valid"), ["--anonymous-auth=true"]);
        let err = Files::new("anonymous-auth: \"no\"\n").args().expect_err("a string").to_string();
        assert!(
            err.ends_with("key \"anonymous-auth\": expected a boolean (true or false), got the string \"no\""),
            "{err}"
        );
    }

    #[test]
    fn every_flag_is_settable_including_hidden_ones() {
        let f = Files::new("kubelet-port: 0\ncompaction-interval: 10m\nrun-dir: /run/x\ntest-cert-validity: 2m\n");
        assert_eq!(
            f.args().expect("valid"),
            ["--kubelet-port=0", "--compaction-interval=10m", "--run-dir=/run/x", "--test-cert-validity=2m"]
        );
        let missing = args(Path::new("/nonexistent/config.yaml"), false, &server_cmd()).expect("optional");
        assert!(missing.is_empty());
        assert!(
            args(Path::new("/nonexistent/config.yaml"), true, &server_cmd()).is_err(),
            "an explicit file must exist"
        );
    }
}
