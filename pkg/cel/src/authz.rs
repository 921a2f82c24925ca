//! The Kubernetes authorizer library (k8s.io/apiserver/pkg/cel/library/authz.go): the
//! `authorizer` variable of admission policies, backed by the API server's authorizer through
//! [`Authorize`].
//!
//! `authorizer.group(g).resource(r)[.subresource(s)][.namespace(ns)][.name(n)].check(verb)`,
//! `authorizer.path(p).check(httpVerb)` and `authorizer.serviceAccount(ns, name)` (the same
//! checks for that service account) give a decision with `allowed()`, `reason()`, `errored()`
//! and `error()`.

use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::library::{arg, string};

/// The CEL type names of the library's values.
pub(crate) const AUTHORIZER_TYPE: &str = "kubernetes.authorization.Authorizer";
pub(crate) const PATH_CHECK_TYPE: &str = "kubernetes.authorization.PathCheck";
pub(crate) const GROUP_CHECK_TYPE: &str = "kubernetes.authorization.GroupCheck";
pub(crate) const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";
pub(crate) const DECISION_TYPE: &str = "kubernetes.authorization.Decision";

/// Who a check is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthzUser {
    /// The user name, e.g. `system:serviceaccount:default:robot`.
    pub name: String,
    /// The user's UID, if any.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

/// What a check asks: may `user` do `verb` on a resource, or on a non-resource `path`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthzRequest {
    /// Who asks.
    pub user: AuthzUser,
    /// A Kubernetes verb (`get`, `list`, ...) for a resource, an HTTP verb for a path.
    pub verb: String,
    /// For a non-resource check: the path. For a resource check: `None`.
    pub path: Option<String>,
    /// The resource's API group.
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, or empty.
    pub subresource: String,
    /// The namespace, or empty.
    pub namespace: String,
    /// The object's name, or empty.
    pub name: String,
}

/// What the authorizer decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthzDecision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The authorizer's reason, if any.
    pub reason: String,
    /// The authorizer's error, if it failed.
    pub error: Option<String>,
}

/// The API server's authorizer, as the `authorizer` variable asks it.
pub trait Authorize: Send + Sync {
    /// Decides one request.
    fn authorize(&self, request: &AuthzRequest) -> AuthzDecision;
}

/// The `authorizer` variable of one request: `authorizer` checks for the request's `user`.
pub fn authorizer(authorize: Arc<dyn Authorize>, user: AuthzUser) -> Value {
    Value::Opaque(Arc::new(Authorizer { authorize, user }))
}

/// `authorizer.requestResource`: a resource check for the resource of the request itself.
pub fn request_resource(
    authorize: Arc<dyn Authorize>,
    user: AuthzUser,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Value {
    let request = AuthzRequest {
        user,
        group: group.to_owned(),
        resource: resource.to_owned(),
        subresource: subresource.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        ..AuthzRequest::default()
    };
    Value::Opaque(Arc::new(Check { authorize, request, kind: CheckKind::Resource }))
}

#[derive(Clone)]
struct Authorizer {
    authorize: Arc<dyn Authorize>,
    user: AuthzUser,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Authorizer({})", self.user.name)
    }
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorize, &other.authorize) && self.user == other.user
    }
}

impl Eq for Authorizer {}

impl Opaque for Authorizer {
    fn runtime_type_name(&self) -> &str {
        AUTHORIZER_TYPE
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CheckKind {
    Path,
    Group,
    Resource,
}

/// A path, group or resource check being built.
#[derive(Clone)]
struct Check {
    authorize: Arc<dyn Authorize>,
    request: AuthzRequest,
    kind: CheckKind,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}({:?})", self.kind, self.request)
    }
}

impl PartialEq for Check {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorize, &other.authorize) && self.request == other.request && self.kind == other.kind
    }
}

impl Eq for Check {}

impl Opaque for Check {
    fn runtime_type_name(&self) -> &str {
        match self.kind {
            CheckKind::Path => PATH_CHECK_TYPE,
            CheckKind::Group => GROUP_CHECK_TYPE,
            CheckKind::Resource => RESOURCE_CHECK_TYPE,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Decision(AuthzDecision);

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        DECISION_TYPE
    }
}

fn authorizer_of<'a>(args: &'a [Value], function: &str) -> Result<&'a Authorizer, ExecutionError> {
    match arg(args, 0, function)? {
        Value::Opaque(o) => o.downcast_ref::<Authorizer>(),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected an authorizer"))
}

fn check_of<'a>(args: &'a [Value], function: &str) -> Result<&'a Check, ExecutionError> {
    match arg(args, 0, function)? {
        Value::Opaque(o) => o.downcast_ref::<Check>(),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected an authorization check"))
}

fn decision_of<'a>(args: &'a [Value], function: &str) -> Result<&'a AuthzDecision, ExecutionError> {
    match arg(args, 0, function)? {
        Value::Opaque(o) => o.downcast_ref::<Decision>().map(|d| &d.0),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected an authorization decision"))
}

fn check_value(check: Check) -> Value {
    Value::Opaque(Arc::new(check))
}

fn start(args: &[Value], function: &str, kind: CheckKind) -> Result<Check, ExecutionError> {
    let a = authorizer_of(args, function)?;
    let request = AuthzRequest { user: a.user.clone(), ..AuthzRequest::default() };
    Ok(Check { authorize: Arc::clone(&a.authorize), request, kind })
}

pub(crate) fn path(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut check = start(args, "path", CheckKind::Path)?;
    check.request.path = Some(string(args, 1, "path")?.to_owned());
    Ok(check_value(check))
}

pub(crate) fn group(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut check = start(args, "group", CheckKind::Group)?;
    check.request.group = string(args, 1, "group")?.to_owned();
    Ok(check_value(check))
}

/// `authorizer.serviceAccount(namespace, name)`: an authorizer for that service account, with
/// the groups its tokens carry.
pub(crate) fn service_account(args: &[Value]) -> Result<Value, ExecutionError> {
    let a = authorizer_of(args, "serviceAccount")?;
    let namespace = string(args, 1, "serviceAccount")?;
    let name = string(args, 2, "serviceAccount")?;
    let user = AuthzUser {
        name: format!("system:serviceaccount:{namespace}:{name}"),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_owned(),
        ],
    };
    Ok(Value::Opaque(Arc::new(Authorizer { authorize: Arc::clone(&a.authorize), user })))
}

/// `resource`, `subresource`, `namespace` and `name`: the check with one more attribute.
fn refine(args: &[Value], function: &str, set: fn(&mut AuthzRequest, String)) -> Result<Value, ExecutionError> {
    let mut check = check_of(args, function)?.clone();
    set(&mut check.request, string(args, 1, function)?.to_owned());
    check.kind = CheckKind::Resource;
    Ok(check_value(check))
}

pub(crate) fn resource(args: &[Value]) -> Result<Value, ExecutionError> {
    refine(args, "resource", |r, v| r.resource = v)
}

pub(crate) fn subresource(args: &[Value]) -> Result<Value, ExecutionError> {
    refine(args, "subresource", |r, v| r.subresource = v)
}

pub(crate) fn namespace(args: &[Value]) -> Result<Value, ExecutionError> {
    refine(args, "namespace", |r, v| r.namespace = v)
}

pub(crate) fn name(args: &[Value]) -> Result<Value, ExecutionError> {
    refine(args, "name", |r, v| r.name = v)
}

/// `<check>.check(verb)`: asks the authorizer.
pub(crate) fn check(args: &[Value]) -> Result<Value, ExecutionError> {
    let check = check_of(args, "check")?;
    let mut request = check.request.clone();
    request.verb = string(args, 1, "check")?.to_owned();
    Ok(Value::Opaque(Arc::new(Decision(check.authorize.authorize(&request)))))
}

pub(crate) fn allowed(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(decision_of(args, "allowed")?.allowed))
}

pub(crate) fn reason(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(Arc::new(decision_of(args, "reason")?.reason.clone())))
}

pub(crate) fn errored(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(decision_of(args, "errored")?.error.is_some()))
}

pub(crate) fn error(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(Arc::new(decision_of(args, "error")?.error.clone().unwrap_or_default())))
}
