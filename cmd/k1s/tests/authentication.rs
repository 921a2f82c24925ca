//! Bearer token authentication against a real server, driven with stock kubectl and curl: the
//! static token file (`--token-auth-file`), bootstrap tokens, OpenID Connect ID tokens from an
//! issuer the test serves on loopback (HTTPS, discovery document and key set, keys made in the
//! test), and TokenReview answering for each; bad settings stop the server at start.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine as _;
use bytes::Bytes;
use common::{eventually, server_refuses, Server};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use ring::signature::{self, KeyPair as _};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A test-only RSA key (the OIDC unit tests' own).
const RSA_KEY: &str = include_str!("../../../pkg/apiserver/src/authn/testdata/oidc-rsa.pem");

/// A raw HTTPS request authenticated only by `token`: (status, body).
fn bearer(s: &Server, token: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut c = Command::new("curl");
    c.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method, "--cacert"])
        .arg(s.data_dir().join("server/tls/server-ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {token}"));
    if let Some(b) = body {
        c.args(["-H", "Content-Type: application/json", "--data-binary"]).arg(b.to_string());
    }
    c.arg(format!("https://127.0.0.1:{}{path}", s.port));
    let out = c.output().expect("curl");
    assert!(out.status.success(), "curl failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `kubectl auth whoami --token`, with a kubeconfig that holds nothing but the cluster CA.
fn whoami(s: &Server, token: &str) -> Result<Value, String> {
    let kc = s.write_file(
        "ca-only.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n",
            s.port,
            s.data_dir().join("server/tls/server-ca.crt").display()
        ),
    );
    let kc = kc.display().to_string();
    let out = s.kubectl(&["--kubeconfig", &kc, "--token", token, "auth", "whoami", "-o", "json"]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice::<Value>(&out.stdout).expect("json")["status"]["userInfo"].clone())
}

/// A TokenReview by the admin, with `audiences` when given.
fn review(s: &Server, token: &str, audiences: &[&str]) -> Value {
    let mut spec = json!({"token": token});
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    let tr = s.ok_stdin(
        &["create", "-o", "json", "-f", "-"],
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}).to_string(),
    );
    serde_json::from_str::<Value>(&tr).expect("json")["status"].clone()
}

const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

fn bootstrap_secret(expiration: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bootstrap-token-abcdef, namespace: kube-system}}\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: abcdef\n  token-secret: 0123456789abcdef\n  usage-bootstrap-authentication: \"true\"\n  auth-extra-groups: system:bootstrappers:worker\n  expiration: \"{expiration}\"\n"
    )
}

#[test]
fn token_file_and_bootstrap_tokens_authenticate_and_token_review_agrees() {
    let files = tempfile::tempdir().expect("tmp");
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cr3t-alice,alice,uid-1,\"dev,ops\"\ns3cr3t-bob,bob,uid-2\n").expect("write");
    let s = Server::start_with(&[&format!("--token-auth-file={}", tokens.display())]);

    let alice = whoami(&s, "s3cr3t-alice").expect("alice");
    assert_eq!(alice["username"], "alice", "{alice}");
    assert_eq!(alice["uid"], "uid-1", "{alice}");
    assert_eq!(alice["groups"], json!(["dev", "ops", "system:authenticated"]), "{alice}");
    assert_eq!(whoami(&s, "s3cr3t-bob").expect("bob")["groups"], json!(["system:authenticated"]));
    let err = whoami(&s, "s3cr3t-eve").expect_err("unknown token");
    assert!(err.contains("Unauthorized"), "{err}");
    assert_eq!(bearer(&s, "s3cr3t-eve", "GET", "/version", None).0, 401, "a presented token must be valid");

    let r = review(&s, "s3cr3t-alice", &[]);
    assert_eq!(r["authenticated"], true, "{r}");
    assert_eq!(r["user"]["username"], "alice", "{r}");
    assert_eq!(r["user"]["groups"], json!(["dev", "ops", "system:authenticated"]), "{r}");
    assert_eq!(r["audiences"], json!([API_AUDIENCE]), "{r}");
    // Static tokens are good for the API server only.
    let r = review(&s, "s3cr3t-alice", &["vault"]);
    assert_eq!(r["authenticated"], false, "{r}");
    let r = review(&s, "s3cr3t-eve", &[]);
    assert_eq!((r["authenticated"].as_bool(), r["error"].as_str()), (Some(false), Some("invalid bearer token")), "{r}");

    // A bootstrap token.
    let token = "abcdef.0123456789abcdef";
    assert!(whoami(&s, token).is_err(), "no Secret yet");
    s.ok_stdin(&["apply", "-f", "-"], &bootstrap_secret("2099-01-01T00:00:00Z"));
    let user = eventually(Duration::from_secs(10), "the bootstrap token to authenticate", || whoami(&s, token).ok());
    assert_eq!(user["username"], "system:bootstrap:abcdef", "{user}");
    assert_eq!(
        user["groups"],
        json!(["system:bootstrappers", "system:bootstrappers:worker", "system:authenticated"]),
        "{user}"
    );
    let r = review(&s, token, &[]);
    assert_eq!(r["authenticated"], true, "{r}");
    assert_eq!(r["user"]["username"], "system:bootstrap:abcdef", "{r}");
    assert!(whoami(&s, "abcdef.0123456789abcdee").is_err(), "wrong secret");
    // Expired: refused.
    s.ok_stdin(&["apply", "-f", "-"], &bootstrap_secret("2020-01-01T00:00:00Z"));
    eventually(Duration::from_secs(10), "the expired token to be refused", || whoami(&s, token).is_err().then_some(()));
    assert_eq!(review(&s, token, &[])["authenticated"], false);
}

#[test]
fn bad_token_files_and_oidc_settings_stop_the_server_at_start() {
    let files = tempfile::tempdir().expect("tmp");
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cr3t-alice,alice,uid-1\ns3cr3t-bob,bob\n").expect("write");
    let log = server_refuses(&[&format!("--token-auth-file={}", tokens.display())]);
    let want = format!("--token-auth-file {}: line 2: expected at least 3 columns", tokens.display());
    assert!(log.contains(&want), "{log}");
    let log = server_refuses(&[&format!("--token-auth-file={}", files.path().join("missing.csv").display())]);
    assert!(log.contains("missing.csv: reading it"), "{log}");
    let log = server_refuses(&["--oidc-issuer-url=http://127.0.0.1:1", "--oidc-client-id=k1s"]);
    assert!(log.contains("has invalid scheme \"http\", require 'https'"), "{log}");
    let log = server_refuses(&["--oidc-issuer-url=https://127.0.0.1:1"]);
    assert!(log.contains("--oidc-issuer-url and --oidc-client-id must be specified together"), "{log}");
    let log = server_refuses(&["--oidc-client-id=k1s"]);
    assert!(log.contains("--oidc-client-id needs --oidc-issuer-url"), "{log}");
    let log =
        server_refuses(&["--oidc-issuer-url=https://127.0.0.1:1", "--oidc-client-id=k1s", "--oidc-required-claim=hd"]);
    assert!(log.contains("--oidc-required-claim \"hd\": expected claim=value"), "{log}");
    let log =
        server_refuses(&["--oidc-issuer-url=https://127.0.0.1:1", "--oidc-client-id=k1s", "--oidc-signing-algs=HS256"]);
    assert!(log.contains("unsupported signing alg \"HS256\""), "{log}");
}

/// The test's OIDC issuer: HTTPS on loopback, serving its discovery document and key set.
struct Issuer {
    url: String,
    ca_file: std::path::PathBuf,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<Mutex<usize>>,
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn start_issuer() -> Issuer {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = k1s_pki::Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki");
    let pair = pki.serving("issuer", "issuer", &["127.0.0.1".into()]).expect("cert");
    let ca_file = dir.path().join("issuer-ca.crt");
    std::fs::write(&ca_file, &pki.ca.cert_pem).expect("ca");
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<_, _>>().expect("cert");
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).expect("key");
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let url = format!("https://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    let keys: Arc<Mutex<Vec<Value>>> = Arc::default();
    let fetches: Arc<Mutex<usize>> = Arc::default();
    let (served, counted, issuer) = (keys.clone(), fetches.clone(), url.clone());
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, served, counted, issuer) =
                (acceptor.clone(), served.clone(), counted.clone(), issuer.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let body = match req.uri().path() {
                        "/.well-known/openid-configuration" => Some(json!({
                            "issuer": issuer, "jwks_uri": format!("{issuer}/keys"),
                            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                        })),
                        "/keys" => {
                            *counted.lock().expect("lock") += 1;
                            Some(json!({"keys": *served.lock().expect("lock")}))
                        }
                        _ => None,
                    };
                    async move {
                        let mut resp = match body {
                            Some(b) => hyper::Response::new(Full::new(Bytes::from(b.to_string()))),
                            None => {
                                let mut r = hyper::Response::new(Full::new(Bytes::from_static(b"not found")));
                                *r.status_mut() = http::StatusCode::NOT_FOUND;
                                r
                            }
                        };
                        resp.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    Issuer { url, ca_file, keys, fetches, _runtime: runtime, _dir: dir }
}

fn rsa_key() -> signature::RsaKeyPair {
    let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(RSA_KEY.as_bytes()).expect("pem");
    signature::RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).expect("rsa")
}

fn rsa_jwk(key: &signature::RsaKeyPair, kid: &str) -> Value {
    let c: signature::RsaPublicKeyComponents<Vec<u8>> = key.public().into();
    json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": B64URL.encode(&c.n), "e": B64URL.encode(&c.e)})
}

fn ec_key() -> signature::EcdsaKeyPair {
    let rng = ring::rand::SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate");
    signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("ec")
}

fn ec_jwk(key: &signature::EcdsaKeyPair, kid: &str) -> Value {
    let p = key.public_key().as_ref();
    json!({"kty": "EC", "use": "sig", "crv": "P-256", "kid": kid, "x": B64URL.encode(&p[1..33]), "y": B64URL.encode(&p[33..65])})
}

enum Signing<'a> {
    Rs256(&'a signature::RsaKeyPair),
    Es256(&'a signature::EcdsaKeyPair),
}

fn id_token(key: Signing<'_>, kid: &str, claims: &Value) -> String {
    let rng = ring::rand::SystemRandom::new();
    let alg = match key {
        Signing::Rs256(_) => "RS256",
        Signing::Es256(_) => "ES256",
    };
    let signed = format!(
        "{}.{}",
        B64URL.encode(json!({"alg": alg, "kid": kid, "typ": "JWT"}).to_string()),
        B64URL.encode(claims.to_string())
    );
    let sig = match key {
        Signing::Rs256(k) => {
            let mut sig = vec![0; k.public().modulus_len()];
            k.sign(&signature::RSA_PKCS1_SHA256, &rng, signed.as_bytes(), &mut sig).expect("sign");
            sig
        }
        Signing::Es256(k) => k.sign(&rng, signed.as_bytes()).expect("sign").as_ref().to_vec(),
    };
    format!("{signed}.{}", B64URL.encode(sig))
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64
}

#[test]
fn oidc_id_tokens_authenticate_with_the_configured_claims_and_prefixes_and_bad_ones_get_401() {
    let issuer = start_issuer();
    let (rsa, ec) = (rsa_key(), ec_key());
    *issuer.keys.lock().expect("lock") = vec![rsa_jwk(&rsa, "rsa-1"), ec_jwk(&ec, "ec-1")];
    let s = Server::start_with(&[
        &format!("--oidc-issuer-url={}", issuer.url),
        "--oidc-client-id=k1s-test",
        &format!("--oidc-ca-file={}", issuer.ca_file.display()),
        "--oidc-username-claim=email",
        "--oidc-username-prefix=oidc:",
        "--oidc-groups-claim=groups",
        "--oidc-groups-prefix=oidc:",
        "--oidc-required-claim=hd=example.com",
        "--oidc-signing-algs=RS256,ES256",
    ]);
    let claims = |extra: Value| {
        let mut c = json!({"iss": issuer.url, "aud": "k1s-test", "sub": "u-123", "email": "jane@example.com",
                           "email_verified": true, "groups": ["dev", "ops"], "hd": "example.com",
                           "iat": now(), "exp": now() + 600});
        for (k, v) in extra.as_object().expect("object") {
            c[k] = v.clone();
        }
        c
    };
    let good = id_token(Signing::Rs256(&rsa), "rsa-1", &claims(json!({})));
    let user = eventually(Duration::from_secs(20), "the issuer's keys to be fetched", || whoami(&s, &good).ok());
    assert_eq!(user["username"], "oidc:jane@example.com", "{user}");
    assert_eq!(user["groups"], json!(["oidc:dev", "oidc:ops", "system:authenticated"]), "{user}");
    let es = id_token(Signing::Es256(&ec), "ec-1", &claims(json!({})));
    assert_eq!(whoami(&s, &es).expect("ES256")["username"], "oidc:jane@example.com");
    let r = review(&s, &good, &[]);
    assert_eq!(r["authenticated"], true, "{r}");
    assert_eq!(r["user"]["username"], "oidc:jane@example.com", "{r}");
    assert_eq!(r["audiences"], json!([API_AUDIENCE]), "{r}");

    // Expired, for another client, signed by another key, missing a required claim, unverified
    // email: all 401.
    let other = ec_key();
    let bad = [
        ("expired", id_token(Signing::Rs256(&rsa), "rsa-1", &claims(json!({"exp": now() - 60})))),
        ("wrong audience", id_token(Signing::Rs256(&rsa), "rsa-1", &claims(json!({"aud": "someone-else"})))),
        ("wrong signature", id_token(Signing::Es256(&other), "ec-1", &claims(json!({})))),
        ("required claim", id_token(Signing::Rs256(&rsa), "rsa-1", &claims(json!({"hd": "evil.com"})))),
        ("unverified email", id_token(Signing::Rs256(&rsa), "rsa-1", &claims(json!({"email_verified": false})))),
    ];
    for (what, token) in &bad {
        let (code, status) = bearer(&s, token, "GET", "/api/v1/namespaces", None);
        assert_eq!(code, 401, "{what}: {status}");
        assert_eq!(status["reason"], "Unauthorized", "{what}: {status}");
    }
    let r = review(&s, &bad[0].1, &[]);
    assert_eq!(r["authenticated"], false, "{r}");
    assert!(r["error"].as_str().is_some_and(|e| e.contains("token is expired")), "{r}");

    // The issuer rotates in a new key: a token naming it is accepted once the keys are refetched
    // (on the unknown key id, at most every 10 s).
    let next = ec_key();
    issuer.keys.lock().expect("lock").push(ec_jwk(&next, "ec-2"));
    let rotated = id_token(Signing::Es256(&next), "ec-2", &claims(json!({})));
    let user = eventually(Duration::from_secs(30), "the new key to be fetched", || whoami(&s, &rotated).ok());
    assert_eq!(user["username"], "oidc:jane@example.com");
    let fetches = *issuer.fetches.lock().expect("lock");
    assert!((2..10).contains(&fetches), "keys fetched {fetches} times: refetches are rate-limited");
}

#[test]
fn an_authentication_config_maps_claims_with_cel_and_checks_its_rules() {
    let issuer = start_issuer();
    let ec = ec_key();
    *issuer.keys.lock().expect("lock") = vec![ec_jwk(&ec, "ec-1")];
    let ca = std::fs::read_to_string(&issuer.ca_file).expect("ca");
    let indented: String = ca.lines().map(|l| format!("      {l}\n")).collect();
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {}\n    audiences: [k1s-a, k1s-b]\n    audienceMatchPolicy: MatchAny\n    certificateAuthority: |\n{indented}  claimValidationRules:\n  - expression: claims.tenant == 'acme'\n    message: only acme's users\n  claimMappings:\n    username:\n      expression: '\"ext:\" + claims.sub'\n    groups:\n      claim: roles\n      prefix: 'acme:'\n    uid:\n      claim: sub\n    extra:\n    - key: example.com/tenant\n      valueExpression: claims.tenant\n  userValidationRules:\n  - expression: \"!user.username.startsWith('ext:system:')\"\n    message: no system users\n",
        issuer.url
    );
    let files = tempfile::tempdir().expect("tmp");
    let path = files.path().join("authn.yaml");
    std::fs::write(&path, &config).expect("write");
    let s = Server::start_with(&[&format!("--authentication-config={}", path.display())]);
    let claims = |sub: &str, tenant: &str| json!({"iss": issuer.url, "aud": ["k1s-b"], "sub": sub, "tenant": tenant, "roles": "admin", "exp": now() + 600});
    let token = id_token(Signing::Es256(&ec), "ec-1", &claims("jane", "acme"));
    let user = eventually(Duration::from_secs(20), "the issuer's keys to be fetched", || whoami(&s, &token).ok());
    assert_eq!(user["username"], "ext:jane", "{user}");
    assert_eq!(user["uid"], "jane", "{user}");
    assert_eq!(user["groups"], json!(["acme:admin", "system:authenticated"]), "{user}");
    assert_eq!(user["extra"]["example.com/tenant"], json!(["acme"]), "{user}");
    for (what, token) in [
        ("another tenant", id_token(Signing::Es256(&ec), "ec-1", &claims("jane", "globex"))),
        ("a system user", id_token(Signing::Es256(&ec), "ec-1", &claims("system:admin", "acme"))),
    ] {
        assert_eq!(bearer(&s, &token, "GET", "/api", None).0, 401, "{what}");
    }
    let r = review(&s, &id_token(Signing::Es256(&ec), "ec-1", &claims("jane", "globex")), &[]);
    assert!(r["error"].as_str().is_some_and(|e| e.contains("only acme's users")), "{r}");

    // With the --oidc-* flags, or a field upstream refuses: the server does not start.
    let log = server_refuses(&[
        &format!("--authentication-config={}", path.display()),
        "--oidc-issuer-url=https://127.0.0.1:1",
        "--oidc-client-id=k1s",
    ]);
    assert!(log.contains("--authentication-config and the --oidc-* flags are mutually exclusive"), "{log}");
    std::fs::write(&path, config.replace("expression: '\"ext:\" + claims.sub'", "claim: sub")).expect("write");
    let log = server_refuses(&[&format!("--authentication-config={}", path.display())]);
    assert!(
        log.contains("jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set"),
        "{log}"
    );
}
