//! What `k1s certificate check` and `k1s certificate rotate` see: every certificate under the
//! PKI directory with its dates, and re-issuing leaf certificates now, under the same CA, with the
//! same subject, SANs and usage.

use crate::{leaf_params, read, sans_of, sign_with, write_private, CertPair, PkiError, Validity};
use rcgen::{ExtendedKeyUsagePurpose, SanType};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// One certificate file.
#[derive(Clone, Debug)]
pub struct CertInfo {
    pub path: PathBuf,
    /// The service it belongs to: the file name without `client-`/`serving-` and `.crt`.
    pub service: String,
    pub subject: String,
    pub is_ca: bool,
    /// Serial number, hex.
    pub serial: String,
    /// Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
}

/// A certificate `rotate` re-issued.
#[derive(Clone, Debug)]
pub struct Rotated {
    pub path: PathBuf,
    pub old_serial: String,
    pub new_serial: String,
    pub not_after: i64,
}

fn parse_err(path: &Path, message: impl std::fmt::Display) -> PkiError {
    PkiError::Parse { path: path.to_path_buf(), message: message.to_string() }
}

fn service_of(path: &Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    stem.strip_prefix("client-").or_else(|| stem.strip_prefix("serving-")).unwrap_or(stem).to_string()
}

fn info(path: &Path, pem: &str) -> Result<CertInfo, PkiError> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| parse_err(path, e))?;
    let cert = p.parse_x509().map_err(|e| parse_err(path, e))?;
    Ok(CertInfo {
        path: path.to_path_buf(),
        service: service_of(path),
        subject: cert.subject().to_string(),
        is_ca: cert.is_ca(),
        serial: cert.raw_serial_as_string().replace(':', ""),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// `(not_before, not_after)` of a PEM certificate, Unix seconds.
pub fn dates(pem: &str) -> Option<(i64, i64)> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = p.parse_x509().ok()?;
    Some((cert.validity().not_before.timestamp(), cert.validity().not_after.timestamp()))
}

/// Every `*.crt` under `dir`, sorted by file name.
pub fn list(dir: &Path) -> Result<Vec<CertInfo>, PkiError> {
    let rd = std::fs::read_dir(dir).map_err(|source| PkiError::Read { path: dir.to_path_buf(), source })?;
    let mut paths: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "crt")).collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        if let Some(pem) = read(&path)? {
            out.push(info(&path, &pem)?);
        }
    }
    Ok(out)
}

/// Re-issues now every leaf certificate under `dir` (only those of `service` when given: e.g.
/// `kube-apiserver`, `admin`, `kubelet`), each signed by the CA that issued it, with a new key,
/// the same subject, SANs and usage, and a fresh `validity`. CAs are never touched. It works on
/// the files: a running server serves the new API certificate to new connections within
/// [`Validity::check_every`]; everything else takes it at its next start.
pub fn rotate(dir: &Path, service: Option<&str>, validity: Validity) -> Result<Vec<Rotated>, PkiError> {
    rotate_where(dir, validity, |c| service.is_none_or(|s| s == c.service))
}

/// Re-issues the leaf certificates under `dir` that are due for renewal under `validity`.
pub fn renew_due(dir: &Path, validity: Validity) -> Result<Vec<Rotated>, PkiError> {
    rotate_where(dir, validity, |c| validity.due(c.not_after))
}

fn rotate_where(dir: &Path, validity: Validity, pick: impl Fn(&CertInfo) -> bool) -> Result<Vec<Rotated>, PkiError> {
    let all = list(dir)?;
    let cas: Vec<(CertInfo, CertPair)> = all
        .iter()
        .filter(|c| c.is_ca)
        .filter_map(|c| {
            let key = read(&c.path.with_extension("key")).ok()??;
            let cert = read(&c.path).ok()??;
            Some((c.clone(), CertPair { cert_pem: cert, key_pem: key }))
        })
        .collect();
    let mut out = Vec::new();
    for c in all.iter().filter(|c| !c.is_ca && pick(c)) {
        let Some(pem) = read(&c.path)? else { continue };
        let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| parse_err(&c.path, e))?;
        let cert = p.parse_x509().map_err(|e| parse_err(&c.path, e))?;
        let Some((_, ca)) = cas.iter().find(|(ca, _)| ca.subject == cert.issuer().to_string()) else {
            return Err(parse_err(
                &c.path,
                format!("its issuer {} is not a CA under {}", cert.issuer(), dir.display()),
            ));
        };
        let cn = cert.subject().iter_common_name().next().and_then(|n| n.as_str().ok()).unwrap_or_default();
        let orgs: Vec<&str> = cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).collect();
        let mut params = leaf_params(cn, &orgs, &validity);
        let eku = cert.extended_key_usage().ok().flatten().map(|e| (e.value.server_auth, e.value.client_auth));
        params.extended_key_usages = match eku {
            Some((true, _)) => vec![ExtendedKeyUsagePurpose::ServerAuth],
            _ => vec![ExtendedKeyUsagePurpose::ClientAuth],
        };
        params.subject_alt_names = sans_of(&cert)
            .into_iter()
            .map(|s| match s.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => s.try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(|source| PkiError::Generate { name: c.service.clone(), source })?;
        let pair = sign_with(ca, params, &c.service)?;
        write_private(&c.path.with_extension("key"), &pair.key_pem, 0o600)?;
        write_private(&c.path, &pair.cert_pem, 0o644)?;
        let new = info(&c.path, &pair.cert_pem)?;
        tracing::info!(path = %c.path.display(), serial = %new.serial, "rotated a certificate");
        out.push(Rotated {
            path: c.path.clone(),
            old_serial: c.serial.clone(),
            new_serial: new.serial,
            not_after: new.not_after,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pki;

    #[test]
    fn leaves_last_a_year_the_ca_ten_and_rotate_keeps_subject_and_sans_under_the_same_ca() {
        let dir = tempfile::tempdir().expect("tmp");
        let pki = Pki::ensure(dir.path(), &["127.0.0.1".into(), "k1s.example".into()]).expect("pki");
        pki.client("admin", "system:admin", &["system:masters"]).expect("admin");
        pki.front_proxy().expect("front proxy");
        let before = list(dir.path()).expect("list");
        let day = 86400;
        let ca = before.iter().find(|c| c.service == "server-ca").expect("ca");
        assert!(ca.is_ca);
        assert!((ca.not_after - ca.not_before) / day >= 3650, "{ca:?}");
        let serving = before.iter().find(|c| c.service == "kube-apiserver").expect("serving");
        assert_eq!((serving.not_after - serving.not_before) / day, 365, "{serving:?}");

        let rotated = rotate(dir.path(), Some("kube-apiserver"), Validity::default()).expect("rotate");
        assert_eq!(rotated.len(), 1, "{rotated:?}");
        assert_ne!(rotated[0].old_serial, rotated[0].new_serial);
        let again = Pki::ensure(dir.path(), &["127.0.0.1".into(), "k1s.example".into()]).expect("reload");
        let after = list(dir.path()).expect("list");
        let s2 = after.iter().find(|c| c.service == "kube-apiserver").expect("serving");
        assert_eq!(s2.serial, rotated[0].new_serial, "same SANs: the rotated certificate is kept");
        assert_eq!(again.ca.cert_pem, pki.ca.cert_pem, "the CA is untouched");
        crate::server_config(&crate::ServingMaterial {
            ca_pem: again.ca.cert_pem.clone(),
            cert_pem: again.serving.cert_pem.clone(),
            key_pem: again.serving.key_pem.clone(),
        })
        .expect("the new key matches");

        let all = rotate(dir.path(), None, Validity::default()).expect("rotate all");
        let names: Vec<&str> = all.iter().map(|r| r.path.file_name().and_then(|n| n.to_str()).unwrap_or("")).collect();
        assert_eq!(names, ["client-admin.crt", "client-front-proxy.crt", "serving-kube-apiserver.crt"]);
        let fp = again.front_proxy().expect("front proxy still valid under its own CA");
        assert!(fp.client.cert_pem.contains("BEGIN CERTIFICATE"));
    }

    #[test]
    fn a_certificate_due_for_renewal_is_reissued_by_ensure() {
        let dir = tempfile::tempdir().expect("tmp");
        let short = Validity::for_testing(std::time::Duration::from_secs(60));
        assert!(short.renew_before.as_secs() >= 14 && short.renew_before.as_secs() <= 15, "{short:?}");
        let sans = ["127.0.0.1".to_string()];
        let a = Pki::ensure_with(dir.path(), &sans, short).expect("pki");
        let b = Pki::ensure_with(dir.path(), &sans, short).expect("pki");
        assert_eq!(a.serving.cert_pem, b.serving.cert_pem, "45 s left of 60: not due");
        // A certificate with 10 s left out of 365 days is due with the default validity.
        let tiny = Validity { leaf: std::time::Duration::from_secs(10), ..Validity::default() };
        let c = Pki::ensure_with(dir.path(), &sans, tiny).expect("pki");
        let d = Pki::ensure_with(dir.path(), &sans, Validity::default()).expect("pki");
        assert_ne!(c.serving.cert_pem, d.serving.cert_pem, "due: re-issued");
        let e = Pki::ensure(dir.path(), &sans).expect("pki");
        assert_eq!(d.serving.cert_pem, e.serving.cert_pem);

        // The background renewal re-issues exactly what is due.
        e.client("admin", "system:admin", &["system:masters"]).expect("admin");
        assert!(renew_due(dir.path(), Validity::default()).expect("nothing due").is_empty());
        let eager = Validity {
            leaf: std::time::Duration::from_secs(10),
            renew_before: std::time::Duration::from_secs(400 * 86400),
        };
        let renewed = renew_due(dir.path(), eager).expect("all due with 400 days' notice");
        assert_eq!(renewed.len(), 2, "{renewed:?}");
        let admin = list(dir.path()).expect("list").into_iter().find(|c| c.service == "admin").expect("admin");
        assert!(admin.not_after - admin.not_before < 3700, "issued with the given validity: {admin:?}");
        assert!(admin.subject.contains("system:admin"), "{admin:?}");
    }
}
