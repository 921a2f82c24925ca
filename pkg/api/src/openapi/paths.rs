//! The REST operations k1s serves, described once per group-version in a form both the v2 and the
//! v3 renderers turn into documents. Operation ids, descriptions, parameters and response codes
//! follow upstream's endpoint installer (`k8s.io/apiserver/pkg/endpoints/installer.go`).

use super::registry::{Gvk, Registry};
use crate::resources::{self, ResourceInfo, SubresourceInfo};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum In {
    Path,
    Query,
}

impl In {
    pub fn as_str(self) -> &'static str {
        match self {
            In::Path => "path",
            In::Query => "query",
        }
    }
}

/// A path or query parameter.
#[derive(Clone, Debug)]
pub(super) struct Param {
    pub name: &'static str,
    pub location: In,
    /// `string`, `boolean` or `integer`.
    pub ty: &'static str,
    pub description: String,
}

impl Param {
    fn query(name: &'static str, ty: &'static str, description: &str) -> Param {
        Param { name, location: In::Query, ty, description: description.to_string() }
    }
    fn path(name: &'static str, description: &str) -> Param {
        Param { name, location: In::Path, ty: "string", description: description.to_string() }
    }
    pub fn required(&self) -> bool {
        self.location == In::Path
    }
}

/// What an operation answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Media {
    /// One object: JSON, YAML or protobuf.
    Object,
    /// A list or a watch stream: [`Media::Object`] plus the `;stream=watch` variants.
    Stream,
    /// `text/plain` (logs).
    Text,
    /// Any media type (connect operations: exec, attach, port-forward, proxy).
    Any,
    /// JSON only (`/version`).
    Json,
}

impl Media {
    /// The response media types, as upstream's v3 documents list them.
    pub fn produces(self) -> &'static [&'static str] {
        match self {
            Media::Object => &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            Media::Stream => &[
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
                "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf;stream=watch",
            ],
            Media::Text => &["text/plain"],
            Media::Any => &["*/*"],
            Media::Json => &["application/json"],
        }
    }
}

/// The patch media types a PATCH operation accepts.
pub(super) const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// What custom resources accept: no strategic merge patch (they have no patch strategies).
pub(super) const CUSTOM_PATCH_TYPES: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// A request body.
#[derive(Clone, Debug)]
pub(super) struct Body {
    /// Definition name.
    pub schema: String,
    pub required: bool,
    /// The patch media types it accepts, for a patch body; `*/*` otherwise.
    pub patch: Option<&'static [&'static str]>,
}

/// One HTTP operation.
#[derive(Clone, Debug)]
pub(super) struct Operation {
    /// Lower-case HTTP method: `get`, `put`, `post`, `delete`, `patch`, `head`, `options`.
    pub method: &'static str,
    pub id: String,
    pub description: String,
    /// `x-kubernetes-action`; empty for discovery operations.
    pub action: &'static str,
    pub gvk: Option<Gvk>,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    /// Status codes besides 401, each with its description.
    pub responses: Vec<(u16, &'static str)>,
    /// Definition name of the response; `None` means a plain string.
    pub response: Option<String>,
    pub media: Media,
    pub tag: String,
}

/// One URL path with its operations and the parameters they share.
#[derive(Clone, Debug)]
pub(super) struct PathItem {
    pub path: String,
    pub params: Vec<Param>,
    pub ops: Vec<Operation>,
}

// Parameter descriptions, as upstream documents them.
const PRETTY: &str = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).";
const NAMESPACE: &str = "object name and auth scope, such as for teams and projects";
const DRY_RUN: &str = "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed";
const FIELD_MANAGER: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.";
const FIELD_MANAGER_PATCH: &str = " This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).";
const FIELD_VALIDATION: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";
const FORCE: &str = "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.";
const GRACE_PERIOD: &str = "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.";
const IGNORE_STORE_READ_ERROR: &str = "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error. A resource is considered corrupt if it can not be retrieved from the underlying storage successfully because of a) its data can not be transformed e.g. decryption failure, or b) it fails to decode into an object. NOTE: unsafe deletion ignores finalizer constraints, skips precondition checks, and removes the object from the storage. WARNING: This may potentially break the cluster if the workload associated with the resource being unsafe-deleted relies on normal deletion flow. Use only if you REALLY know what you are doing. The default value is false, and the user must opt in to enable it";
const ORPHAN_DEPENDENTS: &str = "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.";
const PROPAGATION_POLICY: &str = "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.";
const ALLOW_WATCH_BOOKMARKS: &str = "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.";
const CONTINUE: &str = "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token. If the client needs a consistent list, it must restart their list without the continue field. Otherwise, the client may send another list request with the token received with the 410 error, the server will respond with a list starting from the next key, but from the latest snapshot, which is inconsistent from the previous list results - objects that are created, modified, or deleted after the first list request will be included in the response, as long as their keys are after the \"next key\".\n\nThis field is not supported when watch is true. Clients may start a watch from the last resourceVersion value returned by the server and not miss any modifications.";
const FIELD_SELECTOR: &str =
    "A selector to restrict the list of returned objects by their fields. Defaults to everything.";
const LABEL_SELECTOR: &str =
    "A selector to restrict the list of returned objects by their labels. Defaults to everything.";
const LIMIT: &str = "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Setting a limit may return fewer than the requested amount of items (up to zero items) in the event all requested objects are filtered out and clients should only use the presence of the continue field to determine whether more results are available. Servers may choose not to support the limit argument and will return all of the available results. If limit is specified and the continue field is empty, clients may assume that no more results are available. This field is not supported if watch is true.\n\nThe server guarantees that the objects returned when using continue will be identical to issuing a single list call without a limit - that is, no objects created, modified, or deleted after the first request is issued will be included in any subsequent continued requests. This is sometimes referred to as a consistent snapshot, and ensures that a client that is using limit to receive smaller chunks of a very large result can ensure they see all possible objects. If objects are updated during a chunked list the version of the object that was present at the time the first list result was calculated is returned.";
const RESOURCE_VERSION: &str = "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset";
const RESOURCE_VERSION_MATCH: &str = "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset";
const SEND_INITIAL_EVENTS: &str = "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation. Afterwards, the watch stream will proceed as usual, sending watch events corresponding to changes (subsequent to the RV) to objects watched.\n\nWhen `sendInitialEvents` option is set, we require `resourceVersionMatch` option to also be set. The semantic of the watch request is as following: - `resourceVersionMatch` = NotOlderThan\n  is interpreted as \"data at least as new as the provided `resourceVersion`\"\n  and the bookmark event is send when the state is synced\n  to a `resourceVersion` at least as fresh as the one provided by the ListOptions.\n  If `resourceVersion` is unset, this is interpreted as \"consistent read\" and the\n  bookmark event is send when the state is synced at least to the moment\n  when request started being processed.\n- `resourceVersionMatch` set to any other value or unset\n  Invalid error is returned.\n\nDefaults to true if `resourceVersion=\"\"` or `resourceVersion=\"0\"` (for backward compatibility reasons) and to false otherwise.";
const TIMEOUT_SECONDS: &str =
    "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.";
const WATCH: &str = "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.";

fn pretty() -> Param {
    Param::query("pretty", "string", PRETTY)
}

fn namespace() -> Param {
    Param::path("namespace", NAMESPACE)
}

fn name_of(kind: &str) -> Param {
    Param::path("name", &format!("name of the {kind}"))
}

fn write_params(patch: bool) -> Vec<Param> {
    let mut manager = FIELD_MANAGER.to_string();
    if patch {
        manager.push_str(FIELD_MANAGER_PATCH);
    }
    let mut params = vec![
        Param::query("dryRun", "string", DRY_RUN),
        Param::query("fieldManager", "string", &manager),
        Param::query("fieldValidation", "string", FIELD_VALIDATION),
    ];
    if patch {
        params.push(Param::query("force", "boolean", FORCE));
    }
    params
}

fn delete_params() -> Vec<Param> {
    vec![
        Param::query("dryRun", "string", DRY_RUN),
        Param::query("gracePeriodSeconds", "integer", GRACE_PERIOD),
        Param::query("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", IGNORE_STORE_READ_ERROR),
        Param::query("orphanDependents", "boolean", ORPHAN_DEPENDENTS),
        Param::query("propagationPolicy", "string", PROPAGATION_POLICY),
    ]
}

/// The list options: `allowWatchBookmarks` … `watch`.
fn list_params() -> Vec<Param> {
    vec![
        Param::query("allowWatchBookmarks", "boolean", ALLOW_WATCH_BOOKMARKS),
        Param::query("continue", "string", CONTINUE),
        Param::query("fieldSelector", "string", FIELD_SELECTOR),
        Param::query("labelSelector", "string", LABEL_SELECTOR),
        Param::query("limit", "integer", LIMIT),
        Param::query("resourceVersion", "string", RESOURCE_VERSION),
        Param::query("resourceVersionMatch", "string", RESOURCE_VERSION_MATCH),
        Param::query("sendInitialEvents", "boolean", SEND_INITIAL_EVENTS),
        Param::query("timeoutSeconds", "integer", TIMEOUT_SECONDS),
        Param::query("watch", "boolean", WATCH),
    ]
}

fn delete_collection_params() -> Vec<Param> {
    let mut params: Vec<Param> = list_params()
        .into_iter()
        .filter(|p| p.name != "watch" && p.name != "allowWatchBookmarks")
        .chain(delete_params())
        .collect();
    sort_params(&mut params);
    params
}

/// Sorts parameters by name, as upstream's documents list them.
pub(super) fn sort_params(params: &mut [Param]) {
    params.sort_by(|a, b| a.name.cmp(b.name));
}

/// `rbac.authorization.k8s.io` ▶ `rbacAuthorization`; the core group is `core`.
fn camel_group(group: &str) -> String {
    if group.is_empty() {
        return "core".to_string();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    let mut out = String::new();
    for (i, part) in trimmed.split('.').enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            out.push_str(&upper_first(part));
        }
    }
    out
}

fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The URL prefix of a group-version: `/api/v1` or `/apis/<group>/<version>`.
pub(super) fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The `/openapi/v3` path of a group-version: `api/v1` or `apis/<group>/<version>`.
pub(super) fn v3_path(group: &str, version: &str) -> String {
    prefix(group, version).trim_start_matches('/').to_string()
}

/// Whether DELETE answers with the deleted object rather than a Status (stores that set
/// `ReturnDeletedObject` upstream).
fn delete_returns_object(r: &ResourceInfo) -> bool {
    matches!(
        (r.group, r.resource),
        ("", "pods")
            | ("", "services")
            | ("", "serviceaccounts")
            | ("", "persistentvolumes")
            | ("", "persistentvolumeclaims")
            | ("storage.k8s.io", "storageclasses")
            | ("storage.k8s.io", "volumeattachments")
            | ("storage.k8s.io", "csidrivers")
            | ("storage.k8s.io", "csinodes")
            | ("storage.k8s.io", "volumeattributesclasses")
    )
}

/// Builds operations for one group-version.
struct GroupVersion<'a> {
    registry: &'a Registry,
    /// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`.
    id_infix: String,
    tag: String,
    prefix: String,
    patch_types: &'static [&'static str],
    /// Custom resources: a subresource of the resource's own kind is that kind's schema.
    custom: bool,
}

impl<'a> GroupVersion<'a> {
    fn new(registry: &'a Registry, group: &'a str, version: &'a str) -> Self {
        let camel = camel_group(group);
        GroupVersion {
            registry,
            id_infix: format!("{}{}", upper_first(&camel), upper_first(version)),
            tag: format!("{camel}_{version}"),
            prefix: prefix(group, version),
            patch_types: PATCH_TYPES,
            custom: false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn op(
        &self,
        method: &'static str,
        id: String,
        description: String,
        action: &'static str,
        gvk: &Gvk,
        params: Vec<Param>,
        body: Option<Body>,
        responses: &[(u16, &'static str)],
        response: Option<String>,
        media: Media,
    ) -> Operation {
        Operation {
            method,
            id,
            description,
            action,
            gvk: Some(gvk.clone()),
            params,
            body,
            responses: responses.to_vec(),
            response,
            media,
            tag: self.tag.clone(),
        }
    }

    fn discovery(&self) -> PathItem {
        PathItem {
            path: format!("{}/", self.prefix),
            params: Vec::new(),
            ops: vec![Operation {
                method: "get",
                id: format!("get{}APIResources", self.id_infix),
                description: "get available resources".into(),
                action: "",
                gvk: None,
                params: Vec::new(),
                body: None,
                responses: vec![(200, "OK")],
                response: Some(format!("{META}APIResourceList")),
                media: Media::Object,
                tag: self.tag.clone(),
            }],
        }
    }

    fn resource(&self, r: &ResourceInfo, out: &mut Vec<PathItem>) {
        let kind = r.kind;
        let ns = r.namespaced();
        let scoped = if ns { "Namespaced" } else { "" };
        let gi = &self.id_infix;
        let gvk = Gvk::new(r.group, r.version, kind);
        let schema = r.schema_name.clone();
        let list = format!("{}List", r.schema_name);
        let has = |verb: &str| r.verbs.contains(&verb);
        let collection = if ns {
            format!("{}/namespaces/{{namespace}}/{}", self.prefix, r.resource)
        } else {
            format!("{}/{}", self.prefix, r.resource)
        };
        let item = format!("{collection}/{{name}}");
        let scope_params = || if ns { vec![namespace(), pretty()] } else { vec![pretty()] };
        let item_params = |kind: &str| {
            let mut p = vec![name_of(kind)];
            p.extend(scope_params());
            p
        };
        let created: &[(u16, &'static str)] = &[(200, "OK"), (201, "Created"), (202, "Accepted")];
        let replaced: &[(u16, &'static str)] = &[(200, "OK"), (201, "Created")];

        let mut ops = Vec::new();
        if has("list") {
            ops.push(self.op(
                "get",
                format!("list{gi}{scoped}{kind}"),
                format!("list or watch objects of kind {kind}"),
                "list",
                &gvk,
                list_params(),
                None,
                &[(200, "OK")],
                Some(list.clone()),
                Media::Stream,
            ));
        }
        if has("create") {
            ops.push(self.op(
                "post",
                format!("create{gi}{scoped}{kind}"),
                format!("create {} {kind}", article(kind)),
                "post",
                &gvk,
                write_params(false),
                Some(Body { schema: schema.clone(), required: true, patch: None }),
                created,
                Some(schema.clone()),
                Media::Object,
            ));
        }
        if has("deletecollection") {
            ops.push(self.op(
                "delete",
                format!("delete{gi}Collection{scoped}{kind}"),
                format!("delete collection of {kind}"),
                "deletecollection",
                &gvk,
                delete_collection_params(),
                Some(Body { schema: format!("{META}DeleteOptions"), required: false, patch: None }),
                &[(200, "OK")],
                Some(format!("{META}Status")),
                Media::Object,
            ));
        }
        if !ops.is_empty() {
            out.push(PathItem { path: collection.clone(), params: scope_params(), ops });
        }

        let mut ops = Vec::new();
        if has("get") {
            ops.push(self.op(
                "get",
                format!("read{gi}{scoped}{kind}"),
                format!("read the specified {kind}"),
                "get",
                &gvk,
                Vec::new(),
                None,
                &[(200, "OK")],
                Some(schema.clone()),
                Media::Object,
            ));
        }
        if has("update") {
            ops.push(self.op(
                "put",
                format!("replace{gi}{scoped}{kind}"),
                format!("replace the specified {kind}"),
                "put",
                &gvk,
                write_params(false),
                Some(Body { schema: schema.clone(), required: true, patch: None }),
                replaced,
                Some(schema.clone()),
                Media::Object,
            ));
        }
        if has("patch") {
            ops.push(self.op(
                "patch",
                format!("patch{gi}{scoped}{kind}"),
                format!("partially update the specified {kind}"),
                "patch",
                &gvk,
                write_params(true),
                Some(Body { schema: format!("{META}Patch"), required: true, patch: Some(self.patch_types) }),
                replaced,
                Some(schema.clone()),
                Media::Object,
            ));
        }
        if has("delete") {
            let deleted = if delete_returns_object(r) { schema.clone() } else { format!("{META}Status") };
            ops.push(self.op(
                "delete",
                format!("delete{gi}{scoped}{kind}"),
                format!("delete {} {kind}", article(kind)),
                "delete",
                &gvk,
                delete_params(),
                Some(Body { schema: format!("{META}DeleteOptions"), required: false, patch: None }),
                &[(200, "OK"), (202, "Accepted")],
                Some(deleted),
                Media::Object,
            ));
        }
        if !ops.is_empty() {
            out.push(PathItem { path: item.clone(), params: item_params(kind), ops });
        }

        let watch_event = Some(format!("{META}WatchEvent"));
        if ns && has("list") {
            let mut params = list_params();
            params.push(pretty());
            sort_params(&mut params);
            let op = self.op(
                "get",
                format!("list{gi}{kind}ForAllNamespaces"),
                format!("list or watch objects of kind {kind}"),
                "list",
                &gvk,
                Vec::new(),
                None,
                &[(200, "OK")],
                Some(list.clone()),
                Media::Stream,
            );
            out.push(PathItem { path: format!("{}/{}", self.prefix, r.resource), params, ops: vec![op] });
        }
        if has("watch") {
            let watch_list_description =
                format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead.");
            let watch_description = format!("watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.");
            let with = |extra: Vec<Param>| {
                let mut params = list_params();
                params.extend(extra);
                sort_params(&mut params);
                params
            };
            let watch_prefix = if ns {
                format!("{}/watch/namespaces/{{namespace}}/{}", self.prefix, r.resource)
            } else {
                format!("{}/watch/{}", self.prefix, r.resource)
            };
            let list_op = self.op(
                "get",
                format!("watch{gi}{scoped}{kind}List"),
                watch_list_description.clone(),
                "watchlist",
                &gvk,
                Vec::new(),
                None,
                &[(200, "OK")],
                watch_event.clone(),
                Media::Stream,
            );
            out.push(PathItem { path: watch_prefix.clone(), params: with(scope_params()), ops: vec![list_op] });
            let one_op = self.op(
                "get",
                format!("watch{gi}{scoped}{kind}"),
                watch_description,
                "watch",
                &gvk,
                Vec::new(),
                None,
                &[(200, "OK")],
                watch_event.clone(),
                Media::Stream,
            );
            out.push(PathItem {
                path: format!("{watch_prefix}/{{name}}"),
                params: with(item_params(kind)),
                ops: vec![one_op],
            });
            if ns {
                let all_op = self.op(
                    "get",
                    format!("watch{gi}{kind}ListForAllNamespaces"),
                    watch_list_description,
                    "watchlist",
                    &gvk,
                    Vec::new(),
                    None,
                    &[(200, "OK")],
                    watch_event,
                    Media::Stream,
                );
                out.push(PathItem {
                    path: format!("{}/watch/{}", self.prefix, r.resource),
                    params: with(vec![pretty()]),
                    ops: vec![all_op],
                });
            }
        }

        for s in &r.subresources {
            self.subresource(r, s, &item, out);
        }
    }

    fn subresource(&self, r: &ResourceInfo, s: &SubresourceInfo, item: &str, out: &mut Vec<PathItem>) {
        let kind = r.kind;
        let scoped = if r.namespaced() { "Namespaced" } else { "" };
        let gi = &self.id_infix;
        let sub = upper_first(s.name);
        let gvk = Gvk::new(s.group, s.version, s.kind);
        let own_kind = s.group == r.group && s.version == r.version && s.kind == r.kind;
        let schema = match self.registry.name_of(s.group, s.version, s.kind) {
            None if self.custom && own_kind => Some(r.schema_name.clone()),
            found => found.map(str::to_string),
        };
        let path = format!("{item}/{}", s.name);
        let item_params = |name_kind: &str| {
            let mut p = vec![name_of(name_kind)];
            if r.namespaced() {
                p.push(namespace());
            }
            p.push(pretty());
            p
        };
        let has = |verb: &str| s.verbs.contains(&verb);
        match s.name {
            "log" => {
                let mut params = log_params();
                params.extend(item_params(kind));
                sort_params(&mut params);
                let op = self.op(
                    "get",
                    format!("read{gi}{scoped}{kind}Log"),
                    format!("read log of the specified {kind}"),
                    "get",
                    &gvk,
                    Vec::new(),
                    None,
                    &[(200, "OK")],
                    None,
                    Media::Text,
                );
                out.push(PathItem { path, params, ops: vec![op] });
            }
            "exec" | "attach" | "portforward" | "proxy" => self.connect(r, s, item, out),
            "binding" | "eviction" | "token" => {
                let Some(schema) = schema else { return };
                let op = self.op(
                    "post",
                    format!("create{gi}{scoped}{kind}{sub}"),
                    format!("create {} of {} {kind}", s.name, article(kind)),
                    "post",
                    &gvk,
                    write_params(false),
                    Some(Body { schema: schema.clone(), required: true, patch: None }),
                    &[(200, "OK"), (201, "Created"), (202, "Accepted")],
                    Some(schema),
                    Media::Object,
                );
                out.push(PathItem { path, params: item_params(s.kind), ops: vec![op] });
            }
            _ => {
                let Some(schema) = schema else { return };
                let mut ops = Vec::new();
                if has("get") {
                    ops.push(self.op(
                        "get",
                        format!("read{gi}{scoped}{kind}{sub}"),
                        format!("read {} of the specified {kind}", s.name),
                        "get",
                        &gvk,
                        Vec::new(),
                        None,
                        &[(200, "OK")],
                        Some(schema.clone()),
                        Media::Object,
                    ));
                }
                if has("update") {
                    ops.push(self.op(
                        "put",
                        format!("replace{gi}{scoped}{kind}{sub}"),
                        format!("replace {} of the specified {kind}", s.name),
                        "put",
                        &gvk,
                        write_params(false),
                        Some(Body { schema: schema.clone(), required: true, patch: None }),
                        &[(200, "OK"), (201, "Created")],
                        Some(schema.clone()),
                        Media::Object,
                    ));
                }
                if has("patch") {
                    ops.push(self.op(
                        "patch",
                        format!("patch{gi}{scoped}{kind}{sub}"),
                        format!("partially update {} of the specified {kind}", s.name),
                        "patch",
                        &gvk,
                        write_params(true),
                        Some(Body { schema: format!("{META}Patch"), required: true, patch: Some(self.patch_types) }),
                        &[(200, "OK"), (201, "Created")],
                        Some(schema.clone()),
                        Media::Object,
                    ));
                }
                if !ops.is_empty() {
                    out.push(PathItem { path, params: item_params(kind), ops });
                }
            }
        }
    }

    /// `exec`, `attach`, `portforward` and `proxy`: connect operations, one per HTTP method.
    fn connect(&self, r: &ResourceInfo, s: &SubresourceInfo, item: &str, out: &mut Vec<PathItem>) {
        let kind = r.kind;
        let scoped = if r.namespaced() { "Namespaced" } else { "" };
        let gi = &self.id_infix;
        let sub = upper_first(s.name);
        let gvk = Gvk::new(s.group, s.version, s.kind);
        let methods: &[&'static str] = if s.name == "proxy" {
            &["delete", "get", "head", "options", "patch", "post", "put"]
        } else {
            &["get", "post"]
        };
        let mut variants: Vec<(String, Vec<Param>, &str)> = Vec::new();
        let mut base = vec![name_of(s.kind)];
        if r.namespaced() {
            base.push(namespace());
        }
        match s.name {
            "exec" => base.extend(exec_params()),
            "attach" => base.extend(attach_params()),
            "portforward" => {
                base.push(Param::query("ports", "integer", "List of ports to forward Required when using WebSockets"))
            }
            _ => {}
        }
        if s.name == "proxy" {
            let mut query = base.clone();
            query.push(Param::query("path", "string", &proxy_path_description(kind)));
            variants.push((format!("{item}/proxy"), query, ""));
            let mut with_path = base;
            with_path.push(Param::path("path", "path to the resource"));
            variants.push((format!("{item}/proxy/{{path}}"), with_path, "WithPath"));
        } else {
            variants.push((format!("{item}/{}", s.name), base, ""));
        }
        for (path, mut params, suffix) in variants {
            sort_params(&mut params);
            let ops = methods
                .iter()
                .map(|method| {
                    let upper = method.to_uppercase();
                    self.op(
                        method,
                        format!("connect{gi}{}{scoped}{kind}{sub}{suffix}", upper_first(method)),
                        format!("connect {upper} requests to {} of {kind}", s.name),
                        "connect",
                        &gvk,
                        Vec::new(),
                        None,
                        &[(200, "OK")],
                        None,
                        Media::Any,
                    )
                })
                .collect();
            out.push(PathItem { path, params, ops });
        }
    }
}

fn article(kind: &str) -> &'static str {
    match kind.chars().next() {
        Some('A' | 'E' | 'I' | 'O' | 'U') => "an",
        _ => "a",
    }
}

fn proxy_path_description(kind: &str) -> String {
    match kind {
        "Service" => "Path is the part of URLs that include service endpoints, suffixes, and parameters to use for the current proxy request to service. For example, the whole request URL is http://localhost/api/v1/namespaces/kube-system/services/elasticsearch-logging/_search?q=user:kimchy. Path is _search?q=user:kimchy.".into(),
        other => format!("Path is the URL path to use for the current proxy request to {}.", other.to_lowercase()),
    }
}

fn exec_params() -> Vec<Param> {
    vec![
        Param::query("command", "string", "Command is the remote command to execute. argv array. Not executed within a shell."),
        Param::query("container", "string", "Container in which to execute the command. Defaults to only container if there is only one container in the pod."),
        Param::query("stderr", "boolean", "Redirect the standard error stream of the pod for this call."),
        Param::query("stdin", "boolean", "Redirect the standard input stream of the pod for this call. Defaults to false."),
        Param::query("stdout", "boolean", "Redirect the standard output stream of the pod for this call."),
        Param::query("tty", "boolean", "TTY if true indicates that a tty will be allocated for the exec call. Defaults to false."),
    ]
}

fn attach_params() -> Vec<Param> {
    vec![
        Param::query("container", "string", "The container in which to execute the command. Defaults to only container if there is only one container in the pod."),
        Param::query("stderr", "boolean", "Stderr if true indicates that stderr is to be redirected for the attach call. Defaults to true."),
        Param::query("stdin", "boolean", "Stdin if true, redirects the standard input stream of the pod for this call. Defaults to false."),
        Param::query("stdout", "boolean", "Stdout if true indicates that stdout is to be redirected for the attach call. Defaults to true."),
        Param::query("tty", "boolean", "TTY if true indicates that a tty will be allocated for the attach call. This is passed through the container runtime so the tty is allocated on the worker node by the container runtime. Defaults to false."),
    ]
}

fn log_params() -> Vec<Param> {
    vec![
        Param::query("container", "string", "The container for which to stream logs. Defaults to only container if there is one container in the pod."),
        Param::query("follow", "boolean", "Follow the log stream of the pod. Defaults to false."),
        Param::query("insecureSkipTLSVerifyBackend", "boolean", "insecureSkipTLSVerifyBackend indicates that the apiserver should not confirm the validity of the serving certificate of the backend it is connecting to.  This will make the HTTPS connection between the apiserver and the backend insecure. This means the apiserver cannot verify the log data it is receiving came from the real kubelet.  If the kubelet is configured to verify the apiserver's TLS credentials, it does not mean the connection to the real kubelet is vulnerable to a man in the middle attack (e.g. an attacker could not intercept the actual log data coming from the real kubelet)."),
        Param::query("limitBytes", "integer", "If set, the number of bytes to read from the server before terminating the log output. This may not display a complete final line of logging, and may return slightly more or slightly less than the specified limit."),
        Param::query("previous", "boolean", "Return previous terminated container logs. Defaults to false."),
        Param::query("sinceSeconds", "integer", "A relative time in seconds before the current time from which to show logs. If this value precedes the time a pod was started, only logs since the pod start will be returned. If this value is in the future, no logs will be returned. Only one of sinceSeconds or sinceTime may be specified."),
        Param::query("stream", "string", "Specify which container log stream to return to the client. Acceptable values are \"All\", \"Stdout\" and \"Stderr\". If not specified, \"All\" is used, and both stdout and stderr are returned interleaved. Note that when \"TailLines\" is specified, \"Stream\" can only be set to nil or \"All\"."),
        Param::query("tailLines", "integer", "If set, the number of lines from the end of the logs to show. If not specified, logs are shown from the creation of the container or sinceSeconds or sinceTime. Note that when \"TailLines\" is specified, \"Stream\" can only be set to nil or \"All\"."),
        Param::query("timestamps", "boolean", "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output. Defaults to false."),
    ]
}

/// Every path of one group-version: its discovery document, then each resource's operations.
pub(super) fn group_version(registry: &Registry, group: &str, version: &str) -> Vec<PathItem> {
    let gv = GroupVersion::new(registry, group, version);
    let mut out = vec![gv.discovery()];
    for r in resources::all().iter().filter(|r| r.group == group && r.version == version) {
        gv.resource(r, &mut out);
    }
    out
}

/// The operations of a custom group-version: `resources` are its served custom resources.
pub(super) fn custom_group_version(
    registry: &Registry,
    group: &str,
    version: &str,
    resources: &[&ResourceInfo],
) -> Vec<PathItem> {
    let mut gv = GroupVersion::new(registry, group, version);
    gv.patch_types = CUSTOM_PATCH_TYPES;
    gv.custom = true;
    let mut out = vec![gv.discovery()];
    for r in resources {
        gv.resource(r, &mut out);
    }
    out
}

fn single(path: String, id: String, description: &str, tag: String, response: String, media: Media) -> PathItem {
    PathItem {
        path,
        params: Vec::new(),
        ops: vec![Operation {
            method: "get",
            id,
            description: description.to_string(),
            action: "",
            gvk: None,
            params: Vec::new(),
            body: None,
            responses: vec![(200, "OK")],
            response: Some(response),
            media,
            tag,
        }],
    }
}

/// `/api/`: the core API versions.
pub(super) fn core_versions() -> PathItem {
    single(
        "/api/".into(),
        "getCoreAPIVersions".into(),
        "get available API versions",
        "core".into(),
        format!("{META}APIVersions"),
        Media::Object,
    )
}

/// `/apis/`: the API groups.
pub(super) fn groups() -> PathItem {
    single(
        "/apis/".into(),
        "getAPIVersions".into(),
        "get available API versions",
        "apis".into(),
        format!("{META}APIGroupList"),
        Media::Object,
    )
}

/// `/apis/<group>/`: one API group.
pub(super) fn group(group: &str) -> PathItem {
    let camel = camel_group(group);
    single(
        format!("/apis/{group}/"),
        format!("get{}APIGroup", upper_first(&camel)),
        "get information of a group",
        camel,
        format!("{META}APIGroup"),
        Media::Object,
    )
}

/// `/version/`: the server version.
pub(super) fn version() -> PathItem {
    single(
        "/version/".into(),
        "getCodeVersion".into(),
        "get the version information for this server",
        "version".into(),
        "io.k8s.apimachinery.pkg.version.Info".into(),
        Media::Json,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_become_upstream_tags_and_operation_prefixes() {
        assert_eq!(camel_group(""), "core");
        assert_eq!(camel_group("apps"), "apps");
        assert_eq!(camel_group("rbac.authorization.k8s.io"), "rbacAuthorization");
        assert_eq!(camel_group("apiextensions.k8s.io"), "apiextensions");
        assert_eq!(camel_group("flowcontrol.apiserver.k8s.io"), "flowcontrolApiserver");
    }

    #[test]
    fn deployment_operations_follow_upstream_naming() {
        let registry = Registry::build();
        let paths = group_version(&registry, "apps", "v1");
        let ids: Vec<&str> = paths.iter().flat_map(|p| p.ops.iter().map(|o| o.id.as_str())).collect();
        for id in [
            "getAppsV1APIResources",
            "listAppsV1NamespacedDeployment",
            "createAppsV1NamespacedDeployment",
            "deleteAppsV1CollectionNamespacedDeployment",
            "readAppsV1NamespacedDeployment",
            "replaceAppsV1NamespacedDeployment",
            "patchAppsV1NamespacedDeployment",
            "deleteAppsV1NamespacedDeployment",
            "listAppsV1DeploymentForAllNamespaces",
            "watchAppsV1NamespacedDeploymentList",
            "watchAppsV1NamespacedDeployment",
            "watchAppsV1DeploymentListForAllNamespaces",
            "readAppsV1NamespacedDeploymentScale",
            "patchAppsV1NamespacedDeploymentStatus",
        ] {
            assert!(ids.contains(&id), "missing {id}");
        }
        let scale = paths
            .iter()
            .find(|p| p.path == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale")
            .expect("scale path");
        let patch = scale.ops.iter().find(|o| o.method == "patch").expect("patch");
        assert_eq!(patch.gvk, Some(Gvk::new("autoscaling", "v1", "Scale")));
        assert_eq!(patch.response.as_deref(), Some("io.k8s.api.autoscaling.v1.Scale"));
    }

    #[test]
    fn pod_connect_and_log_operations_exist() {
        let registry = Registry::build();
        let paths = group_version(&registry, "", "v1");
        let find = |path: &str| paths.iter().find(|p| p.path == path).unwrap_or_else(|| panic!("missing {path}"));
        let exec = find("/api/v1/namespaces/{namespace}/pods/{name}/exec");
        let ids: Vec<&str> = exec.ops.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["connectCoreV1GetNamespacedPodExec", "connectCoreV1PostNamespacedPodExec"]);
        assert!(exec.params.iter().any(|p| p.name == "command"));
        let log = find("/api/v1/namespaces/{namespace}/pods/{name}/log");
        assert_eq!(log.ops[0].media, Media::Text);
        let proxy = find("/api/v1/nodes/{name}/proxy/{path}");
        assert_eq!(proxy.ops.len(), 7);
        let eviction = find("/api/v1/namespaces/{namespace}/pods/{name}/eviction");
        assert_eq!(eviction.ops[0].id, "createCoreV1NamespacedPodEviction");
        assert_eq!(eviction.ops[0].response.as_deref(), Some("io.k8s.api.policy.v1.Eviction"));
        let finalize = find("/api/v1/namespaces/{name}/finalize");
        assert_eq!(finalize.ops[0].id, "replaceCoreV1NamespaceFinalize");
    }
}
