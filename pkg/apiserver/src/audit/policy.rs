//! The audit policy (`audit.k8s.io/v1` `Policy`, upstream's `pkg/audit/policy`): rules matched
//! in order, the first match deciding a request's level, the stages it omits and whether
//! `managedFields` are dropped from the objects it records. No rule matching is level `None`.
//!
//! The file is read once at start. A value of the wrong type, an unknown level or stage, a rule
//! naming both resources and non-resource URLs, or a policy without rules is an error naming
//! the key; unknown keys are ignored with a warning, as upstream's lenient decoding does.

use crate::auth::UserInfo;
use crate::request::RequestInfo;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How much of a request is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    /// Who did what to which object, and how it ended; no bodies.
    Metadata,
    /// Metadata and the request's object.
    Request,
    /// Request and the response's object.
    RequestResponse,
}

impl Level {
    pub const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];

    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// When in a request's handling an event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// As soon as the request is received (after authentication), before it is handled.
    RequestReceived,
    /// Once the response's head is sent: long-running requests only (watch, exec, logs, proxy).
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// The handler panicked.
    Panic,
}

impl Stage {
    pub const NAMES: [&'static str; 4] = ["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"];

    pub fn parse(s: &str) -> Option<Stage> {
        Some(match s {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// A set of stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    pub fn with(self, s: Stage) -> Stages {
        Stages(self.0 | 1 << s as u8)
    }
    pub fn contains(self, s: Stage) -> bool {
        self.0 & (1 << s as u8) != 0
    }
    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

/// What the policy decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestConfig {
    pub level: Level,
    /// Stages written for no event.
    pub omit_stages: Stages,
    /// Whether `metadata.managedFields` are dropped from the recorded objects.
    pub omit_managed_fields: bool,
}

/// Resources of one API group a rule names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct GroupResources {
    group: String,
    /// `pods`, `pods/log`, `*`, `pods/*`, `*/scale`; empty: all of the group's.
    resources: Vec<String>,
    /// Empty: any name.
    resource_names: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    /// The rule's own and the policy's.
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

/// A loaded policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("audit policy file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("audit policy file {}: not YAML or JSON: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("audit policy file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// What the request looks like to the rules (upstream's authorizer attributes).
struct Request<'a> {
    user: Option<&'a UserInfo>,
    info: &'a RequestInfo,
}

impl Policy {
    /// Reads and checks the policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| PolicyError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text).map_err(|e| match e {
            ParseError::Syntax(message) => PolicyError::Syntax { path: path.to_path_buf(), message },
            ParseError::Invalid(message) => PolicyError::Invalid { path: path.to_path_buf(), message },
        })
    }

    /// Parses a policy document (YAML or JSON).
    pub(crate) fn parse(text: &str) -> Result<Policy, ParseError> {
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| ParseError::Syntax(e.to_string()))?;
        let Value::Object(doc) = doc else {
            return Err(ParseError::Invalid(format!("expected a Policy object, found {}", describe(&doc))));
        };
        let mut unknown = Vec::new();
        let av = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        if av != "audit.k8s.io/v1" || kind != "Policy" {
            return Err(ParseError::Invalid(format!(
                "apiVersion {av:?}, kind {kind:?}: expected apiVersion audit.k8s.io/v1 and kind Policy"
            )));
        }
        let omit_stages = stages(doc.get("omitStages"), "omitStages")?;
        let omit_managed_fields = boolean(doc.get("omitManagedFields"), "omitManagedFields")?.unwrap_or(false);
        let mut rules = Vec::new();
        for (i, r) in list(doc.get("rules"), "rules")?.iter().enumerate() {
            rules.push(rule(r, &format!("rules[{i}]"), omit_stages, &mut unknown)?);
        }
        for k in doc.keys() {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "rules" | "omitStages" | "omitManagedFields")
            {
                unknown.push(k.clone());
            }
        }
        if rules.is_empty() {
            return Err(ParseError::Invalid("rules: Required value: a policy needs at least one rule".into()));
        }
        if !unknown.is_empty() {
            tracing::warn!(fields = ?unknown, "audit policy: unknown fields ignored");
        }
        Ok(Policy { rules, omit_stages, omit_managed_fields })
    }

    /// The level, omitted stages and managed-fields choice for a request by `user` (`None`: one
    /// that failed authentication).
    pub fn evaluate(&self, user: Option<&UserInfo>, info: &RequestInfo) -> RequestConfig {
        let req = Request { user, info };
        for r in &self.rules {
            if r.matches(&req) {
                return RequestConfig {
                    level: r.level,
                    omit_stages: r.omit_stages,
                    omit_managed_fields: r.omit_managed_fields.unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestConfig {
            level: Level::None,
            omit_stages: self.omit_stages,
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

#[derive(Debug)]
pub(crate) enum ParseError {
    Syntax(String),
    Invalid(String),
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a map".into(),
    }
}

fn wrong(path: &str, expected: &str, v: &Value) -> ParseError {
    ParseError::Invalid(format!("{path}: expected {expected}, found {}", describe(v)))
}

fn list<'a>(v: Option<&'a Value>, path: &str) -> Result<&'a [Value], ParseError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(wrong(path, "a list", other)),
    }
}

fn strings(v: Option<&Value>, path: &str) -> Result<Vec<String>, ParseError> {
    list(v, path)?
        .iter()
        .enumerate()
        .map(|(i, s)| s.as_str().map(str::to_string).ok_or_else(|| wrong(&format!("{path}[{i}]"), "a string", s)))
        .collect()
}

fn string(v: Option<&Value>, path: &str) -> Result<Option<String>, ParseError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(wrong(path, "a string", other)),
    }
}

fn boolean(v: Option<&Value>, path: &str) -> Result<Option<bool>, ParseError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong(path, "true or false", other)),
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ParseError> {
    v.as_object().ok_or_else(|| wrong(path, "a map", v))
}

fn stages(v: Option<&Value>, path: &str) -> Result<Stages, ParseError> {
    let mut out = Stages::default();
    for (i, s) in strings(v, path)?.iter().enumerate() {
        let stage = Stage::parse(s).ok_or_else(|| {
            ParseError::Invalid(format!(
                "{path}[{i}]: Invalid value: {s:?}: allowed stages are {}",
                Stage::NAMES.join(",")
            ))
        })?;
        out = out.with(stage);
    }
    Ok(out)
}

fn rule(v: &Value, path: &str, policy_omits: Stages, unknown: &mut Vec<String>) -> Result<Rule, ParseError> {
    let m = object(v, path)?;
    let level = match string(m.get("level"), &format!("{path}.level"))? {
        None => return Err(ParseError::Invalid(format!("{path}.level: Required value"))),
        Some(l) => Level::parse(&l).ok_or_else(|| {
            let supported: Vec<String> = Level::NAMES.iter().map(|n| format!("{n:?}")).collect();
            ParseError::Invalid(format!(
                "{path}.level: Unsupported value: {l:?}: supported values: {}",
                supported.join(", ")
            ))
        })?,
    };
    let non_resource_urls = strings(m.get("nonResourceURLs"), &format!("{path}.nonResourceURLs"))?;
    for (i, url) in non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        let at = format!("{path}.nonResourceURLs[{i}]");
        if !url.starts_with('/') {
            return Err(ParseError::Invalid(format!(
                "{at}: Invalid value: {url:?}: non-resource URL rules must begin with a '/' character"
            )));
        }
        if url[..url.len() - 1].contains('*') {
            return Err(ParseError::Invalid(format!(
                "{at}: Invalid value: {url:?}: non-resource URL wildcards '*' must be the final character of the rule"
            )));
        }
    }
    let mut resources = Vec::new();
    for (i, gr) in list(m.get("resources"), &format!("{path}.resources"))?.iter().enumerate() {
        let at = format!("{path}.resources[{i}]");
        let g = object(gr, &at)?;
        let group = string(g.get("group"), &format!("{at}.group"))?.unwrap_or_default();
        if !group.is_empty() && !is_dns_subdomain(&group) {
            return Err(ParseError::Invalid(format!(
                "{path}.resources.group: Invalid value: {group:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            )));
        }
        let names = strings(g.get("resourceNames"), &format!("{at}.resourceNames"))?;
        let res = strings(g.get("resources"), &format!("{at}.resources"))?;
        if !names.is_empty() && res.is_empty() {
            return Err(ParseError::Invalid(format!(
                "{path}.resources.resourceNames: Invalid value: {names:?}: using resourceNames requires at least one resource"
            )));
        }
        unknown.extend(
            g.keys()
                .filter(|k| !matches!(k.as_str(), "group" | "resources" | "resourceNames"))
                .map(|k| format!("{at}.{k}")),
        );
        resources.push(GroupResources { group, resources: res, resource_names: names });
    }
    let namespaces = strings(m.get("namespaces"), &format!("{path}.namespaces"))?;
    if !non_resource_urls.is_empty() && (!resources.is_empty() || !namespaces.is_empty()) {
        return Err(ParseError::Invalid(format!(
            "{path}.nonResourceURLs: Invalid value: {non_resource_urls:?}: rules cannot apply to both regular resources and non-resource URLs"
        )));
    }
    unknown.extend(
        m.keys()
            .filter(|k| {
                !matches!(
                    k.as_str(),
                    "level"
                        | "users"
                        | "userGroups"
                        | "verbs"
                        | "resources"
                        | "namespaces"
                        | "nonResourceURLs"
                        | "omitStages"
                        | "omitManagedFields"
                )
            })
            .map(|k| format!("{path}.{k}")),
    );
    Ok(Rule {
        level,
        users: strings(m.get("users"), &format!("{path}.users"))?,
        user_groups: strings(m.get("userGroups"), &format!("{path}.userGroups"))?,
        verbs: strings(m.get("verbs"), &format!("{path}.verbs"))?,
        resources,
        namespaces,
        non_resource_urls,
        omit_stages: stages(m.get("omitStages"), &format!("{path}.omitStages"))?.union(policy_omits),
        omit_managed_fields: boolean(m.get("omitManagedFields"), &format!("{path}.omitManagedFields"))?,
    })
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn has(list: &[String], s: &str) -> bool {
    list.iter().any(|x| x == s)
}

impl Rule {
    fn matches(&self, r: &Request<'_>) -> bool {
        if !self.users.is_empty() && !r.user.is_some_and(|u| has(&self.users, &u.name)) {
            return false;
        }
        if !self.user_groups.is_empty() && !r.user.is_some_and(|u| u.groups.iter().any(|g| has(&self.user_groups, g))) {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, r.info.verb.as_str()) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(r.info);
        }
        if !self.non_resource_urls.is_empty() {
            return !r.info.is_resource && self.non_resource_urls.iter().any(|spec| path_matches(&r.info.path, spec));
        }
        true
    }

    fn matches_resource(&self, info: &RequestInfo) -> bool {
        if !info.is_resource {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, namespace_of(info)) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let resource = info.resource.as_str();
        let sub = info.subresource_name().unwrap_or("");
        let name = info.name.as_deref().unwrap_or("");
        self.resources.iter().filter(|gr| gr.group == info.group).any(|gr| {
            gr.resources.is_empty()
                || gr.resources.iter().any(|spec| {
                    (gr.resource_names.is_empty() || has(&gr.resource_names, name))
                        && resource_matches(spec, resource, sub)
                })
        })
    }
}

/// Upstream's matching: `pods` (the resource itself), `pods/log`, `*` (anything), `*/log` (that
/// subresource of any resource), `pods/*` (pods and all of their subresources).
fn resource_matches(spec: &str, resource: &str, sub: &str) -> bool {
    let combined = match spec.split_once('/') {
        None => sub.is_empty() && spec == resource,
        Some((r, s)) => !sub.is_empty() && r == resource && s == sub,
    };
    combined
        || spec == "*"
        || (!sub.is_empty() && spec.strip_prefix("*/") == Some(sub))
        || spec.strip_suffix("/*") == Some(resource)
}

/// The namespace a request is in as upstream's request info gives it: a namespace's own
/// requests (`/api/v1/namespaces/foo`) are in it; cluster-scoped ones in `""`.
pub(crate) fn namespace_of(info: &RequestInfo) -> &str {
    match &info.namespace {
        Some(ns) => ns,
        None if info.resource == "namespaces" && info.group.is_empty() => info.name.as_deref().unwrap_or(""),
        None => "",
    }
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*" || spec == path || spec.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;

    fn info(method: http::Method, path: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, &Query::parse(None))
    }

    fn level(p: &Policy, user: &UserInfo, method: http::Method, path: &str) -> Level {
        p.evaluate(Some(user), &info(method, path)).level
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  resources: [{group: "", resources: [events]}]
- level: Metadata
  resources: [{group: "", resources: [secrets, configmaps/status]}]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps], resourceNames: [watched]}]
  omitStages: [ResponseStarted]
- level: Request
  verbs: [create, update]
  resources: [{group: "", resources: ["pods/*"]}, {group: apps}]
- level: Request
  namespaces: [""]
  resources: [{group: "", resources: ["*/status"]}]
- level: None
  nonResourceURLs: ["/healthz*", /version]
- level: Metadata
  userGroups: [system:authenticated]
  omitManagedFields: true
"#;

    #[test]
    fn the_first_matching_rule_decides_as_upstreams_checker() {
        let p = Policy::parse(POLICY).expect("policy");
        let alice = UserInfo::new("alice", &["system:authenticated"]);
        let proxy = UserInfo::new("system:kube-proxy", &["system:authenticated"]);
        let nobody = UserInfo::new("nobody", &[]);
        use http::Method as M;
        assert_eq!(level(&p, &proxy, M::GET, "/api/v1/namespaces/a/secrets/s"), Level::None);
        assert_eq!(level(&p, &alice, M::GET, "/api/v1/namespaces/a/secrets/s"), Level::Metadata);
        assert_eq!(level(&p, &alice, M::POST, "/api/v1/namespaces/a/events"), Level::None);
        assert_eq!(level(&p, &alice, M::PUT, "/api/v1/namespaces/a/configmaps/c/status"), Level::Metadata);
        assert_eq!(level(&p, &alice, M::GET, "/api/v1/namespaces/a/configmaps/watched"), Level::RequestResponse);
        assert_eq!(level(&p, &alice, M::GET, "/api/v1/namespaces/a/configmaps/other"), Level::Metadata);
        // `pods/*`: pods and every subresource of pods (upstream's checker matches both).
        assert_eq!(level(&p, &nobody, M::POST, "/api/v1/namespaces/a/pods/p/eviction"), Level::Request);
        assert_eq!(level(&p, &nobody, M::POST, "/api/v1/namespaces/a/pods"), Level::Request);
        assert_eq!(level(&p, &nobody, M::GET, "/api/v1/namespaces/a/pods"), Level::None);
        // A group without resources: all of it.
        assert_eq!(level(&p, &nobody, M::PUT, "/apis/apps/v1/namespaces/a/deployments/d/scale"), Level::Request);
        assert_eq!(level(&p, &nobody, M::GET, "/apis/apps/v1/namespaces/a/deployments/d"), Level::None);
        // `""` is the cluster-scoped namespace; `*/status` any resource's status.
        assert_eq!(level(&p, &nobody, M::PUT, "/api/v1/nodes/n/status"), Level::Request);
        assert_eq!(level(&p, &nobody, M::PUT, "/api/v1/namespaces/a/pods/p/status"), Level::Request);
        assert_eq!(level(&p, &nobody, M::PATCH, "/api/v1/namespaces/a/services/s/status"), Level::None);
        // A namespace's own requests are in it.
        assert_eq!(level(&p, &nobody, M::PUT, "/api/v1/namespaces/a/status"), Level::None);
        // Non-resource URLs with a trailing `*`.
        assert_eq!(level(&p, &alice, M::GET, "/healthz/etcd"), Level::None);
        assert_eq!(level(&p, &alice, M::GET, "/version"), Level::None);
        assert_eq!(level(&p, &alice, M::GET, "/versions"), Level::Metadata);
        // A user that failed authentication matches no user or group rule.
        assert_eq!(p.evaluate(None, &info(M::GET, "/api")).level, Level::None);
    }

    #[test]
    fn omitted_stages_join_the_policys_and_managed_fields_follow_the_rule() {
        let p = Policy::parse(POLICY).expect("policy");
        let alice = UserInfo::new("alice", &["system:authenticated"]);
        let c = p.evaluate(Some(&alice), &info(http::Method::GET, "/api/v1/namespaces/a/configmaps/watched"));
        assert!(c.omit_stages.contains(Stage::RequestReceived) && c.omit_stages.contains(Stage::ResponseStarted));
        assert!(!c.omit_stages.contains(Stage::ResponseComplete));
        assert!(!c.omit_managed_fields);
        let c = p.evaluate(Some(&alice), &info(http::Method::GET, "/apis"));
        assert!(c.omit_managed_fields && c.omit_stages.contains(Stage::RequestReceived));
    }

    #[test]
    fn malformed_policies_name_the_key_and_what_was_expected() {
        let bad = |body: &str| match Policy::parse(&format!("apiVersion: audit.k8s.io/v1\nkind: Policy\n{body}")) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("{body}: {other:?}"),
        };
        assert_eq!(
            bad("rules:\n- level: Everything"),
            "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\""
        );
        assert_eq!(bad("rules:\n- users: [a]"), "rules[0].level: Required value");
        assert_eq!(bad("rules: {level: None}"), "rules: expected a list, found a map");
        assert_eq!(
            bad("rules:\n- level: None\n  verbs: get"),
            "rules[0].verbs: expected a list, found the string \"get\""
        );
        assert_eq!(
            bad("rules:\n- level: None\n  users: [1]"),
            "rules[0].users[0]: expected a string, found the number 1"
        );
        assert!(bad("omitStages: [Started]\nrules: [{level: None}]")
            .starts_with("omitStages[0]: Invalid value: \"Started\""));
        assert!(bad("rules:\n- level: None\n  nonResourceURLs: [healthz]").contains("must begin with a '/'"));
        assert!(bad("rules:\n- level: None\n  nonResourceURLs: ['/a*b']").contains("must be the final character"));
        assert!(
            bad("rules:\n- level: None\n  nonResourceURLs: [/a]\n  namespaces: [x]").contains("cannot apply to both")
        );
        assert!(bad("rules:\n- level: None\n  resources: [{resourceNames: [x]}]")
            .contains("requires at least one resource"));
        assert!(bad("rules: []").starts_with("rules: Required value"));
        assert!(bad("rules:\n- level: None\n  omitManagedFields: yes please")
            .starts_with("rules[0].omitManagedFields: expected true or false"));
        match Policy::parse("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]") {
            Err(ParseError::Invalid(m)) => assert!(m.contains("expected apiVersion audit.k8s.io/v1"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Policy::parse("rules: [\n"), Err(ParseError::Syntax(_))));
    }

    #[test]
    fn unknown_keys_are_ignored_as_upstreams_lenient_decoding() {
        let p = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  colour: blue\n")
            .expect("lenient");
        assert_eq!(p.evaluate(None, &info(http::Method::GET, "/api")).level, Level::Metadata);
    }
}
