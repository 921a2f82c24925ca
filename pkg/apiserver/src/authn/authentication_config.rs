//! `--authentication-config`: upstream's structured `AuthenticationConfiguration`
//! (apiserver.config.k8s.io/v1, also v1beta1 and v1alpha1), its `jwt` issuers only. Each
//! issuer (`url`, `discoveryURL`, `certificateAuthority`, `audiences`, `audienceMatchPolicy`)
//! becomes one OIDC authenticator ([`super::oidc`]), its `claimValidationRules`,
//! `claimMappings` (`username`, `groups`, `uid` by claim and prefix or by CEL expression over
//! `claims`; `extra` by expression) and `userValidationRules` (CEL over `user`) checked as
//! upstream checks them. The file is read once, at start; anything upstream's validation
//! refuses, an unknown field, `anonymous` or `egressSelectorType` stops the server naming the
//! file and the field.

use super::oidc::{self, ClaimRule, Mapping, Settings};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AuthenticationConfigError {
    #[error("--authentication-config {path}: reading it")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("--authentication-config {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

const API_VERSIONS: &[&str] =
    &["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    jwt: Vec<Jwt>,
    anonymous: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Jwt {
    issuer: Issuer,
    #[serde(default)]
    claim_validation_rules: Vec<ClaimValidationRule>,
    claim_mappings: ClaimMappings,
    #[serde(default)]
    user_validation_rules: Vec<UserValidationRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Issuer {
    #[serde(default)]
    url: String,
    #[serde(rename = "discoveryURL")]
    discovery_url: Option<String>,
    certificate_authority: Option<String>,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    audience_match_policy: String,
    egress_selector_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimValidationRule {
    claim: Option<String>,
    required_value: Option<String>,
    expression: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimMappings {
    username: PrefixedClaimOrExpression,
    groups: Option<PrefixedClaimOrExpression>,
    uid: Option<ClaimOrExpression>,
    #[serde(default)]
    extra: Vec<ExtraMapping>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PrefixedClaimOrExpression {
    claim: Option<String>,
    prefix: Option<String>,
    expression: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimOrExpression {
    claim: Option<String>,
    expression: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExtraMapping {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value_expression: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UserValidationRule {
    #[serde(default)]
    expression: String,
    #[serde(default)]
    message: String,
}

/// Field errors, as upstream lists them (`jwt[0].issuer.url: Invalid value: ...`).
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn add(&mut self, field: &str, message: impl std::fmt::Display) {
        self.0.push(format!("{field}: {message}"));
    }
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

fn compile(errs: &mut Errors, field: &str, expr: &str, var: &str) -> Option<k1s_cel::Program> {
    match k1s_cel::Program::compile(expr, &[var]) {
        Ok(p) => Some(p),
        Err(e) => {
            errs.add(field, format!("Invalid value: {expr:?}: {e}"));
            None
        }
    }
}

/// An https URL without query or fragment.
fn check_url(errs: &mut Errors, field: &str, url: &str) {
    match url.parse::<http::Uri>() {
        Ok(u) if u.scheme_str() == Some("https") && u.host().is_some_and(|h| !h.is_empty()) => {
            if u.query().is_some() || url.contains('#') {
                errs.add(field, format!("Invalid value: {url:?}: URL must not contain a query or fragment"));
            }
        }
        _ => errs.add(field, format!("Invalid value: {url:?}: URL scheme must be https")),
    }
}

/// Whether the CEL source reads `claims.<name>` (a text match on the field access).
fn reads_claim(expr: &str, name: &str) -> bool {
    let needle = format!("claims.{name}");
    expr.match_indices(&needle).any(|(i, _)| {
        let after = expr[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// `--authentication-config`'s JWT issuers, checked.
pub fn load(path: &Path) -> Result<Vec<Settings>, AuthenticationConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| AuthenticationConfigError::Read { path: path.into(), source })?;
    parse(path, &text)
}

pub fn parse(path: &Path, text: &str) -> Result<Vec<Settings>, AuthenticationConfigError> {
    let invalid = |message: String| AuthenticationConfigError::Invalid { path: path.into(), message };
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| invalid(format!("not YAML: {e}")))?;
    let file: File = serde_json::from_value(value).map_err(|e| invalid(format!("strict decoding error: {e}")))?;
    if !API_VERSIONS.contains(&file.api_version.as_str()) || file.kind != "AuthenticationConfiguration" {
        return Err(invalid(format!(
            "expected apiVersion apiserver.config.k8s.io/v1 (or v1beta1, v1alpha1) and kind AuthenticationConfiguration, got {:?} {:?}",
            file.api_version, file.kind
        )));
    }
    let mut errs = Errors::default();
    if file.anonymous.is_some() {
        errs.add("anonymous", "Forbidden: not supported by k1s");
    }
    let mut out = Vec::new();
    let mut urls: Vec<&str> = Vec::new();
    let mut discovery_urls: Vec<&str> = Vec::new();
    for (i, jwt) in file.jwt.iter().enumerate() {
        let at = |f: &str| format!("jwt[{i}].{f}");
        let before = errs.0.len();
        let is = &jwt.issuer;
        if is.url.is_empty() {
            errs.add(&at("issuer.url"), "Required value");
        } else {
            check_url(&mut errs, &at("issuer.url"), &is.url);
            if urls.contains(&is.url.as_str()) {
                errs.add(&at("issuer.url"), format!("Duplicate value: {:?}", is.url));
            }
            urls.push(&is.url);
        }
        if let Some(d) = non_empty(&is.discovery_url) {
            check_url(&mut errs, &at("issuer.discoveryURL"), d);
            if d.trim_end_matches('/') == is.url.trim_end_matches('/') {
                errs.add(
                    &at("issuer.discoveryURL"),
                    format!("Invalid value: {d:?}: discoveryURL must be different from URL"),
                );
            }
            if discovery_urls.contains(&d) {
                errs.add(&at("issuer.discoveryURL"), format!("Duplicate value: {d:?}"));
            }
            discovery_urls.push(d);
        }
        if let Some(ca) = non_empty(&is.certificate_authority) {
            if let Err(e) = oidc::check_ca(ca) {
                errs.add(&at("issuer.certificateAuthority"), format!("Invalid value: \"<omitted>\": {e}"));
            }
        }
        if is.egress_selector_type.is_some() {
            errs.add(&at("issuer.egressSelectorType"), "Forbidden: not supported by k1s");
        }
        if is.audiences.is_empty() {
            errs.add(&at("issuer.audiences"), "Required value: at least one issuer.audiences is required");
        }
        for (j, a) in is.audiences.iter().enumerate() {
            if a.is_empty() {
                errs.add(&at(&format!("issuer.audiences[{j}]")), "Required value");
            } else if is.audiences[..j].contains(a) {
                errs.add(&at(&format!("issuer.audiences[{j}]")), format!("Duplicate value: {a:?}"));
            }
        }
        match (is.audiences.len(), is.audience_match_policy.as_str()) {
            (_, "MatchAny") | (0 | 1, "") => {}
            (1, other) => errs.add(
                &at("issuer.audienceMatchPolicy"),
                format!("Invalid value: {other:?}: audienceMatchPolicy must be empty or MatchAny for single audience"),
            ),
            (_, other) => errs.add(
                &at("issuer.audienceMatchPolicy"),
                format!("Invalid value: {other:?}: audienceMatchPolicy must be MatchAny for multiple audiences"),
            ),
        }
        let mut claim_rules = Vec::new();
        let mut seen_claims: Vec<&str> = Vec::new();
        for (j, r) in jwt.claim_validation_rules.iter().enumerate() {
            let f = at(&format!("claimValidationRules[{j}]"));
            match (non_empty(&r.claim), non_empty(&r.expression)) {
                (Some(_), Some(_)) => errs.add(&f, "Invalid value: claim and expression can't both be set"),
                (None, None) => errs.add(&f, "Required value: claim or expression is required"),
                (Some(c), None) => {
                    if r.message.is_some() {
                        errs.add(&format!("{f}.message"), "Invalid value: message can't be set when claim is set");
                    }
                    if seen_claims.contains(&c) {
                        errs.add(&format!("{f}.claim"), format!("Duplicate value: {c:?}"));
                    }
                    seen_claims.push(c);
                    claim_rules.push(ClaimRule::Required {
                        claim: c.to_string(),
                        value: r.required_value.clone().unwrap_or_default(),
                    });
                }
                (None, Some(e)) => {
                    if r.required_value.is_some() {
                        errs.add(
                            &format!("{f}.requiredValue"),
                            "Invalid value: requiredValue can't be set when expression is set",
                        );
                    }
                    if let Some(program) = compile(&mut errs, &format!("{f}.expression"), e, "claims") {
                        let message = r.message.clone().unwrap_or_else(|| format!("expression {e:?} failed"));
                        claim_rules.push(ClaimRule::Expression { program, message });
                    }
                }
            }
        }
        let cm = &jwt.claim_mappings;
        let prefixed = |m: &PrefixedClaimOrExpression, f: &str, required: bool, errs: &mut Errors| -> Option<Mapping> {
            match (non_empty(&m.claim), non_empty(&m.expression)) {
                (Some(_), Some(_)) => {
                    errs.add(f, "Invalid value: claim and expression can't both be set");
                    None
                }
                (None, None) => {
                    if required {
                        errs.add(f, "Required value: claim or expression is required");
                    }
                    None
                }
                (Some(claim), None) => match &m.prefix {
                    None => {
                        errs.add(&format!("{f}.prefix"), "Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing");
                        None
                    }
                    Some(prefix) => Some(Mapping::Claim { claim: claim.to_string(), prefix: prefix.clone() }),
                },
                (None, Some(e)) => {
                    if m.prefix.is_some() {
                        errs.add(&format!("{f}.prefix"), "Invalid value: prefix can't be set when expression is set");
                    }
                    compile(errs, &format!("{f}.expression"), e, "claims").map(Mapping::Expression)
                }
            }
        };
        let username = prefixed(&cm.username, &at("claimMappings.username"), true, &mut errs);
        let groups = cm.groups.as_ref().and_then(|g| prefixed(g, &at("claimMappings.groups"), false, &mut errs));
        let uid = match &cm.uid {
            None => None,
            Some(u) => match (non_empty(&u.claim), non_empty(&u.expression)) {
                (Some(_), Some(_)) => {
                    errs.add(&at("claimMappings.uid"), "Invalid value: claim and expression can't both be set");
                    None
                }
                (None, None) => None,
                (Some(c), None) => Some(Mapping::Claim { claim: c.to_string(), prefix: String::new() }),
                (None, Some(e)) => {
                    compile(&mut errs, &at("claimMappings.uid.expression"), e, "claims").map(Mapping::Expression)
                }
            },
        };
        let mut extra = Vec::new();
        for (j, x) in cm.extra.iter().enumerate() {
            let f = at(&format!("claimMappings.extra[{j}]"));
            if x.key.is_empty() {
                errs.add(&format!("{f}.key"), "Required value");
            } else if !x.key.contains('/') || x.key.to_lowercase() != x.key {
                errs.add(
                    &format!("{f}.key"),
                    format!(
                        "Invalid value: {:?}: must be a domain-prefixed path (such as \"acme.io/foo\") and lowercase",
                        x.key
                    ),
                );
            } else {
                let domain = x.key.split('/').next().unwrap_or_default();
                let reserved =
                    ["kubernetes.io", "k8s.io"].iter().any(|r| domain == *r || domain.ends_with(&format!(".{r}")));
                if reserved {
                    errs.add(&format!("{f}.key"), format!("Invalid value: {:?}: k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use", x.key));
                }
                if cm.extra[..j].iter().any(|o| o.key == x.key) {
                    errs.add(&format!("{f}.key"), format!("Duplicate value: {:?}", x.key));
                }
            }
            if x.value_expression.is_empty() {
                errs.add(&format!("{f}.valueExpression"), "Required value: valueExpression is required");
            } else if let Some(p) = compile(&mut errs, &format!("{f}.valueExpression"), &x.value_expression, "claims") {
                extra.push((x.key.clone(), p));
            }
        }
        // An expression username from `claims.email` must also look at `email_verified`.
        if let Some(e) = non_empty(&cm.username.expression) {
            let checks_verified = reads_claim(e, "email_verified")
                || cm.extra.iter().any(|x| reads_claim(&x.value_expression, "email_verified"))
                || jwt
                    .claim_validation_rules
                    .iter()
                    .filter_map(|r| r.expression.as_deref())
                    .any(|r| reads_claim(r, "email_verified"));
            if reads_claim(e, "email") && !checks_verified {
                errs.add(&at("claimMappings.username.expression"), format!("Invalid value: {e:?}: claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression"));
            }
        }
        let mut user_rules = Vec::new();
        for (j, r) in jwt.user_validation_rules.iter().enumerate() {
            let f = at(&format!("userValidationRules[{j}].expression"));
            if r.expression.is_empty() {
                errs.add(&f, "Required value: expression is required");
            } else if let Some(p) = compile(&mut errs, &f, &r.expression, "user") {
                let message = if r.message.is_empty() {
                    format!("expression {:?} failed", r.expression)
                } else {
                    r.message.clone()
                };
                user_rules.push((p, message));
            }
        }
        if errs.0.len() != before {
            continue;
        }
        let Some(username) = username else { continue };
        out.push(Settings {
            issuer_url: is.url.clone(),
            discovery_url: non_empty(&is.discovery_url).map(str::to_string),
            audiences: is.audiences.clone(),
            username,
            groups,
            uid,
            extra,
            claim_rules,
            user_rules,
            ca_pem: non_empty(&is.certificate_authority).map(str::to_string),
            signing_algs: oidc::supported_algorithms(),
        });
    }
    if !errs.0.is_empty() {
        return Err(invalid(errs.0.join(", ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Vec<Settings>, String> {
        parse(Path::new("/etc/k1s/authn.yaml"), text).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example
    audiences: [k1s, other]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: 'claims.exp - claims.iat <= 86400'
    message: tokens may last a day at most
  claimMappings:
    username:
      expression: '"oidc:" + claims.sub'
    groups:
      claim: groups
      prefix: "oidc:"
    uid:
      claim: sub
    extra:
    - key: example.com/tenant
      valueExpression: claims.tenant
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:system:')"
    message: no system users
- issuer:
    url: https://second.example
    discoveryURL: https://discovery.example/.well-known/openid-configuration
    audiences: [k1s]
  claimMappings:
    username:
      claim: email
      prefix: ""
"#;

    #[test]
    fn a_valid_configuration_gives_one_authenticator_per_issuer() {
        let issuers = parse_str(GOOD).expect("valid");
        assert_eq!(issuers.len(), 2);
        assert_eq!(issuers[0].audiences, ["k1s", "other"]);
        assert_eq!(issuers[0].claim_rules.len(), 2);
        assert_eq!(issuers[0].extra.len(), 1);
        assert!(matches!(issuers[0].username, Mapping::Expression(_)));
        assert_eq!(
            issuers[1].discovery_url.as_deref(),
            Some("https://discovery.example/.well-known/openid-configuration")
        );
        assert!(issuers[1].signing_algs.contains(&"ES256".to_string()));
    }

    #[test]
    fn mappings_and_rules_apply_to_the_claims() {
        let issuers = parse_str(GOOD).expect("valid");
        let s = &issuers[0];
        let now = 1_700_000_000;
        let claims = serde_json::json!({"iss": "https://issuer.example", "aud": "other", "sub": "jane", "iat": now,
                                        "exp": now + 3600, "hd": "example.com", "groups": ["dev"], "tenant": "t1"});
        let user = oidc::tests::user(s, &claims, now).expect("valid");
        assert_eq!(user.name, "oidc:jane");
        assert_eq!(user.uid, "jane");
        assert_eq!(user.groups, ["oidc:dev"]);
        assert_eq!(user.extra.get("example.com/tenant"), Some(&vec!["t1".to_string()]));
        let mut long = claims.clone();
        long["exp"] = serde_json::json!(now + 2 * 86400);
        assert!(oidc::tests::user(s, &long, now).expect_err("too long").ends_with("tokens may last a day at most"));
        let mut system = claims.clone();
        system["sub"] = serde_json::json!("system:admin");
        assert!(oidc::tests::user(s, &system, now).expect_err("system user").ends_with("no system users"));
    }

    #[test]
    fn what_upstream_refuses_is_refused_naming_the_field() {
        let err = |text: &str| parse_str(text).expect_err("invalid");
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n";
        let e = err(&format!("{head}jwt:\n- issuer: {{url: http://i.example, audiences: [a]}}\n  claimMappings: {{username: {{claim: sub}}}}\n"));
        assert_eq!(
            e,
            "--authentication-config /etc/k1s/authn.yaml: jwt[0].issuer.url: Invalid value: \"http://i.example\": URL scheme must be https, jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        );
        let e = err(&format!("{head}jwt:\n- issuer: {{url: https://i.example, audiences: [a, b]}}\n  claimMappings: {{username: {{expression: 'claims.email'}}}}\n"));
        assert!(e.contains("audienceMatchPolicy must be MatchAny for multiple audiences"), "{e}");
        assert!(e.contains("claims.email_verified must be used"), "{e}");
        let e = err(&format!("{head}jwt:\n- issuer: {{url: https://i.example, audiences: [a]}}\n  claimMappings: {{username: {{expression: 'claims.sub +'}}}}\n"));
        assert!(e.contains("jwt[0].claimMappings.username.expression: Invalid value"), "{e}");
        let e = err(&format!("{head}jwt:\n- issuer: {{url: https://i.example, audiences: [a], bogus: 1}}\n  claimMappings: {{username: {{claim: sub, prefix: ''}}}}\n"));
        assert!(e.contains("strict decoding error: unknown field `bogus`"), "{e}");
        let e = err(&format!("{head}anonymous: {{enabled: true}}\n"));
        assert!(e.contains("anonymous: Forbidden: not supported by k1s"), "{e}");
        let e = err("apiVersion: v1\nkind: Config\n");
        assert!(e.contains("expected apiVersion apiserver.config.k8s.io/v1"), "{e}");
        let two = format!("{head}jwt:\n- issuer: {{url: https://i.example, audiences: [a]}}\n  claimMappings: {{username: {{claim: sub, prefix: ''}}}}\n- issuer: {{url: https://i.example, audiences: [b]}}\n  claimMappings: {{username: {{claim: sub, prefix: ''}}, extra: [{{key: kubernetes.io/x, valueExpression: claims.x}}]}}\n");
        let e = err(&two);
        assert!(e.contains("jwt[1].issuer.url: Duplicate value: \"https://i.example\""), "{e}");
        assert!(e.contains("reserved for Kubernetes use"), "{e}");
    }
}
