//! Compact JWS (JWT) signing and verification with ES256 (ECDSA P-256, SHA-256), the way
//! upstream's `pkg/serviceaccount/jwt.go` issues ServiceAccount tokens: header `alg` and
//! `kid`, where the key id is the unpadded base64url SHA-256 of the public key's PKIX DER.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivatePkcs8KeyDer;
use serde_json::{json, Value};

/// DER prefix of a P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1, 65-byte point).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("loading the service account signing key: {0}")]
    Key(String),
    #[error("signing a service account token failed")]
    Sign,
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("unsupported token signing algorithm {0:?}")]
    Algorithm(String),
    #[error("invalid token signature")]
    Signature,
}

/// The ServiceAccount token key: signs new tokens and verifies presented ones.
pub struct Signer {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl Signer {
    /// From a PKCS#8 PEM ECDSA P-256 private key.
    pub fn from_pem(pem: &str) -> Result<Signer, JwtError> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| JwtError::Key(e.to_string()))?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der(), &rng)
            .map_err(|e| JwtError::Key(e.to_string()))?;
        let kid = B64.encode(ring::digest::digest(&ring::digest::SHA256, &spki_der(key.public_key().as_ref())));
        Ok(Signer { key, kid, rng })
    }

    /// The key id (`kid`) put in token headers and the JWKS.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// Signs `claims` into a compact JWS.
    pub fn sign(&self, claims: &Value) -> Result<String, JwtError> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let mut out = String::new();
        out.push_str(&B64.encode(serde_json::to_vec(&header).map_err(|_| JwtError::Sign)?));
        out.push('.');
        out.push_str(&B64.encode(serde_json::to_vec(claims).map_err(|_| JwtError::Sign)?));
        let sig = self.key.sign(&self.rng, out.as_bytes()).map_err(|_| JwtError::Sign)?;
        out.push('.');
        out.push_str(&B64.encode(sig.as_ref()));
        Ok(out)
    }

    /// Checks the header and signature of `token` and returns its claims (not yet validated).
    pub fn verify(&self, token: &str) -> Result<Value, JwtError> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(JwtError::Malformed("a JWS has three dot-separated parts"));
        };
        let header: Value = decode_json(h).ok_or(JwtError::Malformed("undecodable header"))?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg != "ES256" {
            return Err(JwtError::Algorithm(alg.to_string()));
        }
        let sig = B64.decode(s).map_err(|_| JwtError::Malformed("undecodable signature"))?;
        let public = signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, self.key.public_key());
        let signed = &token[..h.len() + 1 + p.len()];
        public.verify(signed.as_bytes(), &sig).map_err(|_| JwtError::Signature)?;
        decode_json(p).filter(Value::is_object).ok_or(JwtError::Malformed("undecodable claims"))
    }

    /// The public key as a JWK (RFC 7517), for `/openid/v1/jwks`.
    pub fn jwk(&self) -> Value {
        let point = self.key.public_key().as_ref();
        let (x, y) = point.get(1..33).zip(point.get(33..65)).unwrap_or((&[], &[]));
        json!({"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
               "x": B64.encode(x), "y": B64.encode(y)})
    }
}

/// The payload of a compact JWS without checking anything: only to route a token to the
/// authenticator that issued it.
pub fn unverified_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let _header = parts.next()?;
    decode_json(parts.next()?)
}

fn decode_json(part: &str) -> Option<Value> {
    let bytes = B64.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn spki_der(point: &[u8]) -> Vec<u8> {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    der
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn test_key_pem() -> String {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("keygen");
        let b64 = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    }

    #[test]
    fn signed_tokens_verify_and_carry_kid_and_claims() {
        let s = Signer::from_pem(&test_key_pem()).expect("key");
        let token = s.sign(&json!({"sub": "system:serviceaccount:ns:sa", "exp": 10})).expect("sign");
        let header: Value = decode_json(token.split('.').next().expect("header")).expect("json");
        assert_eq!(header, json!({"alg": "ES256", "kid": s.kid()}));
        assert_eq!(s.verify(&token).expect("verify")["sub"], "system:serviceaccount:ns:sa");
        assert_eq!(s.kid().len(), 43, "unpadded base64url of a SHA-256");
        assert_eq!(s.jwk()["kid"], s.kid());
    }

    #[test]
    fn tampered_payload_or_signature_and_other_keys_are_rejected() {
        let s = Signer::from_pem(&test_key_pem()).expect("key");
        let token = s.sign(&json!({"sub": "a"})).expect("sign");
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!("{}.{}.{}", parts[0], B64.encode(br#"{"sub":"admin"}"#), parts[2]);
        assert_eq!(s.verify(&forged), Err(JwtError::Signature));
        let mut sig = B64.decode(parts[2]).expect("sig");
        sig[5] ^= 1;
        let flipped = format!("{}.{}.{}", parts[0], parts[1], B64.encode(&sig));
        assert_eq!(s.verify(&flipped), Err(JwtError::Signature));
        let other = Signer::from_pem(&test_key_pem()).expect("key");
        assert_eq!(other.verify(&token), Err(JwtError::Signature));
        let none = format!("{}.{}.", B64.encode(br#"{"alg":"none"}"#), parts[1]);
        assert_eq!(s.verify(&none), Err(JwtError::Algorithm("none".into())));
        assert!(matches!(s.verify("garbage"), Err(JwtError::Malformed(_))));
        assert!(matches!(s.verify("a.b.c"), Err(JwtError::Malformed(_))));
    }
}
