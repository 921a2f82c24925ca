//! Several servers, one cluster: the join token and the bootstrap data every server of a cluster
//! shares (the cluster CA, the request-header CA and the ServiceAccount signing key).
//!
//! The token is k3s's: `K10<sha256 of the CA certificate, hex>::server:<secret>`. The first server
//! makes one (or takes `--token`) and keeps it in `<data-dir>/server/token`; `k1s token create`
//! prints it. A server joins in one of two ways, as with k3s on an external datastore:
//! - `--server https://FIRST:6443 --token TOKEN`: it fetches `/cacerts` from the first server,
//!   checks it against the token's hash, then fetches `/v1-k1s/server-bootstrap` over TLS verified
//!   with that CA, authenticated as `server:<secret>`. The answer also names the first server's
//!   datastore, so the joining server needs no `--datastore-endpoint` of its own.
//! - `--datastore-endpoint` (the same etcd) and `--token TOKEN`: the first server keeps the
//!   bootstrap data in the datastore at [`BOOTSTRAP_KEY`], sealed with AES-256-GCM under a key
//!   derived from the secret (PBKDF2-HMAC-SHA256); a server with the same secret opens it, a
//!   server with another gets an error instead of a second CA.
//!
//! An embedded (RocksDB) store cannot be shared: a server on it answers the bootstrap request,
//! and the joining server refuses to go on.

use base64::Engine as _;
use k1s_store::{Store, StoreError};
use ring::aead;
use ring::rand::SecureRandom as _;
use rustls_pki_types::pem::PemObject as _;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

/// Where the sealed bootstrap data lives in the datastore (outside `/registry/`, so that nothing
/// reading API objects ever sees it).
pub const BOOTSTRAP_KEY: &str = "/k1s/bootstrap/server";

/// The files under `<data-dir>/server/tls` that every server of a cluster shares. Everything
/// else there (serving and client certificates) each server issues itself under the shared CAs.
pub const SHARED_FILES: [&str; 5] =
    ["server-ca.crt", "server-ca.key", "request-header-ca.crt", "request-header-ca.key", "service-account.key"];

/// The user a joining server authenticates as (k3s's).
const JOIN_USER: &str = "server";
const PBKDF2_ROUNDS: u32 = 100_000;
const SALT_LEN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("invalid token: {0}")]
    InvalidToken(&'static str),
    #[error("the datastore already holds a cluster: pass its token with --token (`k1s token create` on one of its servers prints it)")]
    TokenNeeded,
    #[error("--server needs --token (`k1s token create` on that server prints it)")]
    TokenNeededToJoin,
    #[error("the token does not open the cluster's bootstrap data in the datastore: it is another cluster's token")]
    WrongToken,
    #[error(
        "the token's CA hash {token} does not match the cluster CA's {actual}: the token belongs to another cluster"
    )]
    CaMismatch { token: String, actual: String },
    #[error("--token differs from the token this server was set up with ({path}); remove the file to change it")]
    TokenChanged { path: PathBuf },
    #[error("the cluster's bootstrap data is damaged: {0}")]
    Damaged(String),
    #[error("joining {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("the server at {0} keeps its state in its embedded store, which other servers cannot share: run every server with --datastore-endpoint")]
    EmbeddedStore(String),
    #[error("the datastore holds no cluster, but the server at {url} has one: point --datastore-endpoint at its datastore ({endpoints}), or leave it out")]
    OtherDatastore { url: String, endpoints: String },
    #[error("writing {path}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("reading {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the bootstrap data in the datastore")]
    Store(#[from] StoreError),
    #[error("writing a certificate file")]
    Pki(#[from] k1s_pki::PkiError),
}

/// A join token: the secret, and the hash of the CA it belongs to (absent in a bare secret).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub ca_hash: Option<String>,
    pub secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("ca_hash", &self.ca_hash).field("secret", &"<redacted>").finish()
    }
}

impl std::str::FromStr for Token {
    type Err = JoinError;

    /// `K10<64 hex>::server:<secret>`, or a bare secret (then the CA is trusted on first use).
    fn from_str(s: &str) -> Result<Token, JoinError> {
        let s = s.trim();
        let Some(rest) = s.strip_prefix("K10") else {
            if s.is_empty() {
                return Err(JoinError::InvalidToken("empty"));
            }
            if s.contains("::") {
                return Err(JoinError::InvalidToken("a full token starts with K10"));
            }
            return Ok(Token { ca_hash: None, secret: s.to_string() });
        };
        let (hash, cred) =
            rest.split_once("::").ok_or(JoinError::InvalidToken("expected K10<hash>::server:<secret>"))?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(JoinError::InvalidToken("the CA hash is not 64 hex digits"));
        }
        let secret = match cred.split_once(':') {
            Some((JOIN_USER, secret)) => secret,
            Some(_) => return Err(JoinError::InvalidToken("only server tokens (::server:<secret>) can join a server")),
            None => cred,
        };
        if secret.is_empty() {
            return Err(JoinError::InvalidToken("the secret is empty"));
        }
        Ok(Token { ca_hash: Some(hash.to_ascii_lowercase()), secret: secret.to_string() })
    }
}

impl Token {
    /// A new random secret (32 hex digits).
    pub fn generate() -> Token {
        let mut b = [0u8; 16];
        // The system's CSPRNG; it does not fail on Linux once booted.
        if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
            b = *uuid::Uuid::new_v4().as_bytes();
        }
        Token { ca_hash: None, secret: hex(&b) }
    }

    /// The full token for the cluster whose CA certificate is `ca_pem`.
    pub fn full(&self, ca_pem: &str) -> String {
        format!("K10{}::{JOIN_USER}:{}", ca_hash(ca_pem), self.secret)
    }

    /// Checks the token's CA hash (when it has one) against `ca_pem`.
    pub fn check_ca(&self, ca_pem: &str) -> Result<(), JoinError> {
        match &self.ca_hash {
            Some(h) if *h != ca_hash(ca_pem) => {
                Err(JoinError::CaMismatch { token: h.clone(), actual: ca_hash(ca_pem) })
            }
            _ => Ok(()),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// sha256 of the CA certificate as served at `/cacerts`, hex (k3s's token hash).
pub fn ca_hash(ca_pem: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, ca_pem.as_bytes()).as_ref())
}

/// Where a server keeps its token.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("token")
}

/// The token this server goes by: `given` (`--token`), else the one kept in its data dir, else
/// none yet. `given` must agree with the kept one.
pub fn local_token(data_dir: &Path, given: Option<&Token>) -> Result<Option<Token>, JoinError> {
    let path = token_path(data_dir);
    let kept = match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Some(s.parse::<Token>()?),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(JoinError::Read { path, source }),
    };
    match (given, kept) {
        (Some(g), Some(k)) if g.secret != k.secret => Err(JoinError::TokenChanged { path }),
        (Some(g), Some(k)) => Ok(Some(Token { ca_hash: g.ca_hash.clone().or(k.ca_hash), secret: g.secret.clone() })),
        (Some(g), None) => Ok(Some(g.clone())),
        (None, k) => Ok(k),
    }
}

/// Keeps the full token in `<data-dir>/server/token` (mode 0600).
pub fn save_token(data_dir: &Path, token: &Token, ca_pem: &str) -> Result<(), JoinError> {
    k1s_pki::write_file(&token_path(data_dir), &format!("{}\n", token.full(ca_pem)), 0o600)?;
    Ok(())
}

/// The datastore a server uses, as the bootstrap answer passes it on to a joining server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatastoreInfo {
    pub endpoints: Vec<String>,
    #[serde(default)]
    pub prefix: String,
    /// The contents of `--datastore-cafile`, `-certfile` and `-keyfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl DatastoreInfo {
    /// What a server on `config` tells joining servers (reads the TLS files).
    pub fn of(config: &k1s_store::EtcdConfig) -> Result<DatastoreInfo, JoinError> {
        let read = |p: &Option<PathBuf>| -> Result<Option<String>, JoinError> {
            p.as_ref()
                .map(|p| std::fs::read_to_string(p).map_err(|source| JoinError::Read { path: p.clone(), source }))
                .transpose()
        };
        Ok(DatastoreInfo {
            endpoints: config.endpoints.clone(),
            prefix: config.root.clone(),
            ca: read(&config.ca_file)?,
            cert: read(&config.cert_file)?,
            key: read(&config.key_file)?,
        })
    }

    /// The etcd configuration for a joining server, its TLS files written under `dir`.
    pub fn install(&self, dir: &Path) -> Result<k1s_store::EtcdConfig, JoinError> {
        let write = |name: &str, contents: &Option<String>, mode| -> Result<Option<PathBuf>, JoinError> {
            let Some(c) = contents else { return Ok(None) };
            let path = dir.join(name);
            k1s_pki::write_file(&path, c, mode)?;
            Ok(Some(path))
        };
        Ok(k1s_store::EtcdConfig {
            endpoints: self.endpoints.clone(),
            ca_file: write("datastore-ca.crt", &self.ca, 0o644)?,
            cert_file: write("datastore-client.crt", &self.cert, 0o644)?,
            key_file: write("datastore-client.key", &self.key, 0o600)?,
            root: self.prefix.clone(),
        })
    }
}

fn datastore_path(server_dir: &Path) -> PathBuf {
    server_dir.join("joined-datastore.json")
}

/// Keeps the datastore a server joined through another one (with its TLS key: mode 0600), so
/// that it restarts while that server is down.
pub fn save_datastore(server_dir: &Path, info: &DatastoreInfo) -> Result<(), JoinError> {
    let json = serde_json::to_string(info).map_err(|e| JoinError::Damaged(e.to_string()))?;
    k1s_pki::write_file(&datastore_path(server_dir), &json, 0o600)?;
    Ok(())
}

/// The datastore kept by [`save_datastore`], if this server joined before.
pub fn saved_datastore(server_dir: &Path) -> Result<Option<DatastoreInfo>, JoinError> {
    let path = datastore_path(server_dir);
    match std::fs::read_to_string(&path) {
        Ok(s) => serde_json::from_str(&s).map(Some).map_err(|e| JoinError::Damaged(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(JoinError::Read { path, source }),
    }
}

/// What `/v1-k1s/server-bootstrap` answers: the shared files and the datastore (`None`: the
/// embedded store).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub datastore: Option<DatastoreInfo>,
}

/// The shared files as they are under `tls_dir` (after the PKI was set up).
pub fn read_shared(tls_dir: &Path) -> Result<BTreeMap<String, String>, JoinError> {
    SHARED_FILES
        .iter()
        .map(|name| {
            let path = tls_dir.join(name);
            std::fs::read_to_string(&path)
                .map(|c| (name.to_string(), c))
                .map_err(|source| JoinError::Read { path, source })
        })
        .collect()
}

/// Writes the shared files under `tls_dir`. When a CA changed, every certificate issued under
/// the old one (serving and client certificates) is removed, to be issued again under the new.
/// Returns whether anything changed.
pub fn install_shared(tls_dir: &Path, files: &BTreeMap<String, String>) -> Result<bool, JoinError> {
    for name in SHARED_FILES {
        if !files.contains_key(name) {
            return Err(JoinError::Damaged(format!("{name} is missing")));
        }
    }
    let mut changed = false;
    let mut ca_changed = false;
    for (name, contents) in files.iter().filter(|(n, _)| SHARED_FILES.contains(&n.as_str())) {
        let path = tls_dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(contents.as_str()) {
            continue;
        }
        let mode = if name.ends_with(".key") { 0o600 } else { 0o644 };
        k1s_pki::write_file(&path, contents, mode)?;
        tracing::info!(path = %path.display(), "installed the cluster's shared key material");
        changed = true;
        ca_changed |= name.ends_with("-ca.crt") || name.ends_with("-ca.key");
    }
    if ca_changed {
        let rd = std::fs::read_dir(tls_dir).map_err(|source| JoinError::Read { path: tls_dir.into(), source })?;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if (name.starts_with("serving-") || name.starts_with("client-"))
                && (name.ends_with(".crt") || name.ends_with(".key"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(changed)
}

fn key_for(secret: &str, salt: &[u8]) -> Result<aead::LessSafeKey, JoinError> {
    let mut key = [0u8; 32];
    let rounds = NonZeroU32::new(PBKDF2_ROUNDS).ok_or_else(|| JoinError::Damaged("rounds".into()))?;
    ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA256, rounds, salt, secret.as_bytes(), &mut key);
    let unbound = aead::UnboundKey::new(&aead::AES_256_GCM, &key).map_err(|_| JoinError::Damaged("key".into()))?;
    Ok(aead::LessSafeKey::new(unbound))
}

/// The sealed form kept in the datastore.
#[derive(Serialize, Deserialize)]
struct Sealed {
    salt: String,
    nonce: String,
    data: String,
}

/// Seals the shared files with `secret`.
pub fn seal(secret: &str, files: &BTreeMap<String, String>) -> Result<Vec<u8>, JoinError> {
    let rng = ring::rand::SystemRandom::new();
    let mut salt = [0u8; SALT_LEN];
    let mut nonce = [0u8; aead::NONCE_LEN];
    rng.fill(&mut salt).map_err(|_| JoinError::Damaged("no randomness".into()))?;
    rng.fill(&mut nonce).map_err(|_| JoinError::Damaged("no randomness".into()))?;
    let mut data = serde_json::to_vec(files).map_err(|e| JoinError::Damaged(e.to_string()))?;
    key_for(secret, &salt)?
        .seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::empty(), &mut data)
        .map_err(|_| JoinError::Damaged("sealing".into()))?;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    serde_json::to_vec(&Sealed { salt: b64(&salt), nonce: b64(&nonce), data: b64(&data) })
        .map_err(|e| JoinError::Damaged(e.to_string()))
}

/// Opens what [`seal`] sealed; [`JoinError::WrongToken`] when `secret` is not the one it was
/// sealed with.
pub fn open(secret: &str, sealed: &[u8]) -> Result<BTreeMap<String, String>, JoinError> {
    let damaged = |what: &str| JoinError::Damaged(what.to_string());
    let s: Sealed = serde_json::from_slice(sealed).map_err(|e| JoinError::Damaged(e.to_string()))?;
    let b64 = |v: &str| base64::engine::general_purpose::STANDARD.decode(v).map_err(|_| damaged("not base64"));
    let (salt, nonce, mut data) = (b64(&s.salt)?, b64(&s.nonce)?, b64(&s.data)?);
    let nonce = aead::Nonce::try_assume_unique_for_key(&nonce).map_err(|_| damaged("nonce"))?;
    let plain = key_for(secret, &salt)?
        .open_in_place(nonce, aead::Aad::empty(), &mut data)
        .map_err(|_| JoinError::WrongToken)?;
    serde_json::from_slice(plain).map_err(|e| JoinError::Damaged(e.to_string()))
}

/// What the datastore says about the cluster's shared files.
pub enum InStore {
    /// Another server set the cluster up: its files are now installed under the TLS dir.
    Installed,
    /// Nobody has: this server is the first, and must publish its own with [`publish`].
    Absent,
}

/// Installs the shared files sealed in the datastore, if there are any (checking them against
/// `token`).
pub fn adopt_from_store(store: &Store, tls_dir: &Path, token: Option<&Token>) -> Result<InStore, JoinError> {
    let Some(kv) = store.get(BOOTSTRAP_KEY)? else { return Ok(InStore::Absent) };
    let token = token.ok_or(JoinError::TokenNeeded)?;
    let files = open(&token.secret, &kv.value)?;
    let ca = files.get("server-ca.crt").ok_or_else(|| JoinError::Damaged("server-ca.crt is missing".into()))?;
    token.check_ca(ca)?;
    install_shared(tls_dir, &files)?;
    Ok(InStore::Installed)
}

/// Publishes this server's shared files as the cluster's. `Ok(false)`: another server published
/// first (call [`adopt_from_store`] again).
pub async fn publish(store: &Store, tls_dir: &Path, token: &Token) -> Result<bool, JoinError> {
    let sealed = seal(&token.secret, &read_shared(tls_dir)?)?;
    match store.create(BOOTSTRAP_KEY, sealed.into()).await {
        Ok(_) => Ok(true),
        Err(StoreError::AlreadyExists(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Fetches the cluster's bootstrap data from the server at `url` with `token`.
pub async fn fetch(url: &str, token: &Token) -> Result<Bootstrap, JoinError> {
    let url = url.trim_end_matches('/').to_string();
    let err = |message: String| JoinError::Fetch { url: url.clone(), message };
    let uri: http::Uri = url.parse().map_err(|e| err(format!("not a URL: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(err("expected https://HOST:PORT".into()));
    }
    let get = |path: &str, cfg: kube::Config| {
        let path = path.to_string();
        async move {
            let client = kube::Client::try_from(cfg).map_err(|e| k1s_api::errors::chain(&e))?;
            let req = http::Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
            client.request_text(req).await.map_err(|e| k1s_api::errors::chain(&e))
        }
    };
    // The CA is public; it is trusted only once it matches the token's hash.
    let mut insecure = kube::Config::new(uri.clone());
    insecure.accept_invalid_certs = true;
    insecure.connect_timeout = Some(std::time::Duration::from_secs(10));
    insecure.read_timeout = Some(std::time::Duration::from_secs(30));
    let ca = get("/cacerts", insecure.clone()).await.map_err(|e| err(format!("/cacerts: {e}")))?;
    if token.ca_hash.is_none() {
        tracing::warn!(%url, "the token carries no CA hash: trusting the CA the server presents");
    }
    token.check_ca(&ca)?;
    let der = rustls_pki_types::CertificateDer::pem_slice_iter(ca.as_bytes())
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(format!("/cacerts: {e}")))?;
    let mut cfg = insecure;
    cfg.accept_invalid_certs = false;
    cfg.root_cert = Some(der);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{JOIN_USER}:{}", token.secret));
    let value = http::HeaderValue::from_str(&format!("Basic {basic}")).map_err(|e| err(e.to_string()))?;
    cfg.headers.push((http::header::AUTHORIZATION, value));
    let body = get("/v1-k1s/server-bootstrap", cfg).await.map_err(|e| err(format!("bootstrap: {e}")))?;
    let b: Bootstrap = serde_json::from_str(&body).map_err(|e| err(format!("bootstrap answer: {e}")))?;
    match b.files.get("server-ca.crt") {
        Some(c) if *c == ca => Ok(b),
        _ => Err(err("the bootstrap answer's CA is not the one /cacerts served".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_in_k3s_format_and_as_bare_secrets() {
        let h = "ab".repeat(32);
        let t: Token = format!("K10{h}::server:s3cret").parse().expect("full");
        assert_eq!((t.ca_hash.as_deref(), t.secret.as_str()), (Some(h.as_str()), "s3cret"));
        let t: Token = "s3cret".parse().expect("bare");
        assert_eq!((t.ca_hash, t.secret.as_str()), (None, "s3cret"));
        assert!("K10abc::server:x".parse::<Token>().is_err(), "short hash");
        assert!(format!("K10{h}::node:x").parse::<Token>().is_err(), "agent token");
        assert!(format!("K10{h}::server:").parse::<Token>().is_err(), "empty secret");
        let full = Token { ca_hash: None, secret: "s3cret".into() }.full("CA");
        assert_eq!(full, format!("K10{}::server:s3cret", ca_hash("CA")));
        assert_eq!(full.parse::<Token>().expect("round trip").ca_hash, Some(ca_hash("CA")));
        assert_ne!(Token::generate().secret, Token::generate().secret);
        assert!(!format!("{:?}", Token::generate()).contains(&Token::generate().secret));
    }

    #[test]
    fn sealed_files_open_only_with_their_secret() {
        let files = BTreeMap::from([("server-ca.key".to_string(), "KEY".to_string())]);
        let sealed = seal("right", &files).expect("seal");
        assert!(!String::from_utf8_lossy(&sealed).contains("KEY"));
        assert_eq!(open("right", &sealed).expect("open"), files);
        assert!(matches!(open("wrong", &sealed), Err(JoinError::WrongToken)));
    }

    #[test]
    fn a_token_must_match_the_kept_one_and_a_new_ca_drops_the_old_leaf_certificates() {
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(local_token(dir.path(), None).expect("none"), None);
        let t: Token = "one".parse().expect("t");
        save_token(dir.path(), &t, "CA").expect("save");
        assert_eq!(local_token(dir.path(), None).expect("kept").map(|t| t.secret), Some("one".into()));
        let other: Token = "two".parse().expect("t");
        assert!(matches!(local_token(dir.path(), Some(&other)), Err(JoinError::TokenChanged { .. })));

        let tls = dir.path().join("tls");
        std::fs::create_dir_all(&tls).expect("mkdir");
        std::fs::write(tls.join("serving-kube-apiserver.crt"), "old leaf").expect("leaf");
        let mut files: BTreeMap<String, String> =
            SHARED_FILES.iter().map(|n| (n.to_string(), format!("{n} v1"))).collect();
        assert!(install_shared(&tls, &files).expect("install"));
        assert!(!tls.join("serving-kube-apiserver.crt").exists(), "issued under another CA");
        std::fs::write(tls.join("serving-kube-apiserver.crt"), "new leaf").expect("leaf");
        assert!(!install_shared(&tls, &files).expect("same again"), "nothing changed");
        assert!(tls.join("serving-kube-apiserver.crt").exists());
        files.remove("service-account.key");
        assert!(matches!(install_shared(&tls, &files), Err(JoinError::Damaged(_))));
    }
}
