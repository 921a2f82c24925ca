//! The `EncryptionConfiguration` file (`apiserver.config.k8s.io/v1`), as kube-apiserver's
//! `--encryption-provider-config` and k3s's generated `encryption-config.json` hold it: YAML or
//! JSON, unknown fields refused, checked with upstream's rules and words (field paths such as
//! `resources[0].providers[1].aescbc.keys[0].secret`).

use super::providers::Kind;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
pub const KIND: &str = "EncryptionConfiguration";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EncryptionConfiguration {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub resources: Vec<ResourceConfiguration>,
}

/// One entry: the resources it covers and their providers, the first of which encrypts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfiguration {
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub providers: Vec<ProviderConfiguration>,
}

/// One provider: exactly one of the fields is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aescbc: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aesgcm: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secretbox: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityConfiguration>,
    /// Accepted by the parser so that validation can say k1s has no KMS support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfiguration {
    #[serde(default)]
    pub keys: Vec<Key>,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    #[serde(default)]
    pub name: String,
    /// Base64 of the key's bytes.
    #[serde(default)]
    pub secret: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("name", &self.name).field("secret", &"REDACTED").finish()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfiguration {}

impl ProviderConfiguration {
    /// The encrypting kind and its keys, when this is not `identity` (or `kms`).
    pub fn keys(&self) -> Option<(Kind, &KeysConfiguration)> {
        if let Some(k) = &self.aescbc {
            return Some((Kind::AesCbc, k));
        }
        if let Some(k) = &self.aesgcm {
            return Some((Kind::AesGcm, k));
        }
        self.secretbox.as_ref().map(|k| (Kind::Secretbox, k))
    }

    pub fn keys_mut(&mut self) -> Option<(Kind, &mut KeysConfiguration)> {
        if let Some(k) = &mut self.aescbc {
            return Some((Kind::AesCbc, k));
        }
        if let Some(k) = &mut self.aesgcm {
            return Some((Kind::AesGcm, k));
        }
        self.secretbox.as_mut().map(|k| (Kind::Secretbox, k))
    }

    /// An encrypting provider of `kind` with `keys`.
    pub fn with_keys(kind: Kind, keys: Vec<Key>) -> ProviderConfiguration {
        let k = Some(KeysConfiguration { keys });
        match kind {
            Kind::AesCbc => ProviderConfiguration { aescbc: k, ..Default::default() },
            Kind::AesGcm => ProviderConfiguration { aesgcm: k, ..Default::default() },
            Kind::Secretbox => ProviderConfiguration { secretbox: k, ..Default::default() },
        }
    }

    pub fn identity() -> ProviderConfiguration {
        ProviderConfiguration { identity: Some(IdentityConfiguration {}), ..Default::default() }
    }
}

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading encryption provider configuration file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("encryption provider configuration file {} is empty", path.display())]
    Empty { path: PathBuf },
    #[error("parsing encryption provider configuration file {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("encryption provider configuration file {}: {}", path.display(), errors.join("; "))]
    Invalid { path: PathBuf, errors: Vec<String> },
}

/// A group and resource as upstream's `schema.ParseGroupResource` splits `resource.group`.
pub fn parse_group_resource(s: &str) -> (&str, &str) {
    match s.split_once('.') {
        Some((resource, group)) => (group, resource),
        None => ("", s),
    }
}

fn show(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_default()
}

/// Upstream's checks (`ValidateEncryptionConfiguration`, and the masking check of building the
/// transformers), with its messages; plus: k1s has no KMS provider.
pub fn validate(c: &EncryptionConfiguration) -> Vec<String> {
    let mut errs = Vec::new();
    if c.api_version != API_VERSION {
        errs.push(format!("apiVersion: Unsupported value: {:?}: supported values: {API_VERSION:?}", c.api_version));
    }
    if c.kind != KIND {
        errs.push(format!("kind: Unsupported value: {:?}: supported values: {KIND:?}", c.kind));
    }
    if c.resources.is_empty() {
        errs.push("resources: Required value: at least one resources is required".to_string());
        return errs;
    }
    // Rules seen so far, for upstream's masking check.
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, conf) in c.resources.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        if conf.resources.is_empty() {
            errs.push(format!("{r}: Required value: at least one {r} is required"));
        }
        errs.extend(resource_overlap(&conf.resources, &r));
        errs.extend(resource_names(&conf.resources, &r));
        if conf.providers.is_empty() {
            errs.push(format!("{p}: Required value: at least one {p} is required"));
        }
        for (j, provider) in conf.providers.iter().enumerate() {
            let path = format!("{p}[{j}]");
            let found = [
                provider.aescbc.is_some(),
                provider.aesgcm.is_some(),
                provider.secretbox.is_some(),
                provider.identity.is_some(),
                provider.kms.is_some(),
            ]
            .iter()
            .filter(|f| **f)
            .count();
            if found == 0 {
                errs.push(format!("{path}: Invalid value: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
                continue;
            }
            if found > 1 {
                errs.push(format!("{path}: Invalid value: more than one provider specified in a single element, should split into different list elements"));
                continue;
            }
            if provider.kms.is_some() {
                errs.push(format!(
                    "{path}.kms: Unsupported value: k1s has no KMS plugin support; use aescbc, aesgcm or secretbox"
                ));
            }
            if let Some((kind, keys)) = provider.keys() {
                errs.extend(validate_keys(&keys.keys, &format!("{path}.{}.keys", kind.name()), kind.key_sizes()));
            }
        }
        for res in &conf.resources {
            let (group, resource) = parse_group_resource(res);
            for masking in [(group.to_string(), "*".to_string()), ("*".to_string(), "*".to_string())] {
                if seen.contains(&masking) {
                    errs.push(format!(
                        "{r}: Invalid value: resource {:?} is masked by earlier rule {:?}",
                        yaml_string(group, resource),
                        yaml_string(&masking.0, &masking.1)
                    ));
                }
            }
        }
        for res in &conf.resources {
            let (group, resource) = parse_group_resource(res);
            seen.push((group.to_string(), resource.to_string()));
        }
    }
    errs
}

/// How upstream writes a group and resource back (`*.` for every core resource).
fn yaml_string(group: &str, resource: &str) -> String {
    match (group, resource) {
        ("", "*") => "*.".to_string(),
        ("", r) => r.to_string(),
        (g, r) => format!("{r}.{g}"),
    }
}

fn resource_overlap(resources: &[String], path: &str) -> Vec<String> {
    if resources.len() < 2 {
        return Vec::new();
    }
    let parsed: Vec<(&str, &str)> = resources.iter().map(|r| parse_group_resource(r)).collect();
    let (mut duplicate, mut overlap) = (false, false);
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b {
                duplicate = true;
                continue;
            }
            if *a == ("*", "*") || (a.0 == b.0 && (a.1 == "*" || b.1 == "*")) {
                overlap = true;
            }
        }
    }
    let mut errs = Vec::new();
    if duplicate {
        errs.push(format!(
            "{path}: Invalid value: {}: the same resource cannot be specified multiple times",
            show(resources)
        ));
    }
    if overlap {
        errs.push(format!(
            "{path}: Invalid value: {}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
            show(resources)
        ));
    }
    errs
}

fn resource_names(resources: &[String], path: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for (j, res) in resources.iter().enumerate() {
        let at = format!("{path}[{j}]");
        let (group, resource) = parse_group_resource(res);
        let why = if res.to_lowercase() != *res {
            "resource name should not contain capital letters"
        } else if res == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if ["apiserveripinfo", "serviceipallocations", "servicenodeportallocations"].contains(&res.as_str()) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if group == "*" && resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errs.push(format!("{at}: Invalid value: {res:?}: {why}"));
    }
    errs
}

fn validate_keys(keys: &[Key], path: &str, sizes: &[usize]) -> Vec<String> {
    if keys.is_empty() {
        return vec![format!("{path}: Required value: at least one keys is required")];
    }
    let mut errs = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if key.name.is_empty() {
            errs.push(format!("{at}.name: Required value: name is a mandatory field for a key"));
        }
        if key.secret.is_empty() {
            errs.push(format!("{at}.secret: Required value: secret is a mandatory field for a key"));
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(&key.secret) {
            Err(_) => errs.push(format!("{at}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded")),
            Ok(secret) if !sizes.contains(&secret.len()) => {
                let expected: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
                errs.push(format!(
                    "{at}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, expected one of [{}]",
                    secret.len(),
                    expected.join(" ")
                ));
            }
            Ok(_) => {}
        }
    }
    errs
}

/// Reads, parses and validates `path`.
pub fn load(path: &Path) -> Result<EncryptionConfiguration, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    parse(path, &text)
}

/// Parses and validates `text`, read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<EncryptionConfiguration, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::Empty { path: path.to_path_buf() });
    }
    let config: EncryptionConfiguration = serde_saphyr::from_str(text)
        .map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
    let errors = validate(&config);
    if !errors.is_empty() {
        return Err(ConfigError::Invalid { path: path.to_path_buf(), errors });
    }
    Ok(config)
}

impl EncryptionConfiguration {
    /// A configuration of `resources` with `providers`.
    pub fn new(resources: &[&str], providers: Vec<ProviderConfiguration>) -> EncryptionConfiguration {
        EncryptionConfiguration {
            kind: KIND.to_string(),
            api_version: API_VERSION.to_string(),
            resources: vec![ResourceConfiguration {
                resources: resources.iter().map(|r| r.to_string()).collect(),
                providers,
            }],
        }
    }

    /// The file's text as k3s writes it (JSON on one line).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> String {
        match parse(Path::new("/etc/k1s/enc.yaml"), text) {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    const KEY32: &str = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=";

    #[test]
    fn reads_upstreams_yaml_and_k3s_json() {
        let yaml = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets, configmaps]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: {KEY32}\n      - identity: {{}}\n"
        );
        let c = parse(Path::new("x"), &yaml).expect("yaml");
        assert_eq!(c.resources[0].resources, ["secrets", "configmaps"]);
        assert_eq!(c.resources[0].providers[0].keys().map(|(k, _)| k), Some(Kind::AesGcm));
        let json = format!(
            r#"{{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{{"resources":["secrets"],"providers":[{{"aescbc":{{"keys":[{{"name":"aescbckey","secret":"{KEY32}"}}]}}}},{{"identity":{{}}}}]}}]}}"#
        );
        let c = parse(Path::new("x"), &json).expect("json");
        assert_eq!(String::from_utf8(c.to_json()).expect("utf-8"), json, "written back as k3s writes it");
    }

    #[test]
    fn refusals_name_the_field_and_say_what_was_expected() {
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let e = errors(&format!("{head}resources:\n  - resources: [secrets]\n    providers:\n      - aescbc:\n          keys:\n            - name: k\n              secret: c2hvcnQ=\n"));
        assert!(e.contains("/etc/k1s/enc.yaml"), "{e}");
        assert!(
            e.contains("resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"),
            "{e}"
        );
        let e = errors(&format!("{head}resources:\n  - resources: [secrets]\n    providers:\n      - secretbox:\n          keys:\n            - name: k\n              secret: \"!!\"\n"));
        assert!(e.contains("resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"), "{e}");
        let e = errors(&format!("{head}resources:\n  - resources: [secrets]\n    providers:\n      - identity: {{}}\n        aescbc: {{keys: []}}\n"));
        assert!(e.contains("resources[0].providers[0]: Invalid value: more than one provider"), "{e}");
        let e = errors(&format!(
            "{head}resources:\n  - resources: [Secrets, '*', events.events.k8s.io, deployments.*]\n    providers: []\n"
        ));
        assert!(e.contains("resources[0].resources[0]: Invalid value: \"Secrets\": resource name should not contain capital letters"), "{e}");
        assert!(e.contains("resources[0].resources[1]: Invalid value: \"*\": use '*.' to encrypt"), "{e}");
        assert!(
            e.contains("resources[0].resources[2]: Invalid value: \"events.events.k8s.io\": '*.events.k8s.io' objects"),
            "{e}"
        );
        assert!(e.contains("resources[0].resources[3]: Invalid value: \"deployments.*\": encrypting the same resource across groups"), "{e}");
        assert!(e.contains("resources[0].providers: Required value"), "{e}");
        let e =
            errors(&format!("{head}resources:\n  - resources: [secrets, '*.']\n    providers: [{{identity: {{}}}}]\n"));
        assert!(e.contains("using overlapping resources"), "{e}");
        let e = errors(&format!("{head}resources:\n  - resources: ['*.*']\n    providers: [{{identity: {{}}}}]\n  - resources: [secrets]\n    providers: [{{identity: {{}}}}]\n"));
        assert!(e.contains("resource \"secrets\" is masked by earlier rule \"*.*\""), "{e}");
        let e = errors(&format!("{head}resources:\n  - resources: [secrets]\n    providers: [{{kms: {{name: k, endpoint: 'unix:///k.sock'}}}}]\n"));
        assert!(e.contains("resources[0].providers[0].kms: Unsupported value: k1s has no KMS"), "{e}");
        let e = errors("apiVersion: v1\nkind: EncryptionConfig\nresources: []\n");
        assert!(e.contains("apiVersion: Unsupported value: \"v1\"") && e.contains("kind: Unsupported value"), "{e}");
        let e = errors(&format!("{head}resources:\n  - resource: [secrets]\n"));
        assert!(
            e.contains("parsing encryption provider configuration file /etc/k1s/enc.yaml") && e.contains("resource"),
            "{e}"
        );
        assert!(errors("  \n").contains("is empty"));
    }
}
