//! Encryption at rest: an `EncryptionConfiguration` (upstream's file, k3s's
//! `--secrets-encryption` one) turned into the store's [`k1s_store::Transformer`].
//!
//! Each resource of the configuration becomes storage key prefixes (`secrets` ▶
//! `/registry/secrets/`, `widgets.example.com` ▶ `/registry/example.com/widgets/`, `*.apps` ▶
//! `/registry/apps/`, `*.` ▶ every core resource's, `*.*` ▶ everything under `/registry/`); a
//! key takes the providers of its resource, else of its group's wildcard, else of `*.*`, as
//! upstream resolves them. Keys of no configured resource are stored as they are.
//!
//! [`Encryption`] can take a new configuration while the server runs (`k1s secrets-encrypt`):
//! reads and writes that start afterwards use it.

pub mod config;
pub mod providers;

pub use config::{ConfigError, EncryptionConfiguration, Key, KeysConfiguration, ProviderConfiguration};
pub use providers::Kind;

use base64::Engine as _;
use providers::{Chain, NamedKey, Provider, ENCRYPTED};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The prefix of every resource's storage keys.
const ROOT: &str = "/registry/";

/// The configuration in force, resolved to key prefixes.
struct Resolved {
    /// Named resources' prefixes (most specific first in lookups).
    exact: Vec<(String, Arc<Chain>)>,
    /// Group wildcards' prefixes (`*.apps`, and every core resource's for `*.`).
    group: Vec<(String, Arc<Chain>)>,
    /// `*.*`.
    any: Option<Arc<Chain>>,
}

impl Resolved {
    fn chain(&self, key: &str) -> Option<&Chain> {
        fn find<'a>(rules: &'a [(String, Arc<Chain>)], key: &str) -> Option<&'a Chain> {
            rules.iter().find(|(p, _)| key.starts_with(p.as_str())).map(|(_, c)| c.as_ref())
        }
        find(&self.exact, key)
            .or_else(|| find(&self.group, key))
            .or_else(|| self.any.as_deref().filter(|_| key.starts_with(ROOT)))
    }

    fn build(config: &EncryptionConfiguration) -> Result<Resolved, String> {
        let mut r = Resolved { exact: Vec::new(), group: Vec::new(), any: None };
        for (i, entry) in config.resources.iter().enumerate() {
            let chain = Arc::new(chain(entry, i)?);
            for res in &entry.resources {
                match config::parse_group_resource(res) {
                    ("*", "*") => r.any = Some(chain.clone()),
                    ("", "*") => {
                        for prefix in core_prefixes() {
                            r.group.push((prefix, chain.clone()));
                        }
                    }
                    (group, "*") => r.group.push((format!("{ROOT}{group}/"), chain.clone())),
                    (group, resource) => {
                        for prefix in resource_prefixes(group, resource) {
                            r.exact.push((prefix, chain.clone()));
                        }
                    }
                }
            }
        }
        Ok(r)
    }
}

/// Where `resource.group` is stored. Upstream keeps `events.k8s.io` Events with the core ones
/// and names them `events`: here they have their own prefix, which `events` covers too.
fn resource_prefixes(group: &str, resource: &str) -> Vec<String> {
    match (group, resource) {
        ("", "events") => vec![format!("{ROOT}events/"), format!("{ROOT}events.k8s.io/events/")],
        ("", r) => vec![format!("{ROOT}{r}/")],
        (g, r) => vec![format!("{ROOT}{g}/{r}/")],
    }
}

/// Every stored core resource's prefix (what `*.` covers).
fn core_prefixes() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for info in k1s_api::resources::all() {
        if info.group.is_empty() && info.backing == k1s_api::resources::Backing::Stored {
            for p in resource_prefixes("", info.resource) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The providers of configuration entry `i`.
fn chain(entry: &config::ResourceConfiguration, i: usize) -> Result<Chain, String> {
    let mut providers = Vec::new();
    for (j, p) in entry.providers.iter().enumerate() {
        if p.identity.is_some() {
            providers.push(Provider::Identity);
            continue;
        }
        let Some((kind, keys)) = p.keys() else {
            return Err(format!("resources[{i}].providers[{j}]: no provider k1s supports"));
        };
        let mut named = Vec::new();
        for (k, key) in keys.keys.iter().enumerate() {
            let secret = base64::engine::general_purpose::STANDARD.decode(&key.secret).map_err(|_| {
                format!(
                    "resources[{i}].providers[{j}].{}.keys[{k}].secret: secrets must be base64 encoded",
                    kind.name()
                )
            })?;
            named.push(
                NamedKey::new(kind, &key.name, &secret)
                    .map_err(|e| format!("resources[{i}].providers[{j}].{}.keys[{k}]: {e}", kind.name()))?,
            );
        }
        providers.push(Provider::Keys { kind, keys: named });
    }
    Ok(Chain { providers })
}

/// The encryption configuration in force, as the store's transformer.
pub struct Encryption {
    resolved: RwLock<Arc<Resolved>>,
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Encryption")
    }
}

impl Encryption {
    /// The transformer of a validated `config` (see [`config::validate`]; what it would refuse
    /// is an error here too).
    pub fn new(config: &EncryptionConfiguration) -> Result<Encryption, String> {
        let errors = config::validate(config);
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        Ok(Encryption { resolved: RwLock::new(Arc::new(Resolved::build(config)?)) })
    }

    /// Reads, checks and resolves the configuration file `path`.
    pub fn load(path: &Path) -> Result<(EncryptionConfiguration, Encryption), ConfigError> {
        let config = config::load(path)?;
        let enc =
            Encryption::new(&config).map_err(|e| ConfigError::Invalid { path: path.to_path_buf(), errors: vec![e] })?;
        Ok((config, enc))
    }

    /// Puts `config` in force for the reads and writes that start from now on.
    pub fn replace(&self, config: &EncryptionConfiguration) -> Result<(), String> {
        let errors = config::validate(config);
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        let resolved = Arc::new(Resolved::build(config)?);
        *self.resolved.write().unwrap_or_else(|p| p.into_inner()) = resolved;
        Ok(())
    }

    fn current(&self) -> Arc<Resolved> {
        self.resolved.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The key prefixes whose values the configuration covers, none inside another: what
    /// re-encrypting rewrites.
    pub fn covered_prefixes(&self) -> Vec<String> {
        let r = self.current();
        if r.any.is_some() {
            return vec![ROOT.to_string()];
        }
        let mut all: Vec<String> = r.exact.iter().chain(&r.group).map(|(p, _)| p.clone()).collect();
        all.sort();
        all.dedup();
        let mut out: Vec<String> = Vec::new();
        for p in all {
            if !out.iter().any(|o| p.starts_with(o.as_str())) {
                out.push(p);
            }
        }
        out
    }
}

impl k1s_store::Transformer for Encryption {
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, k1s_store::TransformError> {
        let r = self.current();
        match r.chain(key) {
            None => Ok(None),
            Some(c) => c.encode(key, value).map_err(k1s_store::TransformError),
        }
    }

    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<Option<Vec<u8>>, k1s_store::TransformError> {
        let r = self.current();
        match r.chain(key) {
            Some(c) => c.decode(key, stored).map_err(k1s_store::TransformError),
            None if stored.starts_with(ENCRYPTED) => Err(k1s_store::TransformError(format!(
                "it is encrypted ({}…) but the encryption configuration covers no such resource",
                String::from_utf8_lossy(&stored[..stored.len().min(ENCRYPTED.len() + 12)])
            ))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::Transformer as _;

    const KEY32: &str = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=";

    fn aescbc(name: &str) -> ProviderConfiguration {
        ProviderConfiguration::with_keys(Kind::AesCbc, vec![Key { name: name.into(), secret: KEY32.into() }])
    }

    fn config(entries: &[(&[&str], Vec<ProviderConfiguration>)]) -> EncryptionConfiguration {
        let mut c = EncryptionConfiguration::new(&[], Vec::new());
        c.resources = entries
            .iter()
            .map(|(r, p)| config::ResourceConfiguration {
                resources: r.iter().map(|s| s.to_string()).collect(),
                providers: p.clone(),
            })
            .collect();
        c
    }

    fn encrypted(e: &Encryption, key: &str) -> bool {
        e.transform_to_storage(key, b"{}").expect("to storage").is_some()
    }

    #[test]
    fn only_the_listed_resources_are_encrypted() {
        let e = Encryption::new(&config(&[(&["secrets"], vec![aescbc("k"), ProviderConfiguration::identity()])]))
            .expect("config");
        assert!(encrypted(&e, "/registry/secrets/default/s"));
        assert!(!encrypted(&e, "/registry/configmaps/default/c"));
        assert!(!encrypted(&e, "/registry/secretsx/default/c"));
        assert_eq!(e.covered_prefixes(), ["/registry/secrets/"]);
    }

    #[test]
    fn a_resource_takes_its_own_rule_then_its_groups_then_every_resources() {
        let cfg = config(&[
            (&["deployments.apps", "widgets.example.com"], vec![ProviderConfiguration::identity()]),
            (&["*.apps", "*."], vec![aescbc("group")]),
            (&["*.*"], vec![aescbc("any")]),
        ]);
        let e = Encryption::new(&cfg).expect("config");
        let key_of = |key: &str| {
            let stored = e.transform_to_storage(key, b"{}").expect("to storage");
            stored.map(|s| {
                String::from_utf8_lossy(&s[..s.iter().skip(18).position(|b| *b == b':').map_or(0, |p| p + 18)])
                    .into_owned()
            })
        };
        assert_eq!(key_of("/registry/apps/deployments/ns/d"), None, "its own rule: identity");
        assert_eq!(key_of("/registry/example.com/widgets/ns/w"), None);
        assert_eq!(key_of("/registry/apps/replicasets/ns/r").as_deref(), Some("k8s:enc:aescbc:v1:group"));
        assert_eq!(key_of("/registry/secrets/ns/s").as_deref(), Some("k8s:enc:aescbc:v1:group"), "*. covers core");
        assert_eq!(
            key_of("/registry/events.k8s.io/events/ns/e").as_deref(),
            Some("k8s:enc:aescbc:v1:group"),
            "events.k8s.io Events are core events"
        );
        assert_eq!(key_of("/registry/batch/jobs/ns/j").as_deref(), Some("k8s:enc:aescbc:v1:any"));
        assert_eq!(key_of("/k1s/bootstrap/server"), None, "outside /registry/");
        assert_eq!(e.covered_prefixes(), ["/registry/"]);
    }

    #[test]
    fn a_new_configuration_takes_over_and_values_of_uncovered_resources_stay_readable_if_plain() {
        let e = Encryption::new(&config(&[(&["secrets"], vec![aescbc("k")])])).expect("config");
        let stored = e.transform_to_storage("/registry/secrets/ns/s", b"{}").expect("seal").expect("sealed");
        e.replace(&config(&[(&["configmaps"], vec![aescbc("k")])])).expect("replace");
        assert!(!encrypted(&e, "/registry/secrets/ns/s"));
        let err = e.transform_from_storage("/registry/secrets/ns/s", &stored).expect_err("no longer covered");
        assert!(err.0.contains("covers no such resource"), "{err}");
        assert_eq!(e.transform_from_storage("/registry/secrets/ns/s", b"{}").expect("plain"), None);
    }
}
