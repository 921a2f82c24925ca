//! k1s-pki: the cluster's certificate authority, the API server's serving certificate, client
//! certificates for the admin and for every built-in component, certificates for
//! CertificateSigningRequests ([`csr`]), and kubeconfig rendering.
//!
//! Everything is kept under `<data-dir>/server/tls` and reused on restart; the serving
//! certificate is re-issued when the requested SANs change. Leaf certificates last
//! [`Validity::leaf`] (a year) and are re-issued when less than [`Validity::renew_before`]
//! (90 days) is left; the CAs last ten years. It must never depend on the API server or the
//! store.

pub mod client;
mod client_cert;
pub mod csr;
mod inventory;
pub mod serve;
mod serving;

pub use client_cert::ClientCert;
pub use inventory::{dates, list, renew_due, rotate, CertInfo, Rotated};
pub use serving::{server_config, server_config_reloadable, ServingCert, ServingError, ServingMaterial};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use std::fs;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("writing {path}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("reading {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("generating certificate {name}")]
    Generate { name: String, source: rcgen::Error },
    #[error("parsing certificate {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// A PEM certificate and its PEM private key.
#[derive(Clone, Debug)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The cluster PKI rooted at one CA.
#[derive(Clone)]
pub struct Pki {
    dir: PathBuf,
    validity: Validity,
    pub ca: CertPair,
    pub serving: CertPair,
}

const VALIDITY_CA_DAYS: i64 = 3650;
const VALIDITY_LEAF_DAYS: i64 = 365;
const RENEW_BEFORE_DAYS: i64 = 90;

/// How long leaf certificates last and when they are re-issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// Lifetime of a new leaf certificate.
    pub leaf: std::time::Duration,
    /// A leaf certificate with less than this left is re-issued.
    pub renew_before: std::time::Duration,
}

impl Default for Validity {
    /// A year, renewed with 90 days left (as k3s).
    fn default() -> Self {
        Validity {
            leaf: std::time::Duration::from_secs(VALIDITY_LEAF_DAYS as u64 * 86400),
            renew_before: std::time::Duration::from_secs(RENEW_BEFORE_DAYS as u64 * 86400),
        }
    }
}

impl Validity {
    /// For tests only: leaf certificates lasting `leaf`, renewed with the same share of their
    /// life left as in production (90 of 365 days).
    pub fn for_testing(leaf: std::time::Duration) -> Self {
        let renew_before = leaf.mul_f64(RENEW_BEFORE_DAYS as f64 / VALIDITY_LEAF_DAYS as f64);
        Validity { leaf, renew_before }
    }

    /// How often a running server looks at its certificates: a 24th of a lifetime, at most a
    /// minute (so that `k1s certificate rotate` is picked up quickly), at least a second.
    pub fn check_every(&self) -> std::time::Duration {
        (self.leaf / 24).clamp(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60))
    }

    /// Whether a certificate ending at `not_after` (unix seconds) is due for renewal.
    pub fn due(&self, not_after: i64) -> bool {
        not_after < OffsetDateTime::now_utc().unix_timestamp() + self.renew_before.as_secs() as i64
    }
}

fn write_private(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    let err = |source| PkiError::Write { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).mode(mode).open(&tmp).map_err(err)?;
    f.write_all(contents.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(err)?;
    fs::rename(&tmp, path).map_err(err)
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PkiError::Read { path: path.to_path_buf(), source }),
    }
}

fn gen_err(name: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Generate { name: name.to_string(), source }
}

fn leaf_params(cn: &str, orgs: &[&str], validity: &Validity) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    let now = OffsetDateTime::now_utc();
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::try_from(validity.leaf).unwrap_or(Duration::days(VALIDITY_LEAF_DAYS));
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.use_authority_key_identifier_extension = true;
    p
}

/// SANs of a PEM certificate, as strings (DNS names and IP addresses); none when it is due for
/// renewal, so that the caller re-issues it.
fn cert_sans(pem: &str, path: &Path, validity: &Validity) -> Result<Vec<String>, PkiError> {
    let parse = |message: String| PkiError::Parse { path: path.to_path_buf(), message };
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| parse(e.to_string()))?;
    let cert = p.parse_x509().map_err(|e| parse(e.to_string()))?;
    if validity.due(cert.validity().not_after.timestamp()) {
        return Ok(Vec::new());
    }
    Ok(sans_of(&cert))
}

fn sans_of(cert: &x509_parser::certificate::X509Certificate<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => out.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                    4 => out.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or([0; 4])).to_string()),
                    16 => out.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or([0; 16])).to_string()),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    out
}

impl Pki {
    /// Loads the PKI under `dir`, creating what is missing. `sans` are the serving certificate's
    /// subject alternative names (IPs and DNS names); it is re-issued when they change.
    pub fn ensure(dir: &Path, sans: &[String]) -> Result<Pki, PkiError> {
        Self::ensure_with(dir, sans, Validity::default())
    }

    /// [`Pki::ensure`] with leaf certificates lasting `validity`.
    pub fn ensure_with(dir: &Path, sans: &[String], validity: Validity) -> Result<Pki, PkiError> {
        let ca = ensure_ca(dir, "server-ca", "k1s-server-ca")?;
        let mut pki = Pki { dir: dir.to_path_buf(), validity, serving: ca.clone(), ca };
        pki.serving = pki.api_serving(sans)?;
        Ok(pki)
    }

    /// The API server's serving certificate (`serving-kube-apiserver.crt`) for `sans`, re-issued
    /// when they change or it is due for renewal (also when `k1s certificate rotate` replaced it
    /// on disk: the files are read every time).
    pub fn api_serving(&self, sans: &[String]) -> Result<CertPair, PkiError> {
        self.serving("kube-apiserver", "kube-apiserver", sans)
    }

    pub fn validity(&self) -> Validity {
        self.validity
    }

    fn sign(&self, params: CertificateParams, name: &str) -> Result<CertPair, PkiError> {
        sign_with(&self.ca, params, name)
    }

    /// The front proxy's PKI, as kube-apiserver's `--requestheader-client-ca-file` and
    /// `--proxy-client-cert-file`: a CA of its own (`request-header-ca.crt`, apart from the
    /// cluster CA, so that no ordinary client certificate can assert identities) and the API
    /// server's client certificate under it (`client-front-proxy.crt`, CN
    /// [`FRONT_PROXY_CLIENT_NAME`]), which it presents to aggregated API servers.
    pub fn front_proxy(&self) -> Result<FrontProxy, PkiError> {
        let ca = ensure_ca(&self.dir, "request-header-ca", "k1s-request-header-ca")?;
        let crt = self.dir.join("client-front-proxy.crt");
        let key = self.dir.join("client-front-proxy.key");
        if let (Some(cert_pem), Some(key_pem)) = (read(&crt)?, read(&key)?) {
            let validity = self.validity;
            let issued_by_ca = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes())
                .ok()
                .and_then(|(_, ca_pem)| {
                    let ca_cert = ca_pem.parse_x509().ok()?;
                    let (_, leaf_pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
                    let leaf = leaf_pem.parse_x509().ok()?;
                    Some(leaf.issuer() == ca_cert.subject())
                })
                .unwrap_or(false);
            if issued_by_ca
                && client_subject(&cert_pem, &validity).as_deref()
                    == Some(&subject_string(FRONT_PROXY_CLIENT_NAME, &[]))
            {
                return Ok(FrontProxy { ca, client: CertPair { cert_pem, key_pem } });
            }
        }
        let mut p = leaf_params(FRONT_PROXY_CLIENT_NAME, &[], &self.validity);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = sign_with(&ca, p, "front-proxy-client")?;
        write_private(&key, &client.key_pem, 0o600)?;
        write_private(&crt, &client.cert_pem, 0o644)?;
        Ok(FrontProxy { ca, client })
    }

    /// A serving certificate `serving-<file>.crt/.key` for `cn` with `sans`, re-issued when the
    /// SANs change or it nears expiry.
    pub fn serving(&self, file: &str, cn: &str, sans: &[String]) -> Result<CertPair, PkiError> {
        let crt = self.dir.join(format!("serving-{file}.crt"));
        let key = self.dir.join(format!("serving-{file}.key"));
        let mut wanted: Vec<String> = sans.to_vec();
        wanted.sort();
        wanted.dedup();
        if let (Some(cert_pem), Some(key_pem)) = (read(&crt)?, read(&key)?) {
            let mut have = cert_sans(&cert_pem, &crt, &self.validity)?;
            have.sort();
            have.dedup();
            if have == wanted {
                return Ok(CertPair { cert_pem, key_pem });
            }
        }
        let mut p = leaf_params(cn, &[], &self.validity);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.subject_alt_names = wanted
            .iter()
            .map(|s| match s.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => s.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(gen_err(file))?;
        let pair = self.sign(p, file)?;
        write_private(&key, &pair.key_pem, 0o600)?;
        write_private(&crt, &pair.cert_pem, 0o644)?;
        tracing::info!(path = %crt.display(), sans = ?wanted, "issued a serving certificate");
        Ok(pair)
    }

    /// A client certificate for user `cn` in groups `orgs`, kept as `client-<file>.crt/.key`
    /// and reused while valid for the same subject.
    pub fn client(&self, file: &str, cn: &str, orgs: &[&str]) -> Result<CertPair, PkiError> {
        let crt = self.dir.join(format!("client-{file}.crt"));
        let key = self.dir.join(format!("client-{file}.key"));
        if let (Some(cert_pem), Some(key_pem)) = (read(&crt)?, read(&key)?) {
            if client_subject(&cert_pem, &self.validity).as_deref() == Some(&subject_string(cn, orgs)) {
                return Ok(CertPair { cert_pem, key_pem });
            }
        }
        let mut p = leaf_params(cn, orgs, &self.validity);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let pair = self.sign(p, file)?;
        write_private(&key, &pair.key_pem, 0o600)?;
        write_private(&crt, &pair.cert_pem, 0o644)?;
        tracing::info!(path = %crt.display(), "issued a client certificate");
        Ok(pair)
    }

    /// The ServiceAccount token signing key (ECDSA P-256, PKCS#8 PEM) kept as
    /// `service-account.key`: generated on first use, reused afterwards.
    pub fn service_account_key(&self) -> Result<String, PkiError> {
        let path = self.dir.join("service-account.key");
        if let Some(pem) = read(&path)? {
            if KeyPair::from_pem(&pem).is_ok() {
                return Ok(pem);
            }
            tracing::warn!(path = %path.display(), "unreadable service account key; generating a new one");
        }
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(gen_err("service-account"))?;
        let pem = key.serialize_pem();
        write_private(&path, &pem, 0o600)?;
        tracing::info!(path = %path.display(), "created service account signing key");
        Ok(pem)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The front proxy's client certificate's common name (kubeadm's), which aggregated API servers
/// accept in `requestheader-allowed-names`.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// The front proxy's CA and the API server's client certificate under it.
#[derive(Clone, Debug)]
pub struct FrontProxy {
    pub ca: CertPair,
    pub client: CertPair,
}

/// The CA kept as `<stem>.crt`/`<stem>.key` under `dir`, created (CN `<cn>@<unix time>`) when
/// missing.
fn ensure_ca(dir: &Path, stem: &str, cn: &str) -> Result<CertPair, PkiError> {
    let ca_crt = dir.join(format!("{stem}.crt"));
    let ca_key = dir.join(format!("{stem}.key"));
    if let (Some(cert_pem), Some(key_pem)) = (read(&ca_crt)?, read(&ca_key)?) {
        return Ok(CertPair { cert_pem, key_pem });
    }
    let key = KeyPair::generate().map_err(gen_err(stem))?;
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    let now = OffsetDateTime::now_utc();
    p.distinguished_name.push(DnType::CommonName, format!("{cn}@{}", now.unix_timestamp()));
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::days(VALIDITY_CA_DAYS);
    let cert = p.self_signed(&key).map_err(gen_err(stem))?;
    let pair = CertPair { cert_pem: cert.pem(), key_pem: key.serialize_pem() };
    write_private(&ca_key, &pair.key_pem, 0o600)?;
    write_private(&ca_crt, &pair.cert_pem, 0o644)?;
    tracing::info!(path = %ca_crt.display(), "created a CA");
    Ok(pair)
}

fn sign_with(ca: &CertPair, params: CertificateParams, name: &str) -> Result<CertPair, PkiError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(gen_err(name))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(gen_err(name))?;
    let key = KeyPair::generate().map_err(gen_err(name))?;
    let cert = params.signed_by(&key, &issuer).map_err(gen_err(name))?;
    Ok(CertPair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

fn subject_string(cn: &str, orgs: &[&str]) -> String {
    format!("{cn}|{}", orgs.join(","))
}

/// `CN|org,org` of a client certificate; `None` when it is due for renewal.
fn client_subject(pem: &str, validity: &Validity) -> Option<String> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = p.parse_x509().ok()?;
    if validity.due(cert.validity().not_after.timestamp()) {
        return None;
    }
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    let orgs: Vec<&str> = cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).collect();
    Some(subject_string(&cn, &orgs))
}

/// Renders a kubeconfig with the CA and a client certificate embedded.
pub fn kubeconfig(server: &str, ca_pem: &str, client: &CertPair) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {}\n  name: default\ncontexts:\n- context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\npreferences: {{}}\nusers:\n- name: default\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(ca_pem),
        server,
        b64(&client.cert_pem),
        b64(&client.key_pem)
    )
}

/// Writes a file atomically (synced) with the given mode: key material and tokens.
pub fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    write_private(path, contents, mode)
}

/// Writes a kubeconfig atomically with the given file mode.
pub fn write_kubeconfig(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    write_private(path, contents, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_proxy_has_its_own_ca_and_a_client_certificate_kept_across_starts() {
        let dir = tempfile::tempdir().expect("tmp");
        let pki = Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki");
        let fp = pki.front_proxy().expect("front proxy");
        assert_ne!(fp.ca.cert_pem, pki.ca.cert_pem, "not the cluster CA");
        assert_eq!(client_subject(&fp.client.cert_pem, &Validity::default()).as_deref(), Some("front-proxy-client|"));
        let again = Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki").front_proxy().expect("again");
        assert_eq!((again.ca.cert_pem, again.client.cert_pem), (fp.ca.cert_pem, fp.client.cert_pem));
    }

    #[test]
    fn pki_is_created_once_and_reused_and_reissues_serving_on_san_change() {
        let dir = tempfile::tempdir().expect("tmp");
        let sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let a = Pki::ensure(dir.path(), &sans).expect("create");
        let b = Pki::ensure(dir.path(), &sans).expect("reuse");
        assert_eq!(a.ca.cert_pem, b.ca.cert_pem);
        assert_eq!(a.serving.cert_pem, b.serving.cert_pem);
        let mut more = sans.clone();
        more.push("k1s.example".into());
        let c = Pki::ensure(dir.path(), &more).expect("reissue");
        assert_eq!(a.ca.cert_pem, c.ca.cert_pem);
        assert_ne!(a.serving.cert_pem, c.serving.cert_pem);
        let mode = fs::metadata(dir.path().join("server-ca.key")).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn service_account_key_is_created_once_and_reused() {
        let dir = tempfile::tempdir().expect("tmp");
        let pki = Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("create");
        let a = pki.service_account_key().expect("key");
        assert!(a.contains("BEGIN PRIVATE KEY"), "{a}");
        let again = Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("reuse");
        assert_eq!(again.service_account_key().expect("key"), a);
        let mode = fs::metadata(dir.path().join("service-account.key")).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn client_certificates_carry_user_and_groups_and_are_reused() {
        let dir = tempfile::tempdir().expect("tmp");
        let pki = Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("create");
        let admin = pki.client("admin", "system:admin", &["system:masters"]).expect("admin");
        assert_eq!(
            client_subject(&admin.cert_pem, &Validity::default()).as_deref(),
            Some("system:admin|system:masters")
        );
        let again = pki.client("admin", "system:admin", &["system:masters"]).expect("admin");
        assert_eq!(admin.cert_pem, again.cert_pem);
        let kc = kubeconfig("https://127.0.0.1:6443", &pki.ca.cert_pem, &admin);
        assert!(kc.contains("server: https://127.0.0.1:6443"));
    }
}
