//! Secrets encrypted at rest, managed as k3s manages them.
//!
//! - `--secrets-encryption`: k1s keeps its own `EncryptionConfiguration` in
//!   `<data-dir>/server/cred/encryption-config.json` (0600), made on first start with a fresh
//!   32-byte AES-CBC key named `aescbckey` for `secrets` (then `identity`, so Secrets written
//!   before stay readable), and the rotation stage in `encryption-state.json` next to it.
//! - `--encryption-provider-config FILE`: the user's configuration, used as it is (k1s never
//!   rewrites it).
//! - `k1s secrets-encrypt status|enable|disable|prepare|rotate|reencrypt|rotate-keys` asks the
//!   running server over `<data-dir>/server/encryption.sock` (0600, as the snapshot socket): it
//!   changes the file, puts it in force at once (no restart), and rewrites the covered values
//!   through the store so that each is encrypted with the key now first. One JSON line each
//!   way.
//!
//! Stages, as k3s's: `start` ▶ `prepare` (a new key, not used yet) ▶ `rotate` (the new key
//! first) ▶ `reencrypt_active` ▶ `reencrypt_finished` (every Secret rewritten, the old key
//! removed). `rotate-keys` does the three steps at once.

use base64::Engine as _;
use k1s_apiserver::encryption::{Encryption, EncryptionConfiguration, Key, Kind, ProviderConfiguration};
use k1s_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

pub const STAGE_START: &str = "start";
pub const STAGE_PREPARE: &str = "prepare";
pub const STAGE_ROTATE: &str = "rotate";
pub const STAGE_REENCRYPT_ACTIVE: &str = "reencrypt_active";
pub const STAGE_REENCRYPT_FINISHED: &str = "reencrypt_finished";

/// The name of the first key, as k3s names it; later ones are `aescbckey-<RFC 3339 time>`.
pub const FIRST_KEY: &str = "aescbckey";
/// Bytes of a generated key (AES-256).
const KEY_SIZE: usize = 32;
/// Values rewritten per page read while re-encrypting.
const PAGE: usize = 500;

/// Where the encryption configuration comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--secrets-encryption`: k1s's own, under the data dir.
    Managed,
    /// `--encryption-provider-config FILE`: the user's.
    File(PathBuf),
}

/// `<data-dir>/server/cred/encryption-config.json`.
pub fn config_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("cred").join("encryption-config.json")
}

/// `<data-dir>/server/cred/encryption-state.json`: the stage and the hash of the file it is of.
pub fn state_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("cred").join("encryption-state.json")
}

/// The server's socket for `k1s secrets-encrypt`: `<data-dir>/server/encryption.sock`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("encryption.sock")
}

#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    #[error(transparent)]
    Config(#[from] k1s_apiserver::encryption::ConfigError),
    #[error("writing {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("no random bytes for a new key")]
    Random,
}

/// The stage file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct State {
    stage: String,
    /// sha256 of the configuration file the stage is of.
    hash: String,
}

fn sha256_hex(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random key, base64 as the configuration holds it.
fn new_secret() -> Result<String, EncryptionError> {
    use ring::rand::SecureRandom as _;
    let mut key = [0u8; KEY_SIZE];
    ring::rand::SystemRandom::new().fill(&mut key).map_err(|_| EncryptionError::Random)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(key))
}

/// k3s's configuration: `secrets` with `aescbc` (`keys`) then `identity` when enabled, the other
/// way round when not.
fn managed_config(keys: Vec<Key>, enable: bool) -> EncryptionConfiguration {
    let aescbc = ProviderConfiguration::with_keys(Kind::AesCbc, keys);
    let providers = if enable {
        vec![aescbc, ProviderConfiguration::identity()]
    } else {
        vec![ProviderConfiguration::identity(), aescbc]
    };
    EncryptionConfiguration::new(&["secrets"], providers)
}

/// The AES-CBC keys of k1s's own configuration, refusing what it never writes (as k3s does).
fn managed_keys(config: &EncryptionConfiguration) -> Result<Vec<Key>, String> {
    let entry = config.resources.first().ok_or("the configuration has no resources")?;
    if entry.providers.len() > 2 {
        return Err(format!("more than 2 providers ({}) found in secrets encryption", entry.providers.len()));
    }
    let mut keys = Vec::new();
    for p in &entry.providers {
        match p.keys() {
            Some((Kind::AesCbc, k)) => keys.extend(k.keys.iter().cloned()),
            Some(_) => return Err("non-standard encryption keys found".into()),
            None if p.kms.is_some() => return Err("non-standard encryption keys found".into()),
            None => {}
        }
    }
    if keys.is_empty() {
        return Err("no aescbc keys found in secrets encryption".into());
    }
    Ok(keys)
}

/// Writes `bytes` to `path` with mode 0600, replacing it in one step.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), EncryptionError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |source| EncryptionError::Write { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(err)?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// The encryption in force on a running server.
pub struct Active {
    source: Source,
    /// The configuration file.
    path: PathBuf,
    config: EncryptionConfiguration,
    /// sha256 of the file as last read or written.
    hash: String,
    /// The stage (kept in the stage file for k1s's own configuration).
    stage: String,
    encryption: Arc<Encryption>,
}

impl Active {
    /// The store's transformer.
    pub fn transformer(&self) -> Arc<dyn k1s_store::Transformer> {
        self.encryption.clone()
    }
}

/// Reads (for `--secrets-encryption`, first makes) the configuration. `None`: no encryption.
pub fn setup(data_dir: &Path, source: Option<&Source>) -> Result<Option<Active>, EncryptionError> {
    let Some(source) = source else {
        let own = config_path(data_dir);
        if own.exists() {
            tracing::warn!(
                path = %own.display(),
                "a secrets encryption configuration exists but --secrets-encryption is off: Secrets encrypted with it cannot be read (start with --secrets-encryption, and `k1s secrets-encrypt disable` to store them in plain text again)"
            );
        }
        return Ok(None);
    };
    let path = match source {
        Source::Managed => config_path(data_dir),
        Source::File(p) => p.clone(),
    };
    if *source == Source::Managed && std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
        let config = managed_config(vec![Key { name: FIRST_KEY.into(), secret: new_secret()? }], true);
        let bytes = config.to_json();
        write_private(&path, &bytes)?;
        let state = State { stage: STAGE_START.into(), hash: sha256_hex(&bytes) };
        write_private(&state_path(data_dir), &serde_json::to_vec(&state).unwrap_or_default())?;
        tracing::info!(path = %path.display(), "generated the secrets encryption key");
    }
    let bytes = std::fs::read(&path)
        .map_err(|source| k1s_apiserver::encryption::ConfigError::Read { path: path.clone(), source })?;
    let (config, encryption) = Encryption::load(&path)?;
    let stage = match source {
        Source::Managed => std::fs::read(state_path(data_dir))
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .map_or_else(|| STAGE_START.to_string(), |s| s.stage),
        Source::File(_) => STAGE_START.to_string(),
    };
    tracing::info!(path = %path.display(), stage = %stage, "encryption at rest is on");
    Ok(Some(Active {
        source: source.clone(),
        path,
        config,
        hash: sha256_hex(&bytes),
        stage,
        encryption: Arc::new(encryption),
    }))
}

/// A request of `k1s secrets-encrypt`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Request {
    Status,
    Enable,
    Disable,
    Prepare { force: bool },
    Rotate { force: bool },
    Reencrypt { force: bool, skip: bool },
    RotateKeys,
}

/// What `status` reports (the JSON field names are k3s's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `None`: no configuration at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    pub stage: String,
    /// Algorithm and name of the key that encrypts (`AES-CBC aescbckey`).
    #[serde(rename = "activekey")]
    pub active_key: String,
    #[serde(rename = "inactivekeys", default, skip_serializing_if = "Vec::is_empty")]
    pub inactive_keys: Vec<String>,
    #[serde(rename = "hashmatch")]
    pub hash_match: bool,
    #[serde(rename = "hasherror", default, skip_serializing_if = "String::is_empty")]
    pub hash_error: String,
    /// The configuration file in force.
    #[serde(rename = "configfile", default, skip_serializing_if = "String::is_empty")]
    pub config_file: String,
    /// The resources it encrypts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Reply {
    Status(Status),
    Done(String),
    Error(String),
}

/// The entry of `config` that holds Secrets (the first naming `secrets`, `*.` or `*.*`).
fn secrets_entry(
    config: &EncryptionConfiguration,
) -> Option<&k1s_apiserver::encryption::config::ResourceConfiguration> {
    config.resources.iter().find(|e| e.resources.iter().any(|r| r == "secrets" || r == "*." || r == "*.*"))
}

/// The running server's side: one request at a time.
struct Manager {
    data_dir: PathBuf,
    store: Store,
    active: Option<Active>,
}

impl Manager {
    fn status(&self) -> Status {
        let Some(a) = &self.active else {
            let own = config_path(&self.data_dir);
            if own.exists() {
                return Status {
                    enable: Some(false),
                    stage: STAGE_START.into(),
                    hash_match: false,
                    hash_error: format!("{} exists but the server runs without --secrets-encryption", own.display()),
                    config_file: own.display().to_string(),
                    ..Status::default()
                };
            }
            return Status::default();
        };
        let mut s = Status { stage: a.stage.clone(), config_file: a.path.display().to_string(), ..Status::default() };
        match std::fs::read(&a.path) {
            Ok(b) if sha256_hex(&b) == a.hash => s.hash_match = true,
            Ok(_) => {
                s.hash_error =
                    format!("{} changed since the server read it: restart the server to use it", a.path.display())
            }
            Err(e) => s.hash_error = format!("reading {}: {e}", a.path.display()),
        }
        s.resources = a.config.resources.iter().flat_map(|e| e.resources.iter().cloned()).collect();
        let entry = secrets_entry(&a.config).or(a.config.resources.first());
        let providers = entry.map(|e| e.providers.as_slice()).unwrap_or_default();
        s.enable = Some(providers.first().is_some_and(|p| p.keys().is_some()));
        let mut active = true;
        for p in providers {
            match p.keys() {
                Some((kind, keys)) => {
                    for k in &keys.keys {
                        let label = format!("{} {}", kind.algorithm(), k.name);
                        if active {
                            s.active_key = label;
                            active = false;
                        } else {
                            s.inactive_keys.push(label);
                        }
                    }
                }
                None => active = false,
            }
        }
        s
    }

    /// The active configuration, which k1s manages itself.
    fn managed(&mut self, what: &str) -> Result<&mut Active, String> {
        match &mut self.active {
            None => Err(format!(
                "secrets encryption is off on this server: start it with --secrets-encryption (k1s then generates the key) to {what}"
            )),
            Some(a) if a.source != Source::Managed => Err(format!(
                "the encryption configuration is {}, given with --encryption-provider-config: k1s does not change it; edit it, restart the server, then run `k1s secrets-encrypt reencrypt`",
                a.path.display()
            )),
            Some(a) => Ok(a),
        }
    }

    fn check_stage(a: &Active, allowed: &[&str], force: bool) -> Result<(), String> {
        if force || allowed.contains(&a.stage.as_str()) {
            return Ok(());
        }
        Err(format!(
            "incorrect stage: {} found on this server (expected {}; --force to go on anyway)",
            a.stage,
            allowed.join(" or ")
        ))
    }

    /// Writes `config` and `stage`, then puts the configuration in force.
    fn commit(&mut self, config: EncryptionConfiguration, stage: &str) -> Result<(), String> {
        let a = self.active.as_mut().ok_or("no encryption configuration")?;
        a.encryption.replace(&config).map_err(|e| format!("the new configuration is refused: {e}"))?;
        if a.source == Source::Managed {
            let bytes = config.to_json();
            write_private(&a.path, &bytes).map_err(|e| e.to_string())?;
            a.hash = sha256_hex(&bytes);
            let state = State { stage: stage.to_string(), hash: a.hash.clone() };
            write_private(&state_path(&self.data_dir), &serde_json::to_vec(&state).unwrap_or_default())
                .map_err(|e| e.to_string())?;
        }
        a.config = config;
        a.stage = stage.to_string();
        Ok(())
    }

    fn set_stage(&mut self, stage: &str) -> Result<(), String> {
        let config = self.active.as_ref().ok_or("no encryption configuration")?.config.clone();
        self.commit(config, stage)
    }

    async fn handle(&mut self, req: Request) -> Result<String, String> {
        match req {
            Request::Status => Ok(String::new()),
            Request::Enable | Request::Disable => {
                let enable = matches!(req, Request::Enable);
                let a = self.managed(if enable { "enable it" } else { "disable it" })?;
                let keys = managed_keys(&a.config)?;
                let enabled = a.config.resources[0].providers.first().is_some_and(|p| p.keys().is_some());
                if enabled == enable {
                    return Ok(format!("secrets-encryption already {}", if enable { "enabled" } else { "disabled" }));
                }
                let stage = a.stage.clone();
                self.commit(managed_config(keys, enable), &stage)?;
                let n = self.rewrite().await?;
                Ok(format!(
                    "secrets-encryption {}; {n} secrets rewritten {}",
                    if enable { "enabled" } else { "disabled" },
                    if enable { "encrypted" } else { "in plain text" }
                ))
            }
            Request::Prepare { force } => {
                let a = self.managed("prepare a key")?;
                Self::check_stage(a, &[STAGE_START, STAGE_REENCRYPT_FINISHED], force)?;
                let mut keys = managed_keys(&a.config)?;
                let name = new_key_name(&keys);
                keys.push(Key { name: name.clone(), secret: new_secret().map_err(|e| e.to_string())? });
                self.commit(managed_config(keys, true), STAGE_PREPARE)?;
                Ok(format!("prepare completed successfully: added key {name}"))
            }
            Request::Rotate { force } => {
                let a = self.managed("rotate keys")?;
                Self::check_stage(a, &[STAGE_PREPARE], force)?;
                let mut keys = managed_keys(&a.config)?;
                keys.rotate_right(1);
                let first = keys[0].name.clone();
                self.commit(managed_config(keys, true), STAGE_ROTATE)?;
                Ok(format!("rotate completed successfully: {first} encrypts from now on"))
            }
            Request::Reencrypt { force, skip } => {
                let Some(a) = &self.active else { return Err(self.managed("reencrypt").err().unwrap_or_default()) };
                let previous = a.stage.clone();
                if a.source == Source::Managed {
                    Self::check_stage(a, &[STAGE_ROTATE, STAGE_START, STAGE_REENCRYPT_FINISHED], force)?;
                }
                self.reencrypt(&previous, skip).await
            }
            Request::RotateKeys => {
                let a = self.managed("rotate keys")?;
                Self::check_stage(a, &[STAGE_START, STAGE_REENCRYPT_FINISHED], false)?;
                let mut keys = managed_keys(&a.config)?;
                let name = new_key_name(&keys);
                keys.push(Key { name: name.clone(), secret: new_secret().map_err(|e| e.to_string())? });
                keys.rotate_right(1);
                self.commit(managed_config(keys, true), STAGE_ROTATE)?;
                let done = self.reencrypt(STAGE_ROTATE, false).await?;
                Ok(format!("keys rotated to {name}; {done}"))
            }
        }
    }

    /// Rewrites every covered value; after a rotation (and without `skip`), removes the key
    /// rotated out, as k3s does.
    async fn reencrypt(&mut self, previous: &str, skip: bool) -> Result<String, String> {
        self.set_stage(STAGE_REENCRYPT_ACTIVE)?;
        let n = match self.rewrite().await {
            Ok(n) => n,
            Err(e) => {
                let _ = self.set_stage(previous);
                return Err(e);
            }
        };
        if skip {
            self.set_stage(previous)?;
            return Ok(format!("reencryption finished: {n} values rewritten; no key removed (--skip)"));
        }
        let a = self.active.as_ref().ok_or("no encryption configuration")?;
        if previous == STAGE_ROTATE && a.source == Source::Managed {
            let mut keys = managed_keys(&a.config)?;
            if keys.len() > 1 {
                let removed = keys.pop().map(|k| k.name).unwrap_or_default();
                self.commit(managed_config(keys, true), STAGE_REENCRYPT_FINISHED)?;
                return Ok(format!("reencryption finished: {n} values rewritten; removed key {removed}"));
            }
        }
        self.set_stage(STAGE_REENCRYPT_FINISHED)?;
        Ok(format!("reencryption finished: {n} values rewritten"))
    }

    /// Writes every value the configuration covers again, so that each is encrypted by the
    /// provider and key now first.
    async fn rewrite(&self) -> Result<usize, String> {
        let a = self.active.as_ref().ok_or("no encryption configuration")?;
        let mut n = 0;
        for prefix in a.encryption.covered_prefixes() {
            let mut after: Option<String> = None;
            loop {
                let page = self.store.list(&prefix, after.as_deref(), PAGE, None).map_err(|e| e.to_string())?;
                for kv in &page.items {
                    n += usize::from(self.rewrite_one(kv.clone()).await?);
                }
                if !page.more {
                    break;
                }
                after = page.items.last().map(|kv| kv.key.clone());
            }
        }
        tracing::info!(rewritten = n, "re-encrypted the values the encryption configuration covers");
        Ok(n)
    }

    /// Writes `kv` again; false when it is gone. On a conflict it reads the key again and
    /// retries: a write that was encrypted with the old configuration just before it changed
    /// may land after the list, and must not keep the key that `reencrypt` then removes.
    async fn rewrite_one(&self, mut kv: k1s_store::KeyValue) -> Result<bool, String> {
        for _ in 0..REWRITE_TRIES {
            match self.store.update(&kv.key, kv.value.clone(), Some(kv.mod_revision)).await {
                Ok(_) => return Ok(true),
                Err(StoreError::NotFound(_)) => return Ok(false),
                Err(StoreError::Conflict { .. }) => match self.store.get(&kv.key).map_err(|e| e.to_string())? {
                    Some(now) => kv = now,
                    None => return Ok(false),
                },
                Err(e) => return Err(format!("rewriting {}: {e}", kv.key)),
            }
        }
        // Written over and over meanwhile: by writes made with the new configuration.
        Ok(true)
    }
}

/// Tries to rewrite a value that keeps changing under the rewrite.
const REWRITE_TRIES: usize = 8;

/// `aescbckey-<RFC 3339 time>`, as k3s names new keys (a suffix when that name is taken).
fn new_key_name(keys: &[Key]) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let base = format!("{FIRST_KEY}-{}", crate::cron::format_utc(now));
    let mut name = base.clone();
    let mut i = 1;
    while keys.iter().any(|k| k.name == name) {
        i += 1;
        name = format!("{base}-{i}");
    }
    name
}

/// Serves `k1s secrets-encrypt` on the data dir's socket until `cancel`.
pub(crate) fn start(
    store: &Store,
    data_dir: &Path,
    active: Option<Active>,
    cancel: &CancellationToken,
) -> Result<crate::Running, crate::ServerError> {
    let sock = socket_path(data_dir);
    let data_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| crate::ServerError::DataDir { path, source }
    };
    if sock.exists() {
        std::fs::remove_file(&sock).map_err(data_err(&sock))?;
    }
    let listener = tokio::net::UnixListener::bind(&sock).map_err(data_err(&sock))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).map_err(data_err(&sock))?;
    }
    let manager = Manager { data_dir: data_dir.to_path_buf(), store: store.clone(), active };
    Ok(crate::Running::spawn("the secrets-encrypt socket", serve(listener, manager, cancel.clone())))
}

async fn serve(listener: tokio::net::UnixListener, manager: Manager, cancel: CancellationToken) {
    let manager = Arc::new(tokio::sync::Mutex::new(manager));
    loop {
        let conn = tokio::select! {
            _ = cancel.cancelled() => return,
            c = listener.accept() => c,
        };
        let (stream, _) = match conn {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "secrets-encrypt socket: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let manager = manager.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            if BufReader::new(read).read_line(&mut line).await.is_err() {
                return;
            }
            let reply = match serde_json::from_str::<Request>(&line) {
                Err(e) => Reply::Error(format!("bad request: {e}")),
                Ok(Request::Status) => Reply::Status(manager.lock().await.status()),
                Ok(req) => {
                    let what = format!("{req:?}");
                    match manager.lock().await.handle(req).await {
                        Ok(done) => {
                            tracing::info!(request = %what, "{done}");
                            Reply::Done(done)
                        }
                        Err(e) => {
                            tracing::warn!(request = %what, error = %e, "secrets-encrypt request failed");
                            Reply::Error(e)
                        }
                    }
                }
            };
            let mut out = serde_json::to_vec(&reply).unwrap_or_default();
            out.push(b'\n');
            let _ = write.write_all(&out).await;
        });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to the server's secrets-encrypt socket {} (is k1s server running on this data dir?): {error}", path.display())]
    Connect { path: PathBuf, error: std::io::Error },
    #[error("talking to the server over {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("unreadable answer from the server: {0}")]
    Protocol(String),
    #[error("{0}")]
    Server(String),
}

/// What the server answered a request.
#[derive(Debug)]
pub enum Answer {
    Status(Status),
    Done(String),
}

/// Sends `req` to the server running on `data_dir` (`k1s secrets-encrypt`).
pub async fn request(data_dir: &Path, req: &Request) -> Result<Answer, ClientError> {
    let path = socket_path(data_dir);
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .map_err(|error| ClientError::Connect { path: path.clone(), error })?;
    let io = |error| ClientError::Io { path: path.clone(), error };
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
    line.push(b'\n');
    write.write_all(&line).await.map_err(io)?;
    let mut answer = String::new();
    BufReader::new(read).read_line(&mut answer).await.map_err(io)?;
    match serde_json::from_str::<Reply>(&answer).map_err(|e| ClientError::Protocol(format!("{e}: {answer:?}")))? {
        Reply::Status(s) => Ok(Answer::Status(s)),
        Reply::Done(d) => Ok(Answer::Done(d)),
        Reply::Error(e) => Err(ClientError::Server(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_first_start_writes_k3s_configuration_with_one_private_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let active = setup(dir.path(), Some(&Source::Managed)).expect("setup").expect("on");
        let path = config_path(dir.path());
        assert_eq!(std::fs::metadata(&path).expect("written").permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(state_path(dir.path())).expect("state").permissions().mode() & 0o777, 0o600);
        let keys = managed_keys(&active.config).expect("k1s's own");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name, FIRST_KEY);
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(&keys[0].secret).expect("base64").len(), 32);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with(r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["secrets"],"providers":[{"aescbc":{"keys":[{"name":"aescbckey","secret":""#), "{text}");
        assert!(text.ends_with(r#""}]}},{"identity":{}}]}]}"#), "{text}");
        let again = setup(dir.path(), Some(&Source::Managed)).expect("setup").expect("on");
        assert_eq!(managed_keys(&again.config).expect("same"), keys, "the key is kept across restarts");
        assert_eq!(again.stage, STAGE_START);
    }

    #[test]
    fn without_the_flag_nothing_is_encrypted_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(setup(dir.path(), None).expect("setup").is_none());
        assert!(!config_path(dir.path()).exists());
    }

    /// A write encrypted with the old key that lands after the rewrite's list must be written
    /// again, not skipped: `reencrypt` removes that key next.
    #[tokio::test]
    async fn a_value_written_after_the_list_is_rewritten_again_with_its_new_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let active = setup(dir.path(), Some(&Source::Managed)).expect("setup").expect("on");
        let opts = k1s_store::StoreOptions { transformer: Some(active.transformer()), ..Default::default() };
        let store = Store::open(&dir.path().join("db"), opts).expect("store");
        let key = "/registry/secrets/default/a";
        let listed = store.create(key, bytes::Bytes::from_static(br#"{"v":1}"#)).await.expect("create");
        let meanwhile = store.update(key, bytes::Bytes::from_static(br#"{"v":2}"#), None).await.expect("update");
        let m = Manager { data_dir: dir.path().to_path_buf(), store: store.clone(), active: Some(active) };
        assert!(m.rewrite_one(listed).await.expect("rewrite"));
        let now = store.get(key).expect("read").expect("there");
        assert_eq!(now.value.as_ref(), br#"{"v":2}"#, "the newer content, not the listed one");
        assert!(now.mod_revision > meanwhile.mod_revision, "written again");
        store.delete(key, None).await.expect("delete");
        assert!(!m.rewrite_one(now).await.expect("gone"), "a deleted value is not written back");
    }

    #[tokio::test]
    async fn prepare_rotate_reencrypt_moves_every_secret_to_the_new_key_and_drops_the_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let active = setup(dir.path(), Some(&Source::Managed)).expect("setup").expect("on");
        let opts = k1s_store::StoreOptions { transformer: Some(active.transformer()), ..Default::default() };
        let store = Store::open(&dir.path().join("db"), opts).expect("store");
        store.create("/registry/secrets/default/a", bytes::Bytes::from_static(br#"{"a":1}"#)).await.expect("create");
        let mut m = Manager { data_dir: dir.path().to_path_buf(), store: store.clone(), active: Some(active) };
        assert!(m
            .handle(Request::Rotate { force: false })
            .await
            .expect_err("not prepared")
            .contains("incorrect stage: start"));
        m.handle(Request::Prepare { force: false }).await.expect("prepare");
        let s = m.status();
        assert_eq!((s.stage.as_str(), s.active_key.as_str()), (STAGE_PREPARE, "AES-CBC aescbckey"));
        assert!(s.inactive_keys[0].starts_with("AES-CBC aescbckey-"), "{s:?}");
        m.handle(Request::Rotate { force: false }).await.expect("rotate");
        assert!(m.status().active_key.starts_with("AES-CBC aescbckey-"));
        let done = m.handle(Request::Reencrypt { force: false, skip: false }).await.expect("reencrypt");
        assert!(done.contains("1 values rewritten") && done.contains("removed key aescbckey"), "{done}");
        let s = m.status();
        assert_eq!(s.stage, STAGE_REENCRYPT_FINISHED);
        assert!(s.inactive_keys.is_empty() && s.hash_match, "{s:?}");
        assert_eq!(
            store.get("/registry/secrets/default/a").expect("read").expect("there").value.as_ref(),
            br#"{"a":1}"#
        );
        // What is on disk names the new key: read the store without the transformer.
        drop((m, store));
        let raw = Store::open(&dir.path().join("db"), k1s_store::StoreOptions::default()).expect("raw");
        let stored = raw.get("/registry/secrets/default/a").expect("read").expect("there").value;
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:aescbckey-"), "{:?}", String::from_utf8_lossy(&stored));
    }
}
