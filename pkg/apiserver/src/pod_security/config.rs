//! The plugin's configuration: upstream's `PodSecurityConfiguration` (defaults for namespaces
//! without labels, and exemptions), read from the file `--pod-security-admission-config-file`
//! names, either as that kind or wrapped in an `AdmissionConfiguration` as k3s documents it.

use super::policy::{Level, LevelVersion, Policy, Version};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exemptions {
    pub usernames: Vec<String>,
    pub namespaces: Vec<String>,
    pub runtime_classes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The policy of namespaces without PodSecurity labels.
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

impl Default for Config {
    /// Privileged everywhere by default, `kube-system` exempt (as k3s and kubeadm set it up).
    fn default() -> Self {
        Config {
            defaults: Policy::default(),
            exemptions: Exemptions { namespaces: vec!["kube-system".into()], ..Exemptions::default() },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading PodSecurity configuration {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing PodSecurity configuration: {0}")]
    Parse(String),
    #[error("PodSecurity configuration: unsupported kind {kind:?} (want PodSecurityConfiguration or AdmissionConfiguration)")]
    Kind { kind: String },
    #[error("PodSecurity configuration: defaults.{field}: Invalid value: {value:?}: {message}")]
    Invalid { field: &'static str, value: String, message: &'static str },
    #[error("PodSecurity configuration: exemptions.{field}: Invalid value: {value:?}: must not be empty")]
    EmptyExemption { field: &'static str, value: String },
}

impl Config {
    /// Reads the file; a `PodSecurity` plugin entry of an `AdmissionConfiguration` may name
    /// its configuration's file with `path` (relative to this file's folder) instead.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: p.to_path_buf(), source });
        let text = read(path)?;
        let doc: Value = serde_saphyr::from_str(&text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        if let Some(nested) = plugin(&doc).and_then(|p| p["path"].as_str()).filter(|p| !p.is_empty()) {
            let nested = path.parent().unwrap_or(Path::new(".")).join(nested);
            return Self::from_yaml(&read(&nested)?);
        }
        Self::from_yaml(&text)
    }

    /// Parses a `PodSecurityConfiguration` (any of v1alpha1, v1beta1, v1), alone or as the
    /// `PodSecurity` plugin's configuration in an `AdmissionConfiguration`.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        let kind = doc["kind"].as_str().unwrap_or("");
        let psc = match kind {
            "PodSecurityConfiguration" => &doc,
            "AdmissionConfiguration" => match plugin(&doc) {
                Some(p) => &p["configuration"],
                None => return Ok(Config::default()),
            },
            other => return Err(ConfigError::Kind { kind: other.to_string() }),
        };
        let defaults = &psc["defaults"];
        let field = |k: &str| defaults[k].as_str().filter(|s| !s.is_empty());
        let level = |k: &'static str| -> Result<Level, ConfigError> {
            match field(k) {
                None => Ok(Level::Privileged),
                Some(v) => {
                    Level::parse(v).map_err(|message| ConfigError::Invalid { field: k, value: v.into(), message })
                }
            }
        };
        let version = |k: &'static str| -> Result<Version, ConfigError> {
            match field(k) {
                None => Ok(Version::Latest),
                Some(v) => {
                    Version::parse(v).map_err(|message| ConfigError::Invalid { field: k, value: v.into(), message })
                }
            }
        };
        let policy = Policy {
            enforce: LevelVersion { level: level("enforce")?, version: version("enforce-version")? },
            audit: LevelVersion { level: level("audit")?, version: version("audit-version")? },
            warn: LevelVersion { level: level("warn")?, version: version("warn-version")? },
        };
        let list = |k: &'static str| -> Result<Vec<String>, ConfigError> {
            let items: Vec<String> = psc["exemptions"][k]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect();
            match items.iter().find(|s| s.is_empty()) {
                Some(empty) => Err(ConfigError::EmptyExemption { field: k, value: empty.clone() }),
                None => Ok(items),
            }
        };
        Ok(Config {
            defaults: policy,
            exemptions: Exemptions {
                usernames: list("usernames")?,
                namespaces: list("namespaces")?,
                runtime_classes: list("runtimeClasses")?,
            },
        })
    }
}

/// The `PodSecurity` entry of an `AdmissionConfiguration`.
fn plugin(doc: &Value) -> Option<&Value> {
    if doc["kind"] != "AdmissionConfiguration" {
        return None;
    }
    doc["plugins"].as_array()?.iter().find(|p| p["name"] == "PodSecurity")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_configuration_as_k3s_documents_it() {
        let yaml = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: "baseline"
      enforce-version: "latest"
      warn: "restricted"
      warn-version: "v1.30"
    exemptions:
      usernames: ["admin"]
      runtimeClasses: ["kata"]
      namespaces: [kube-system, tools]
"#;
        let c = Config::from_yaml(yaml).expect("valid");
        assert_eq!(c.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(c.defaults.warn.to_string(), "restricted:v1.30");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert_eq!(c.exemptions.usernames, ["admin"]);
        assert_eq!(c.exemptions.runtime_classes, ["kata"]);
        assert_eq!(c.exemptions.namespaces, ["kube-system", "tools"]);
    }

    #[test]
    fn a_bare_pod_security_configuration_and_invalid_values() {
        let c = Config::from_yaml("kind: PodSecurityConfiguration\ndefaults:\n  audit: restricted\n").expect("valid");
        assert_eq!(c.defaults.audit.level, Level::Restricted);
        assert!(c.exemptions.namespaces.is_empty());
        let e = Config::from_yaml("kind: PodSecurityConfiguration\ndefaults:\n  enforce: strict\n").expect_err("bad");
        assert_eq!(
            e.to_string(),
            r#"PodSecurity configuration: defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        );
        assert!(Config::from_yaml("kind: Pod\n").is_err());
    }

    #[test]
    fn a_plugin_entry_may_name_its_configuration_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let admission = dir.path().join("admission.yaml");
        std::fs::write(&admission, "kind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n")
            .expect("write");
        std::fs::write(dir.path().join("psa.yaml"), "kind: PodSecurityConfiguration\ndefaults: {warn: baseline}\n")
            .expect("write");
        let c = Config::load(&admission).expect("valid");
        assert_eq!(c.defaults.warn.level, Level::Baseline);
    }
}
