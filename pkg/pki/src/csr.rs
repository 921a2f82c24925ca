//! Certificates for CertificateSigningRequests, as upstream's controller manager signs them with
//! its cluster signing CA (`pkg/controller/certificates/authority`, the "permissive" policy):
//! the request's subject (every organization kept: they are the user's groups), public key and
//! subject alternative names, the usages the CertificateSigningRequest lists and nothing else it
//! asked for, not a CA, valid from five minutes ago for the TTL and never past the CA's own end.
//!
//! The certificate is encoded here (DER through yasna) rather than with rcgen's builder, whose
//! distinguished names hold one value per attribute type and so would keep one group only.

use crate::CertPair;
use base64::Engine as _;
use std::net::IpAddr;
use std::time::Duration;
use time::OffsetDateTime;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;
use yasna::models::{GeneralizedTime, ObjectIdentifier, UTCTime};
use yasna::Tag;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsrError {
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotARequest,
    #[error("unable to parse certificate request: {0}")]
    Parse(String),
    #[error("unable to verify certificate request signature")]
    Signature,
    #[error("unrecognized usage values: {0:?}")]
    UnknownUsages(Vec<String>),
    #[error("the signer has expired: NotAfter={0}")]
    SignerExpired(OffsetDateTime),
    #[error("reading the signing CA: {0}")]
    Ca(String),
    #[error("the signing CA's key type is not supported")]
    CaKeyType,
    #[error("failed to sign certificate: {0}")]
    Sign(String),
}

/// What a request asks to be certified, for the signers' checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The PKCS#10 DER, its signature checked.
    pub der: Vec<u8>,
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub email_addresses: Vec<String>,
    pub uris: Vec<String>,
}

/// Parses a `CERTIFICATE REQUEST` PEM block and checks its signature.
pub fn parse_request(pem: &[u8]) -> Result<Request, CsrError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| CsrError::NotARequest)?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(CsrError::NotARequest);
    }
    let (_, req) = X509CertificationRequest::from_der(&block.contents).map_err(|e| CsrError::Parse(e.to_string()))?;
    req.verify_signature().map_err(|_| CsrError::Signature)?;
    let info = &req.certification_request_info;
    let strings = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| -> Vec<String> {
        it.filter_map(|a| a.as_str().ok()).map(str::to_string).collect()
    };
    let mut out = Request {
        der: block.contents.clone(),
        common_name: strings(&mut info.subject.iter_common_name()).into_iter().next().unwrap_or_default(),
        organizations: strings(&mut info.subject.iter_organization()),
        ..Request::default()
    };
    for ext in req.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else { continue };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => out.dns_names.push(d.to_string()),
                GeneralName::RFC822Name(e) => out.email_addresses.push(e.to_string()),
                GeneralName::URI(u) => out.uris.push(u.to_string()),
                GeneralName::IPAddress(b) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                        out.ip_addresses.push(IpAddr::from(v4));
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                        out.ip_addresses.push(IpAddr::from(v6));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Upstream's `PermissiveSigningPolicy` as the CSR signers use it.
#[derive(Clone, Debug)]
pub struct Policy {
    /// How long the certificate lasts.
    pub ttl: Duration,
    /// The CertificateSigningRequest's `spec.usages`.
    pub usages: Vec<String>,
}

/// Certificates start this long before they are signed (clock skew).
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Below this lifetime a certificate's end is not moved earlier by [`BACKDATE`].
pub const SHORT: Duration = Duration::from_secs(8 * 3600);

/// Key usage bit numbers (RFC 5280 §4.2.1.3).
fn key_usage_bit(usage: &str) -> Option<u8> {
    Some(match usage {
        "signing" | "digital signature" => 0,
        "content commitment" => 1,
        "key encipherment" => 2,
        "data encipherment" => 3,
        "key agreement" => 4,
        "cert sign" => 5,
        "crl sign" => 6,
        "encipher only" => 7,
        "decipher only" => 8,
        _ => return None,
    })
}

/// Extended key usages in Go's `x509.ExtKeyUsage` order, with their OIDs.
const EXT_KEY_USAGES: &[(&[&str], &[u64])] = &[
    (&["any"], &[2, 5, 29, 37, 0]),
    (&["server auth"], &[1, 3, 6, 1, 5, 5, 7, 3, 1]),
    (&["client auth"], &[1, 3, 6, 1, 5, 5, 7, 3, 2]),
    (&["code signing"], &[1, 3, 6, 1, 5, 5, 7, 3, 3]),
    (&["email protection", "s/mime"], &[1, 3, 6, 1, 5, 5, 7, 3, 4]),
    (&["ipsec end system"], &[1, 3, 6, 1, 5, 5, 7, 3, 5]),
    (&["ipsec tunnel"], &[1, 3, 6, 1, 5, 5, 7, 3, 6]),
    (&["ipsec user"], &[1, 3, 6, 1, 5, 5, 7, 3, 7]),
    (&["timestamping"], &[1, 3, 6, 1, 5, 5, 7, 3, 8]),
    (&["ocsp signing"], &[1, 3, 6, 1, 5, 5, 7, 3, 9]),
    (&["microsoft sgc"], &[1, 3, 6, 1, 4, 1, 311, 10, 3, 3]),
    (&["netscape sgc"], &[2, 16, 840, 1, 113730, 4, 1]),
];

const OID_KEY_USAGE: &[u64] = &[2, 5, 29, 15];
const OID_EXT_KEY_USAGE: &[u64] = &[2, 5, 29, 37];
const OID_BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];
const OID_AUTHORITY_KEY_ID: &[u64] = &[2, 5, 29, 35];
const OID_SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];

/// The key usage bits and the extended key usage OIDs of `usages`.
fn usages_of(usages: &[String]) -> Result<(u16, Vec<&'static [u64]>), CsrError> {
    let mut bits = 0u16;
    let mut unknown = Vec::new();
    let mut ext = vec![false; EXT_KEY_USAGES.len()];
    for u in usages {
        if let Some(b) = key_usage_bit(u) {
            bits |= 1 << b;
        } else if let Some(i) = EXT_KEY_USAGES.iter().position(|(names, _)| names.contains(&u.as_str())) {
            ext[i] = true;
        } else {
            unknown.push(u.clone());
        }
    }
    if !unknown.is_empty() {
        return Err(CsrError::UnknownUsages(unknown));
    }
    let oids = EXT_KEY_USAGES.iter().zip(ext).filter(|(_, on)| *on).map(|((_, oid), _)| *oid).collect();
    Ok((bits, oids))
}

/// The DER `AlgorithmIdentifier` of signatures by `key`.
fn signature_algorithm(key: &rcgen::KeyPair) -> Result<Vec<u8>, CsrError> {
    let (oid, null): (&[u64], bool) = match key.algorithm() {
        a if a == &rcgen::PKCS_ECDSA_P256_SHA256 => (&[1, 2, 840, 10045, 4, 3, 2], false),
        a if a == &rcgen::PKCS_ECDSA_P384_SHA384 => (&[1, 2, 840, 10045, 4, 3, 3], false),
        a if a == &rcgen::PKCS_ED25519 => (&[1, 3, 101, 112], false),
        a if a == &rcgen::PKCS_RSA_SHA256 => (&[1, 2, 840, 113549, 1, 1, 11], true),
        a if a == &rcgen::PKCS_RSA_SHA384 => (&[1, 2, 840, 113549, 1, 1, 12], true),
        a if a == &rcgen::PKCS_RSA_SHA512 => (&[1, 2, 840, 113549, 1, 1, 13], true),
        _ => return Err(CsrError::CaKeyType),
    };
    Ok(yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_oid(&ObjectIdentifier::from_slice(oid));
            if null {
                w.next().write_null();
            }
        })
    }))
}

fn write_time(w: yasna::DERWriter<'_>, t: OffsetDateTime) {
    // RFC 5280: UTCTime through 2049, GeneralizedTime from 2050.
    if t.year() < 2050 {
        w.write_utctime(&UTCTime::from_datetime(t));
    } else {
        w.write_generalized_time(&GeneralizedTime::from_datetime(t));
    }
}

/// The validity of a certificate signed at `now` for `ttl` by a CA ending at `ca_not_after`.
pub fn validity(
    now: OffsetDateTime,
    ttl: Duration,
    ca_not_after: OffsetDateTime,
) -> Result<(OffsetDateTime, OffsetDateTime), CsrError> {
    // Certificates count whole seconds.
    let now = now.replace_nanosecond(0).unwrap_or(now);
    let ttl = time::Duration::try_from(ttl).unwrap_or(time::Duration::MAX);
    let backdate = time::Duration::try_from(BACKDATE).unwrap_or_default();
    let not_before = now - backdate;
    let mut not_after = if ttl < time::Duration::try_from(SHORT).unwrap_or_default() {
        now.saturating_add(ttl)
    } else {
        now.saturating_add(ttl - backdate)
    };
    if not_after >= ca_not_after {
        not_after = ca_not_after;
    }
    if not_before >= ca_not_after || now >= ca_not_after {
        return Err(CsrError::SignerExpired(ca_not_after));
    }
    Ok((not_before, not_after))
}

/// Signs the request (DER, as [`parse_request`] gives it) with `ca` under `policy` at `now`;
/// gives the certificate as PEM.
pub fn sign(ca: &CertPair, request_der: &[u8], policy: &Policy, now: OffsetDateTime) -> Result<String, CsrError> {
    let (_, req) = X509CertificationRequest::from_der(request_der).map_err(|e| CsrError::Parse(e.to_string()))?;
    req.verify_signature().map_err(|_| CsrError::Signature)?;
    let (bits, ext_oids) = usages_of(&policy.usages)?;
    let (_, ca_block) =
        x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes()).map_err(|e| CsrError::Ca(e.to_string()))?;
    let ca_cert = ca_block.parse_x509().map_err(|e| CsrError::Ca(e.to_string()))?;
    let ca_not_after = OffsetDateTime::from_unix_timestamp(ca_cert.validity().not_after.timestamp())
        .map_err(|e| CsrError::Ca(e.to_string()))?;
    let (not_before, not_after) = validity(now, policy.ttl, ca_not_after)?;
    let ca_key_id = ca_cert.extensions().iter().find_map(|e| match e.parsed_extension() {
        ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
        _ => None,
    });
    let key = rcgen::KeyPair::from_pem(&ca.key_pem).map_err(|e| CsrError::Ca(e.to_string()))?;
    let algorithm = signature_algorithm(&key)?;
    // The subject alternative names exactly as requested (upstream copies each kind over).
    let san = req.certification_request_info.iter_attributes().find_map(|a| match a.parsed_attribute() {
        ParsedCriAttribute::ExtensionRequest(r) => r
            .extensions
            .iter()
            .find(|e| e.oid.iter().is_some_and(|o| o.eq(OID_SUBJECT_ALT_NAME.iter().copied())))
            .map(|e| e.value.to_vec()),
        _ => None,
    });
    let mut serial = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial)
        .map_err(|_| CsrError::Sign("no randomness for a serial number".into()))?;
    serial[0] &= 0x7f;
    let subject_empty = req.certification_request_info.subject.iter().next().is_none();
    let extension = |w: yasna::DERWriter<'_>, oid: &[u64], critical: bool, value: &[u8]| {
        w.write_sequence(|w| {
            w.next().write_oid(&ObjectIdentifier::from_slice(oid));
            if critical {
                w.next().write_bool(true);
            }
            w.next().write_bytes(value);
        })
    };
    let tbs = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_tagged(Tag::context(0), |w| w.write_i64(2));
            w.next().write_bigint_bytes(&serial, true);
            w.next().write_der(&algorithm);
            w.next().write_der(ca_cert.subject().as_raw());
            w.next().write_sequence(|w| {
                write_time(w.next(), not_before);
                write_time(w.next(), not_after);
            });
            w.next().write_der(req.certification_request_info.subject.as_raw());
            w.next().write_der(req.certification_request_info.subject_pki.raw);
            w.next().write_tagged(Tag::context(3), |w| {
                w.write_sequence(|w| {
                    if bits != 0 {
                        let len = 16 - bits.leading_zeros() as usize;
                        let be = bits.reverse_bits().to_be_bytes();
                        let value = yasna::construct_der(|w| w.write_bitvec_bytes(&be[..len.div_ceil(8)], len));
                        extension(w.next(), OID_KEY_USAGE, true, &value);
                    }
                    if !ext_oids.is_empty() {
                        let value = yasna::construct_der(|w| {
                            w.write_sequence(|w| {
                                for oid in &ext_oids {
                                    w.next().write_oid(&ObjectIdentifier::from_slice(oid));
                                }
                            })
                        });
                        extension(w.next(), OID_EXT_KEY_USAGE, false, &value);
                    }
                    // Not a CA.
                    extension(
                        w.next(),
                        OID_BASIC_CONSTRAINTS,
                        true,
                        &yasna::construct_der(|w| w.write_sequence(|_| {})),
                    );
                    if let Some(id) = &ca_key_id {
                        let value = yasna::construct_der(|w| {
                            w.write_sequence(|w| w.next().write_tagged_implicit(Tag::context(0), |w| w.write_bytes(id)))
                        });
                        extension(w.next(), OID_AUTHORITY_KEY_ID, false, &value);
                    }
                    if let Some(san) = &san {
                        extension(w.next(), OID_SUBJECT_ALT_NAME, subject_empty, san);
                    }
                })
            });
        })
    });
    let signature = rcgen::SigningKey::sign(&key, &tbs).map_err(|e| CsrError::Sign(e.to_string()))?;
    let der = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_der(&tbs);
            w.next().write_der(&algorithm);
            w.next().write_bitvec_bytes(&signature, signature.len() * 8);
        })
    });
    Ok(pem("CERTIFICATE", &der))
}

/// [`sign`] now.
pub fn sign_now(ca: &CertPair, request_der: &[u8], policy: &Policy) -> Result<String, CsrError> {
    sign(ca, request_der, policy, OffsetDateTime::now_utc())
}

/// A PEM block with 64-column lines.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The end (Unix seconds) of the first certificate of a PEM bundle; `None` when it holds none.
pub fn not_after(pem: &[u8]) -> Option<i64> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = block.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;

    fn request(cn: &str, orgs: &[&str], sans: Vec<rcgen::SanType>) -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        // rcgen keeps one value per attribute type: several organizations are written by hand
        // below when needed.
        if let Some(o) = orgs.first() {
            params.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        params.subject_alt_names = sans;
        params.serialize_request(&key).expect("csr").pem().expect("pem")
    }

    fn ca() -> CertPair {
        let dir = tempfile::tempdir().expect("tmp");
        crate::Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki").ca
    }

    #[test]
    fn a_signed_request_keeps_subject_key_and_names_and_gets_only_the_listed_usages() {
        let ca = ca();
        let pem = request(
            "system:node:n1",
            &["system:nodes"],
            vec![
                rcgen::SanType::DnsName("n1".try_into().expect("dns")),
                rcgen::SanType::IpAddress([10, 0, 0, 1].into()),
            ],
        );
        let req = parse_request(pem.as_bytes()).expect("parse");
        assert_eq!(req.common_name, "system:node:n1");
        assert_eq!(req.organizations, ["system:nodes"]);
        assert_eq!(req.dns_names, ["n1"]);
        assert_eq!(req.ip_addresses, [IpAddr::from([10, 0, 0, 1])]);
        let now = OffsetDateTime::now_utc();
        let policy = Policy {
            ttl: Duration::from_secs(3600),
            usages: vec!["digital signature".into(), "key encipherment".into(), "server auth".into()],
        };
        let cert_pem = sign(&ca, &req.der, &policy, now).expect("sign");
        let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).expect("pem");
        let cert = block.parse_x509().expect("cert");
        let (_, ca_block) = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes()).expect("ca");
        let ca_cert = ca_block.parse_x509().expect("ca cert");
        cert.verify_signature(Some(ca_cert.public_key())).expect("signed by the CA");
        assert_eq!(cert.issuer(), ca_cert.subject());
        assert_eq!(cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok()), Some("system:node:n1"));
        let ku = cert.key_usage().expect("ku").expect("present").value;
        assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
        let eku = cert.extended_key_usage().expect("eku").expect("present").value;
        assert!(eku.server_auth && !eku.client_auth);
        assert!(!cert.basic_constraints().expect("bc").expect("present").value.ca);
        let names: Vec<String> = cert
            .subject_alternative_name()
            .expect("san")
            .expect("present")
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => d.to_string(),
                GeneralName::IPAddress(b) => format!("{b:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["n1", "[10, 0, 0, 1]"]);
        // Short-lived: from five minutes ago to an hour from now.
        let (nb, na) = (cert.validity().not_before.timestamp(), cert.validity().not_after.timestamp());
        assert_eq!(na - now.unix_timestamp(), 3600);
        assert_eq!(now.unix_timestamp() - nb, 300);
        assert_eq!(not_after(cert_pem.as_bytes()), Some(na));
    }

    #[test]
    fn long_lived_certificates_end_backdated_and_never_after_the_ca() {
        let now = OffsetDateTime::from_unix_timestamp(1_000_000_000).expect("time");
        let ca_end = now + time::Duration::days(30);
        let (nb, na) = validity(now, Duration::from_secs(86400), ca_end).expect("validity");
        assert_eq!(now - nb, time::Duration::minutes(5));
        assert_eq!(na - now, time::Duration::days(1) - time::Duration::minutes(5));
        let (_, na) = validity(now, Duration::from_secs(365 * 86400), ca_end).expect("capped");
        assert_eq!(na, ca_end);
        assert_eq!(validity(ca_end, Duration::from_secs(3600), ca_end), Err(CsrError::SignerExpired(ca_end)));
    }

    #[test]
    fn unknown_usages_and_tampered_requests_are_refused() {
        let ca = ca();
        let req = parse_request(request("alice", &[], vec![]).as_bytes()).expect("parse");
        let bad = Policy { ttl: Duration::from_secs(3600), usages: vec!["client auth".into(), "flying".into()] };
        assert_eq!(
            sign(&ca, &req.der, &bad, OffsetDateTime::now_utc()),
            Err(CsrError::UnknownUsages(vec!["flying".into()]))
        );
        let mut der = req.der.clone();
        let at = der.windows(5).position(|w| w == b"alice").expect("subject");
        der[at] = b'b';
        let ok = Policy { ttl: Duration::from_secs(3600), usages: vec!["client auth".into()] };
        assert_eq!(sign(&ca, &der, &ok, OffsetDateTime::now_utc()), Err(CsrError::Signature));
        assert_eq!(parse_request(b"garbage"), Err(CsrError::NotARequest));
    }

    #[test]
    fn every_organization_of_the_subject_is_kept() {
        // A subject with two O= attributes (two groups), encoded by hand.
        let key = rcgen::KeyPair::generate().expect("key");
        let name = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                for (oid, v) in [(&[2u64, 5, 4, 3][..], "bob"), (&[2, 5, 4, 10], "dev"), (&[2, 5, 4, 10], "ops")] {
                    w.next().write_set(|w| {
                        w.next().write_sequence(|w| {
                            w.next().write_oid(&ObjectIdentifier::from_slice(oid));
                            w.next().write_utf8_string(v);
                        })
                    });
                }
            })
        });
        let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
        let info = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                w.next().write_i64(0);
                w.next().write_der(&name);
                w.next().write_der(&spki);
                w.next().write_tagged_implicit(Tag::context(0), |w| w.write_set(|_| {}));
            })
        });
        let sig = rcgen::SigningKey::sign(&key, &info).expect("sign");
        let alg = signature_algorithm(&key).expect("alg");
        let der = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                w.next().write_der(&info);
                w.next().write_der(&alg);
                w.next().write_bitvec_bytes(&sig, sig.len() * 8);
            })
        });
        let req = parse_request(pem("CERTIFICATE REQUEST", &der).as_bytes()).expect("parse");
        assert_eq!(req.organizations, ["dev", "ops"]);
        let ca = ca();
        let policy = Policy { ttl: Duration::from_secs(3600), usages: vec!["client auth".into()] };
        let cert_pem = sign(&ca, &req.der, &policy, OffsetDateTime::now_utc()).expect("sign");
        let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).expect("pem");
        let cert = block.parse_x509().expect("cert");
        let orgs: Vec<&str> = cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).collect();
        assert_eq!(orgs, ["dev", "ops"]);
    }
}
