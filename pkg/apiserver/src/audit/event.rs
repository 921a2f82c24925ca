//! One request's audit event (`audit.k8s.io/v1` `Event`) as it is filled in while the request
//! is handled, and its JSON: the fields in upstream's order, `omitempty` as upstream's, objects
//! embedded as the JSON they were sent or answered with (never decoded again).

use super::policy::{Level, RequestConfig, Stage};
use crate::auth::UserInfo;
use crate::request::RequestInfo;
use bytes::Bytes;
use std::net::IpAddr;

/// The longest User-Agent recorded; a longer one is cut and marked (upstream's limit).
const MAX_USER_AGENT: usize = 1024;

/// The object a resource request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectRef {
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub api_group: String,
    pub api_version: String,
    pub resource_version: String,
    pub subresource: String,
}

/// How a request ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseStatus {
    pub code: u16,
    /// The `Status` of a refusal, as sent (its `kind` and `apiVersion` are not recorded).
    pub status: Option<Bytes>,
    /// A message of the server's own (a panic, a failed authentication).
    pub message: Option<String>,
    /// `status` of a status the server makes up (`Failure` for a panic).
    pub outcome: Option<&'static str>,
    /// `reason` of a status the server makes up.
    pub reason: Option<&'static str>,
}

/// An event being filled in.
#[derive(Clone, Debug)]
pub struct Event {
    pub config: RequestConfig,
    pub audit_id: String,
    pub request_uri: String,
    pub verb: String,
    /// The authenticated user (`None` when authentication failed).
    pub user: Option<UserInfo>,
    pub impersonated_user: Option<UserInfo>,
    pub source_ips: Vec<IpAddr>,
    pub user_agent: String,
    pub object_ref: Option<ObjectRef>,
    pub response_status: Option<ResponseStatus>,
    /// The request's object as JSON (Request level and above).
    pub request_object: Option<Bytes>,
    /// The response's object as JSON (RequestResponse level).
    pub response_object: Option<Bytes>,
    pub received: jiff::Timestamp,
    /// Set by authorization and admission; later values for a key already set are dropped, as
    /// upstream drops them.
    pub annotations: Vec<(String, String)>,
}

impl Event {
    /// A new event for a request received at `received`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: RequestConfig,
        audit_id: &str,
        request_uri: &str,
        info: &RequestInfo,
        user: Option<&UserInfo>,
        source_ips: Vec<IpAddr>,
        user_agent: &str,
        received: jiff::Timestamp,
    ) -> Event {
        let object_ref = info.is_resource.then(|| ObjectRef {
            resource: info.resource.clone(),
            namespace: super::policy::namespace_of(info).to_string(),
            name: info.name.clone().unwrap_or_default(),
            api_group: info.group.clone(),
            api_version: info.version.clone(),
            subresource: info.subresource_name().unwrap_or_default().to_string(),
            ..ObjectRef::default()
        });
        let user_agent = if user_agent.len() > MAX_USER_AGENT {
            let mut cut = MAX_USER_AGENT;
            while !user_agent.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}...TRUNCATED", &user_agent[..cut])
        } else {
            user_agent.to_string()
        };
        Event {
            config,
            audit_id: audit_id.to_string(),
            request_uri: request_uri.to_string(),
            verb: info.verb.as_str().to_string(),
            user: user.cloned(),
            impersonated_user: None,
            source_ips,
            user_agent,
            object_ref,
            response_status: None,
            request_object: None,
            response_object: None,
            received,
            annotations: Vec::new(),
        }
    }

    pub fn level(&self) -> Level {
        self.config.level
    }

    /// Adds an annotation unless the key is set already.
    pub fn annotate(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        if self.annotations.iter().any(|(k, _)| *k == key) {
            return;
        }
        self.annotations.push((key, value.into()));
    }

    /// Records the response's code (the first one only, as upstream's response writer does).
    pub fn set_code(&mut self, code: u16) {
        if self.response_status.is_none() {
            self.response_status = Some(ResponseStatus { code, ..ResponseStatus::default() });
        }
    }

    /// The event's JSON line (with its newline) at `stage`, written at `now`.
    pub fn encode(&self, stage: Stage, now: jiff::Timestamp) -> Vec<u8> {
        let mut b = Vec::with_capacity(
            512 + self.request_object.as_ref().map_or(0, Bytes::len)
                + self.response_object.as_ref().map_or(0, Bytes::len),
        );
        b.extend_from_slice(br#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"#);
        string(&mut b, self.config.level.as_str());
        b.extend_from_slice(br#","auditID":"#);
        string(&mut b, &self.audit_id);
        b.extend_from_slice(br#","stage":"#);
        string(&mut b, stage.as_str());
        b.extend_from_slice(br#","requestURI":"#);
        string(&mut b, &self.request_uri);
        b.extend_from_slice(br#","verb":"#);
        string(&mut b, &self.verb);
        b.extend_from_slice(br#","user":"#);
        match &self.user {
            Some(u) => user(&mut b, u),
            None => b.extend_from_slice(b"{}"),
        }
        if let Some(u) = &self.impersonated_user {
            b.extend_from_slice(br#","impersonatedUser":"#);
            user(&mut b, u);
        }
        if !self.source_ips.is_empty() {
            b.extend_from_slice(br#","sourceIPs":["#);
            for (i, ip) in self.source_ips.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                string(&mut b, &ip.to_string());
            }
            b.push(b']');
        }
        if !self.user_agent.is_empty() {
            b.extend_from_slice(br#","userAgent":"#);
            string(&mut b, &self.user_agent);
        }
        if let Some(r) = &self.object_ref {
            b.extend_from_slice(br#","objectRef":{"#);
            let mut first = true;
            for (key, value) in [
                ("resource", &r.resource),
                ("namespace", &r.namespace),
                ("name", &r.name),
                ("uid", &r.uid),
                ("apiGroup", &r.api_group),
                ("apiVersion", &r.api_version),
                ("resourceVersion", &r.resource_version),
                ("subresource", &r.subresource),
            ] {
                if !value.is_empty() {
                    field(&mut b, &mut first, key);
                    string(&mut b, value);
                }
            }
            b.push(b'}');
        }
        if let Some(s) = &self.response_status {
            b.extend_from_slice(br#","responseStatus":"#);
            response_status(&mut b, s);
        }
        if let Some(o) = &self.request_object {
            b.extend_from_slice(br#","requestObject":"#);
            b.extend_from_slice(o);
        }
        if let Some(o) = &self.response_object {
            b.extend_from_slice(br#","responseObject":"#);
            b.extend_from_slice(o);
        }
        b.extend_from_slice(br#","requestReceivedTimestamp":"#);
        string(&mut b, &micro_time(self.received));
        b.extend_from_slice(br#","stageTimestamp":"#);
        // As upstream: the RequestReceived stage is stamped with the time the request arrived.
        let at = if stage == Stage::RequestReceived { self.received } else { now };
        string(&mut b, &micro_time(at));
        if !self.annotations.is_empty() {
            // Go encodes a map with its keys sorted.
            let mut sorted: Vec<&(String, String)> = self.annotations.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            b.extend_from_slice(br#","annotations":{"#);
            let mut first = true;
            for (k, v) in sorted {
                field(&mut b, &mut first, k);
                string(&mut b, v);
            }
            b.push(b'}');
        }
        b.extend_from_slice(b"}\n");
        b
    }
}

/// A JSON string.
fn string(b: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *b, s);
}

/// `"key":`, after a comma unless it is the first of its object.
fn field(b: &mut Vec<u8>, first: &mut bool, key: &str) {
    if !std::mem::take(first) {
        b.push(b',');
    }
    string(b, key);
    b.push(b':');
}

/// authentication/v1 `UserInfo`.
fn user(b: &mut Vec<u8>, u: &UserInfo) {
    b.push(b'{');
    let mut first = true;
    if !u.name.is_empty() {
        field(b, &mut first, "username");
        string(b, &u.name);
    }
    if !u.uid.is_empty() {
        field(b, &mut first, "uid");
        string(b, &u.uid);
    }
    if !u.groups.is_empty() {
        field(b, &mut first, "groups");
        let _ = serde_json::to_writer(&mut *b, &u.groups);
    }
    if !u.extra.is_empty() {
        field(b, &mut first, "extra");
        let _ = serde_json::to_writer(&mut *b, &u.extra);
    }
    b.push(b'}');
}

/// meta/v1 `Status` as upstream records it: no `kind` or `apiVersion`.
fn response_status(b: &mut Vec<u8>, s: &ResponseStatus) {
    if let Some(status) = &s.status {
        let trimmed = status.strip_suffix(b"\n").unwrap_or(status);
        // The server's own Status documents begin with their type (see `ApiError::status`).
        match trimmed.strip_prefix(br#"{"kind":"Status","apiVersion":"v1","#.as_slice()) {
            Some(rest) => {
                b.push(b'{');
                b.extend_from_slice(rest);
            }
            None => b.extend_from_slice(trimmed),
        }
        return;
    }
    b.extend_from_slice(br#"{"metadata":{}"#);
    if let Some(o) = s.outcome {
        b.extend_from_slice(br#","status":"#);
        string(b, o);
    }
    if let Some(m) = &s.message {
        b.extend_from_slice(br#","message":"#);
        string(b, m);
    }
    if let Some(r) = s.reason {
        b.extend_from_slice(br#","reason":"#);
        string(b, r);
    }
    b.extend_from_slice(br#","code":"#);
    b.extend_from_slice(s.code.to_string().as_bytes());
    b.push(b'}');
}

/// meta/v1 `MicroTime`: RFC 3339 in UTC with microseconds.
pub fn micro_time(t: jiff::Timestamp) -> String {
    let t = t.round(jiff::Unit::Microsecond).unwrap_or(t);
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond() / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::policy::Stages;
    use crate::request::Query;
    use serde_json::{json, Value};

    fn config(level: Level) -> RequestConfig {
        RequestConfig { level, omit_stages: Stages::default(), omit_managed_fields: false }
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn an_event_encodes_as_upstreams_json_line() {
        let info = RequestInfo::parse(
            &http::Method::POST,
            "/api/v1/namespaces/ns1/configmaps",
            &Query::parse(Some("fieldManager=kubectl-create")),
        );
        let mut user = UserInfo::new("alice", &["devs", "system:authenticated"]);
        user.extra.insert("scopes".into(), vec!["a\"b".into()]);
        let mut ev = Event::new(
            config(Level::Request),
            "0e7c1b5e-2b54-4a7a-8f8e-7f3a1d2c9b10",
            "/api/v1/namespaces/ns1/configmaps?fieldManager=kubectl-create",
            &info,
            Some(&user),
            vec!["10.0.0.1".parse().expect("ip"), "127.0.0.1".parse().expect("ip")],
            "kubectl/v1.32.0 (linux/amd64) kubernetes/abc",
            at("2026-12-07T10:11:12.123456789Z"),
        );
        ev.request_object = Some(Bytes::from_static(br#"{"kind":"ConfigMap","metadata":{"name":"c"}}"#));
        if let Some(r) = ev.object_ref.as_mut() {
            r.name = "c".into();
        }
        ev.annotate("z.example/last", "1");
        ev.annotate("authorization.k8s.io/decision", "allow");
        ev.annotate("authorization.k8s.io/decision", "forbid");
        ev.set_code(201);
        ev.set_code(500);
        let line = ev.encode(Stage::ResponseComplete, at("2026-12-07T10:11:12.2Z"));
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
        let text = String::from_utf8(line).expect("utf-8");
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            v,
            json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request",
                "auditID": "0e7c1b5e-2b54-4a7a-8f8e-7f3a1d2c9b10", "stage": "ResponseComplete",
                "requestURI": "/api/v1/namespaces/ns1/configmaps?fieldManager=kubectl-create", "verb": "create",
                "user": {"username": "alice", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["a\"b"]}},
                "sourceIPs": ["10.0.0.1", "127.0.0.1"],
                "userAgent": "kubectl/v1.32.0 (linux/amd64) kubernetes/abc",
                "objectRef": {"resource": "configmaps", "namespace": "ns1", "name": "c", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 201},
                "requestObject": {"kind": "ConfigMap", "metadata": {"name": "c"}},
                "requestReceivedTimestamp": "2026-12-07T10:11:12.123457Z",
                "stageTimestamp": "2026-12-07T10:11:12.200000Z",
                "annotations": {"authorization.k8s.io/decision": "allow", "z.example/last": "1"}
            })
        );
        // Upstream's key order.
        let keys: Vec<&str> = v.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "level",
                "auditID",
                "stage",
                "requestURI",
                "verb",
                "user",
                "sourceIPs",
                "userAgent",
                "objectRef",
                "responseStatus",
                "requestObject",
                "requestReceivedTimestamp",
                "stageTimestamp",
                "annotations"
            ]
        );
        // RequestReceived is stamped with the time the request arrived.
        let received: Value =
            serde_json::from_slice(&ev.encode(Stage::RequestReceived, at("2026-12-07T10:11:13Z"))).expect("json");
        assert_eq!(received["stageTimestamp"], received["requestReceivedTimestamp"]);
    }

    #[test]
    fn a_refusals_status_is_recorded_without_its_type() {
        let info = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/ns1/secrets/s", &Query::parse(None));
        let mut ev =
            Event::new(config(Level::Metadata), "id", "/x", &info, None, Vec::new(), "", jiff::Timestamp::now());
        let e = crate::error::ApiError::not_found("", "secrets", "s");
        ev.response_status =
            Some(ResponseStatus { code: 404, status: Some(Bytes::from(e.status_bytes())), ..Default::default() });
        let v: Value =
            serde_json::from_slice(&ev.encode(Stage::ResponseComplete, jiff::Timestamp::now())).expect("json");
        assert_eq!(
            v["responseStatus"],
            json!({"metadata": {}, "status": "Failure", "message": "secrets \"s\" not found", "reason": "NotFound",
                   "details": {"name": "s", "kind": "secrets"}, "code": 404})
        );
        assert_eq!(v["user"], json!({}));
        assert!(v.get("sourceIPs").is_none() && v.get("userAgent").is_none());
        assert_eq!(v["objectRef"], json!({"resource": "secrets", "namespace": "ns1", "name": "s", "apiVersion": "v1"}));
    }

    #[test]
    fn long_user_agents_are_cut_as_upstream() {
        let info = RequestInfo::parse(&http::Method::GET, "/version", &Query::parse(None));
        let ua = "é".repeat(600);
        let ev =
            Event::new(config(Level::Metadata), "id", "/version", &info, None, Vec::new(), &ua, jiff::Timestamp::now());
        assert!(ev.user_agent.ends_with("...TRUNCATED"));
        assert_eq!(ev.user_agent.len(), 1024 + "...TRUNCATED".len());
        assert!(ev.object_ref.is_none(), "non-resource requests name no object");
    }
}
