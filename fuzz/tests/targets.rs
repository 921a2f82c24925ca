//! The fuzz targets: what a client controls, fed to the code that reads it first. Each test runs
//! its seed corpus (`fuzz/corpus/<target>/`, requests taken from k1s's own tests) and its
//! regressions, then mutated inputs for `K1S_FUZZ_SECONDS` (see the `k1s_fuzz` crate docs). A
//! target passes when no input panics, hangs or overflows the stack and the properties each one
//! asserts hold (malformed bodies are 400s, a decoded body reads back as JSON, a printed
//! selector parses back to itself, refusals are client errors, forged tokens never verify,
//! ...); errors are the expected outcome of most inputs.
//!
//! A crash found becomes a named input in `fuzz/regressions/<target>/` (run first, every time)
//! and a unit test next to the fixed code.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use k1s_api::selectors::Selector;
use k1s_apiserver::request::{Query, RequestInfo};
use k1s_fuzz::Target;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Words of the Kubernetes object formats.
const OBJECT_WORDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "env",
    "volumes",
    "volumeMounts",
    "selector",
    "matchLabels",
    "matchExpressions",
    "template",
    "replicas",
    "finalizers",
    "ownerReferences",
    "resourceVersion",
    "uid",
    "generation",
    "managedFields",
    "fieldsV1",
    "f:metadata",
    "k:{\"name\":\"a\"}",
    "v:\"a\"",
    "data",
    "binaryData",
    "stringData",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "100m",
    "1Gi",
    "1e3",
    "0.5",
    "$patch",
    "replace",
    "merge",
    "delete",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "op",
    "path",
    "value",
    "from",
    "add",
    "remove",
    "move",
    "copy",
    "test",
    "/metadata/labels/a",
    "/spec/containers/0",
    "/spec/containers/-",
    "~1",
    "~0",
    "v1",
    "apps/v1",
    "batch/v1",
    "ConfigMap",
    "Pod",
    "Deployment",
    "Service",
    "Secret",
    "Namespace",
    "CustomResourceDefinition",
    "ValidatingAdmissionPolicy",
    "x-kubernetes-validations",
    "openAPIV3Schema",
    "properties",
    "type",
    "object",
    "array",
    "string",
    "integer",
    "IntOrString",
    "null",
    "true",
    "2026-12-07T00:00:00Z",
];

/// YAML's own syntax on top of the object words.
const YAML_WORDS: &[&str] = &[
    "---\n",
    "- ",
    ": ",
    "&a ",
    "*a",
    "<<: *a",
    "!!binary ",
    "!!str ",
    "!!int ",
    "!!map",
    "? ",
    "|\n  ",
    ">-\n  ",
    "%YAML 1.2\n",
    "%TAG ! tag:x:\n",
    "'",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "~",
    "...\n",
    "\t",
    "# c\n",
];

/// The create path of a decoded body, without the store: the kind's strategy decodes it into its
/// type, prepares and validates it, as a POST does.
fn create_path(obj: &Value) -> String {
    let (Some(av), Some(kind)) =
        (obj.get("apiVersion").and_then(Value::as_str), obj.get("kind").and_then(Value::as_str))
    else {
        return "no kind".into();
    };
    let (group, version) = av.split_once('/').unwrap_or(("", av));
    let Some(info) = k1s_api::resources::find_kind(group, version, kind) else { return "unknown kind".into() };
    let strategy = &info.strategy;
    let _ = k1s_api::meta::validate_object_meta(
        obj.get("metadata").unwrap_or(&Value::Null),
        strategy.name_rule(),
        info.namespaced(),
    );
    let mut object = match strategy.normalize(obj.clone()) {
        Ok(n) => n.object,
        Err(_) => return format!("{kind}: undecodable"),
    };
    if strategy.prepare_for_create(&mut object).is_err() {
        return format!("{kind}: prepare failed");
    }
    match strategy.validate(&object, None) {
        Ok(errors) if errors.is_empty() => format!("{kind}: valid"),
        Ok(errors) => format!("{kind}: invalid {}", errors.len().min(3)),
        Err(_) => format!("{kind}: validate failed"),
    }
}

/// A body decoded as a POST with `content_type` decodes it. Malformed bodies are a 400 (never a
/// 500 or a crash); a decoded one is plain JSON that reads back as itself.
fn decode(body: &[u8], content_type: &str) -> String {
    match k1s_apiserver::registry::parse_body(&Bytes::copy_from_slice(body), content_type) {
        Ok(v) => {
            let text = serde_json::to_vec(&v).expect("a decoded body serializes as JSON");
            let again: Value = serde_json::from_slice(&text).expect("a decoded body reads back as JSON");
            assert_eq!(again, v, "a decoded body changes when written and read back as JSON");
            create_path(&v)
        }
        Err(e) => {
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "a malformed body: {}", e.message);
            format!("{} {}", e.code, e.reason)
        }
    }
}

#[test]
fn fuzz_body_json() {
    Target::new("body_json").json().dictionary(OBJECT_WORDS).run(|input| decode(input, "application/json"));
}

#[test]
fn fuzz_body_yaml() {
    let words: Vec<&str> = OBJECT_WORDS.iter().chain(YAML_WORDS).copied().collect();
    Target::new("body_yaml").dictionary(&words).run(|input| decode(input, "application/yaml"));
}

#[test]
fn fuzz_body_protobuf() {
    let words: Vec<&str> = OBJECT_WORDS.iter().copied().chain(["k8s\0", "\x0a\x02v1", "\x12\x09ConfigMap"]).collect();
    Target::new("body_protobuf").dictionary(&words).run(|input| decode(input, "application/vnd.kubernetes.protobuf"));
}

/// `{"type": "json"|"merge"|"strategic"|"apply", "original": object, "patch": patch}`: the
/// patch applied to the stored object as PATCH does, then the update validated.
fn patch(input: &[u8]) -> String {
    let Ok(doc) = serde_json::from_slice::<Value>(input) else { return "not json".into() };
    let original = doc.get("original").cloned().unwrap_or(Value::Null);
    let patch = doc.get("patch").cloned().unwrap_or(Value::Null);
    let kind = original.get("kind").and_then(Value::as_str).unwrap_or("ConfigMap");
    let av = original.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
    let (group, version) = av.split_once('/').unwrap_or(("", av));
    let openapi = k1s_api::openapi::get();
    let schema_name = openapi.kind_schema_name(group, version, kind);
    let schema = schema_name.and_then(|n| openapi.schema(n));
    let ptype = doc.get("type").and_then(Value::as_str).unwrap_or("merge");
    let patched = match ptype {
        "json" => match serde_json::from_value::<json_patch::Patch>(patch) {
            Ok(p) => {
                let mut d = original.clone();
                json_patch::patch(&mut d, &p).map(|_| d).map_err(|e| e.to_string())
            }
            Err(_) => Err("bad json patch".into()),
        },
        "strategic" => k1s_api::strategic::apply(&original, &patch, schema, openapi).map_err(|e| e.to_string()),
        "apply" => {
            let Some(schema) = schema else { return "no schema".into() };
            let manager = k1s_api::apply::Manager {
                name: doc.get("manager").and_then(Value::as_str).unwrap_or("kubectl"),
                operation: k1s_api::apply::Operation::Apply,
                api_version: av,
                subresource: None,
                time: "2026-12-07T00:00:00Z",
            };
            let force = doc.get("force").and_then(Value::as_bool).unwrap_or(false);
            let live = (!original.is_null()).then_some(&original);
            k1s_api::apply::apply(live, &patch, &manager, force, schema, openapi, k1s_api::apply::RESET_STATUS)
                .map_err(|e| e.message())
        }
        _ => {
            let mut d = original.clone();
            json_patch::merge(&mut d, &patch);
            // RFC 7386: a merge patch applied twice changes nothing the second time.
            let mut twice = d.clone();
            json_patch::merge(&mut twice, &patch);
            assert_eq!(twice, d, "a merge patch is not idempotent");
            Ok(d)
        }
    };
    match patched {
        Ok(obj) => {
            if let Some(info) = k1s_api::resources::find_kind(group, version, kind) {
                let _ = info.strategy.validate(&obj, Some(&original));
            }
            format!("{ptype}: ok {}", create_path(&obj))
        }
        Err(e) => format!("{ptype}: {}", e.split(':').next().unwrap_or("")),
    }
}

#[test]
fn fuzz_patch() {
    Target::new("patch").json().dictionary(OBJECT_WORDS).run(patch);
}

/// Label and field selectors as a list's query gives them, matched against a few objects.
fn selectors(input: &[u8]) -> String {
    let s = String::from_utf8_lossy(input);
    let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "front"), ("example.com/x", "1"), ("n", "10")]
        .map(|(k, v)| (k.into(), v.into()))
        .into();
    let obj = json!({"metadata": {"name": "a", "namespace": "default", "labels": labels},
                     "spec": {"nodeName": "n"}, "status": {"phase": "Running"}});
    // The outcome: the first operators parsed and whether they matched, or the error's kind.
    let shape = |sel: &Selector, matched: bool| {
        let ops: Vec<String> = sel.requirements.iter().take(3).map(|r| format!("{:?}", r.op)).collect();
        format!("{} {matched}", ops.join(","))
    };
    let error = |e: k1s_api::selectors::SelectorError| e.0.split(':').next().unwrap_or_default().to_string();
    let as_labels = Selector::parse_labels(&s)
        .map(|sel| {
            // A parsed selector prints as one that parses to the same requirements.
            let printed = sel.to_string();
            assert_eq!(Selector::parse_labels(&printed).as_ref(), Ok(&sel), "{s:?} printed as {printed:?}");
            let matched = sel.matches_map(&labels);
            assert_eq!(
                sel.matches_labels(obj["metadata"].get("labels")),
                matched,
                "{s:?}: a map and its JSON match alike"
            );
            shape(&sel, matched)
        })
        .map_err(error);
    let as_fields = Selector::parse_fields(&s)
        .map(|sel| {
            for r in &sel.requirements {
                let _ = k1s_api::selectors::field_string(&obj, &r.key);
            }
            shape(&sel, sel.matches_map(&labels))
        })
        .map_err(error);
    format!("{as_labels:?} {as_fields:?}")
}

#[test]
fn fuzz_selectors() {
    let words = [
        "=",
        "==",
        "!=",
        "!",
        ",",
        " in ",
        " notin ",
        "(",
        ")",
        " ",
        "<",
        ">",
        "app",
        "tier",
        "example.com/x",
        "a.b/c",
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "status.phase",
        "\\,",
        "\\=",
        "\\\\",
        "-",
        "_",
        ".",
    ];
    Target::new("selectors").dictionary(&words).max_len(4096).run(selectors);
}

/// `METHOD PATH[?QUERY]` then `Name: value` header lines: the request as the API server parses
/// it into a resource request (verb, options, selectors, dry run, field manager, Accept).
fn request(input: &[u8]) -> String {
    let text = String::from_utf8_lossy(input);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let (method, target) = first.split_once(' ').unwrap_or(("GET", first));
    let Ok(method) = Method::from_bytes(method.as_bytes()) else { return "bad method".into() };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if let (Ok(n), Ok(v)) =
                (HeaderName::from_bytes(name.trim().as_bytes()), HeaderValue::from_str(value.trim()))
            {
                headers.append(n, v);
            }
        }
    }
    let query = Query::parse(query);
    let info = RequestInfo::parse(&method, path, &query);
    if let Some(token) = query.get("continue") {
        let _ = k1s_apiserver::registry::parse_continue(token);
    }
    if let Some(name) = &info.name {
        let _ = k1s_api::meta::validate_name(k1s_api::strategy::NameRule::Subdomain, name);
        let _ = k1s_api::meta::path_segment_name(name);
    }
    if !info.is_resource {
        return "non-resource".into();
    }
    match k1s_apiserver::ResourceRequest::parse(k1s_api::resources::find, &method, &info, &query, &headers) {
        Ok(r) => format!("{} {:?}", r.res.resource, std::mem::discriminant(&r.route)),
        Err(e) => {
            // Whatever the client sent, refusing it is the client's error.
            assert!((400..500).contains(&e.code), "{} {}: {}", e.code, e.reason, e.message);
            format!("{} {}", e.code, e.reason)
        }
    }
}

#[test]
fn fuzz_request() {
    let words = [
        "GET ",
        "POST ",
        "PUT ",
        "PATCH ",
        "DELETE ",
        "/api/v1",
        "/apis/apps/v1",
        "/namespaces/default",
        "/pods",
        "/configmaps",
        "/deployments",
        "/status",
        "/scale",
        "/log",
        "/exec",
        "/proxy",
        "/watch",
        "?",
        "&",
        "watch=true",
        "labelSelector=",
        "fieldSelector=",
        "limit=",
        "continue=",
        "resourceVersion=",
        "resourceVersionMatch=NotOlderThan",
        "timeoutSeconds=",
        "dryRun=All",
        "fieldManager=",
        "fieldValidation=Strict",
        "force=true",
        "propagationPolicy=Foreground",
        "gracePeriodSeconds=",
        "allowWatchBookmarks=true",
        "sendInitialEvents=true",
        "includeObject=None",
        "\nAccept: application/json;as=Table;v=v1;g=meta.k8s.io",
        "\nContent-Type: application/apply-patch+yaml",
        "\nContent-Type: application/strategic-merge-patch+json",
        "\nUser-Agent: kubectl/v1.35",
        "%2F",
        "%00",
        "%zz",
        "..",
    ];
    Target::new("request").dictionary(&words).max_len(8192).run(request);
}

/// A CEL expression as policies and CRD rules give it: compiled with their variables, then
/// evaluated against an object within the default cost budget (and a short deadline).
fn cel(input: &[u8]) -> String {
    let expr = String::from_utf8_lossy(input);
    let vars =
        ["self", "oldSelf", "object", "oldObject", "request", "params", "variables", "authorizer", "namespaceObject"];
    let program = match k1s_cel::Program::compile(&expr, &vars) {
        Ok(p) => p,
        Err(e) => {
            // Reported as cel-go does, with a position.
            assert!(e.details().starts_with("ERROR: <input>:"), "{}", e.details());
            return "compile error".into();
        }
    };
    let object = json!({"metadata": {"name": "a", "labels": {"app": "web"}}, "spec": {"replicas": 3,
        "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]},
        "items": [1, 2, 3], "s": "abc", "q": "100m", "ip": "10.0.0.1", "url": "https://a.example/x?y=1"});
    let mut act = k1s_cel::Activation::new();
    for v in ["self", "oldSelf", "object", "oldObject", "params", "namespaceObject"] {
        act.bind_json(v, &object);
    }
    act.bind_json("request", &json!({"operation": "CREATE", "userInfo": {"username": "u"}}));
    act.bind_json("variables", &json!({}));
    let mut budget = k1s_cel::CostBudget::default().with_timeout(std::time::Duration::from_secs(2));
    match program.eval(&act, &mut budget) {
        Ok(v) => format!("ok {}", k1s_cel::type_name(&v)),
        Err(e) => format!("error {}", e.to_string().split(':').next().unwrap_or("")),
    }
}

#[test]
fn fuzz_cel() {
    let words = [
        "self",
        "oldSelf",
        "object",
        "request",
        "params",
        ".",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        "?",
        ":",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        " in ",
        "has(",
        "size(",
        ".all(x, ",
        ".exists(x, ",
        ".exists_one(x, ",
        ".map(x, ",
        ".filter(x, ",
        "x",
        "int(",
        "uint(",
        "double(",
        "string(",
        "bytes(",
        "duration(",
        "timestamp(",
        "type(",
        "dyn(",
        "matches(",
        ".matches(",
        ".startsWith(",
        ".endsWith(",
        ".contains(",
        ".split(",
        ".join(",
        ".replace(",
        ".lowerAscii()",
        ".format(",
        ".indexOf(",
        ".substring(",
        ".charAt(",
        "quantity(",
        ".isGreaterThan(",
        "url(",
        "ip(",
        "cidr(",
        "semver(",
        "isSorted()",
        ".sum()",
        ".min()",
        ".max()",
        "sets.contains(",
        "cel.bind(x, ",
        ".optMap(",
        "optional.of(",
        "optional.none()",
        ".?",
        "[?",
        ".orValue(",
        "authorizer.group(",
        ".resource(",
        ".check(",
        "format.dns1123Label()",
        ".validate(",
        "math.greatest(",
        "strings.quote(",
        "1",
        "-1",
        "1u",
        "1.5",
        "1e308",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615u",
        "\"a\"",
        "'b'",
        "r\"\\d+\"",
        "b\"x\"",
        "true",
        "false",
        "null",
        "[1, 2]",
        "{\"a\": 1}",
        "\"(a+)+$\"",
        "\"\\\\\"",
    ];
    Target::new("cel").dictionary(&words).max_len(4096).run(cel);
}

/// Everything → Allow: impersonation is then checked for its parsing only.
struct AllowAll;

impl k1s_apiserver::auth::Authorizer for AllowAll {
    fn authorize(&self, _: &k1s_apiserver::auth::Attributes<'_>) -> k1s_apiserver::auth::Decision {
        k1s_apiserver::auth::Decision::Allow
    }
}

/// `Name: value` header lines as a request brings them: the bearer token (a bootstrap token, a
/// ServiceAccount JWT, an OIDC ID token) and the `Impersonate-*` headers.
fn auth_headers(signer: &k1s_apiserver::serviceaccount::jwt::Signer, input: &[u8]) -> String {
    let text = String::from_utf8_lossy(input);
    let mut headers = HeaderMap::new();
    for line in text.lines() {
        if let Some((name, value)) = line.split_once(':') {
            if let (Ok(n), Ok(v)) =
                (HeaderName::from_bytes(name.trim().as_bytes()), HeaderValue::from_str(value.trim()))
            {
                headers.append(n, v);
            }
        }
    }
    let mut outcome = Vec::new();
    // `Jwt-Json: HEADER|CLAIMS|SIGNATURE`: a bearer JWT given as its JSON parts, so that the
    // mutations edit the JSON rather than its base64.
    let from_json = headers.get("jwt-json").and_then(|v| v.to_str().ok()).map(|j| {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<String> = j.splitn(3, '|').map(|p| b64.encode(p)).collect();
        format!("Bearer {}", parts.join("."))
    });
    let auth = from_json
        .or_else(|| headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string));
    if let Some(auth) = auth.as_deref() {
        if let Some(token) = k1s_apiserver::authn::bearer_token(auth) {
            outcome.push(k1s_apiserver::authn::bootstrap::parse_token(token).is_some());
            let claims = k1s_apiserver::serviceaccount::jwt::unverified_claims(token);
            outcome.push(claims.is_some());
            if let Some(c) = claims {
                if let Ok(parsed) = k1s_apiserver::serviceaccount::claims::parse(c.clone()) {
                    let _ = k1s_apiserver::serviceaccount::claims::check_public(
                        &parsed,
                        "https://kubernetes.default.svc.cluster.local",
                        &["https://kubernetes.default.svc.cluster.local".into()],
                        1_800_000_000,
                    );
                }
            }
            // The signing key is made for this run: no token it did not sign may verify.
            assert!(signer.verify(token).is_err(), "a forged ServiceAccount token verifies");
            outcome.push(
                k1s_apiserver::authn::oidc::verify_offline(&oidc_settings(), &oidc_keys(), token, 1_800_000_000)
                    .is_ok(),
            );
        }
    }
    let user = k1s_apiserver::auth::UserInfo::new("admin", &["system:masters"]);
    match k1s_apiserver::auth::impersonate(&AllowAll, user, &headers) {
        Ok(_) => outcome.push(true),
        Err(e) => {
            // Client errors, except upstream's one 500: groups, a UID or extras without a user.
            let upstreams_500 = e.code == 500 && e.message.contains("without impersonating a user");
            assert!(
                (400..500).contains(&e.code) || upstreams_500,
                "impersonation: {} {}: {}",
                e.code,
                e.reason,
                e.message
            );
            outcome.push(false);
        }
    }
    format!("{outcome:?}")
}

fn oidc_settings() -> k1s_apiserver::authn::oidc::Settings {
    k1s_apiserver::authn::oidc::Options {
        issuer_url: "https://issuer.example".into(),
        client_id: "k1s".into(),
        groups_claim: Some("groups".into()),
        required_claims: vec![("hd".into(), "example.com".into())],
        ..Default::default()
    }
    .settings()
    .expect("OIDC settings")
}

fn oidc_keys() -> Value {
    json!({"keys": [
        {"kty": "EC", "crv": "P-256", "use": "sig", "kid": "ec", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
         "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
        {"kty": "RSA", "kid": "rsa", "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw", "e": "AQAB"}
    ]})
}

#[test]
fn fuzz_auth_headers() {
    let key = rcgen::KeyPair::generate().expect("a P-256 key");
    let signer = k1s_apiserver::serviceaccount::jwt::Signer::from_pem(&key.serialize_pem()).expect("signer");
    let words = [
        "Authorization: Bearer ",
        "\nImpersonate-User: ",
        "\nImpersonate-Group: ",
        "\nImpersonate-Uid: ",
        "\nImpersonate-Extra-",
        "Jwt-Json: ",
        "|",
        "{\"alg\":\"ES256\",\"kid\":\"ec\"}",
        "\"iss\"",
        "\"https://issuer.example\"",
        "\"aud\"",
        "\"exp\"",
        "\"nbf\"",
        "\"iat\"",
        "\"sub\"",
        "\"groups\"",
        "\"hd\"",
        "\"kubernetes.io\"",
        "\"serviceaccount\"",
        "\"pod\"",
        "\"uid\"",
        "system:serviceaccount:",
        "system:serviceaccount:default:sa",
        "system:masters",
        "%2F",
        "%",
        ".",
        "eyJ",
        "abcdef.0123456789abcdef",
        "=",
        "-",
        "_",
    ];
    Target::new("auth_headers").dictionary(&words).max_len(16 * 1024).run(move |input| auth_headers(&signer, input));
}
