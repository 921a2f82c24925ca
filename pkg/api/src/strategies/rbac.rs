//! Strategies for the rbac resources, as upstream's `pkg/apis/rbac/v1/defaults.go` and
//! `pkg/apis/rbac/validation`: path-segment names, rules with verbs, immutable role references.

use super::formats;
use super::label_selector;
use crate::field::{FieldError, Path};
use crate::meta;
use crate::strategy::{DynStrategy, NameRule, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};

pub fn cluster_role_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(ClusterRoleBindingStrategy))
}

pub fn cluster_role() -> Box<dyn DynStrategy> {
    Box::new(Typed(ClusterRoleStrategy))
}

pub fn role_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(RoleBindingStrategy))
}

pub fn role() -> Box<dyn DynStrategy> {
    Box::new(Typed(RoleStrategy))
}

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidatePolicyRule`.
fn validate_rules(rules: Option<&Vec<PolicyRule>>, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let p = Path::new("rules").index(i);
        if rule.verbs.is_empty() {
            errs.push(FieldError::required(p.child("verbs"), "verbs must contain at least one value"));
        }
        let urls = rule.non_resource_urls.clone().unwrap_or_default();
        let non_empty = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|v| !v.is_empty());
        if !urls.is_empty() {
            if namespaced {
                errs.push(FieldError::invalid(
                    p.child("nonResourceURLs"),
                    formats::to_value(&urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if non_empty(&rule.api_groups) || non_empty(&rule.resources) || non_empty(&rule.resource_names) {
                errs.push(FieldError::invalid(
                    p.child("nonResourceURLs"),
                    formats::to_value(&urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if !non_empty(&rule.api_groups) {
            errs.push(FieldError::required(p.child("apiGroups"), "resource rules must supply at least one api group"));
        }
        if !non_empty(&rule.resources) {
            errs.push(FieldError::required(p.child("resources"), "resource rules must supply at least one resource"));
        }
    }
    errs
}

fn validate_role_ref(r: &RoleRef, kinds: &[&str]) -> Vec<FieldError> {
    let p = Path::new("roleRef");
    let mut errs = Vec::new();
    if r.api_group != GROUP {
        errs.push(FieldError::not_supported(p.child("apiGroup"), r.api_group.as_str(), &[GROUP]));
    }
    if !kinds.contains(&r.kind.as_str()) {
        errs.push(FieldError::not_supported(p.child("kind"), r.kind.as_str(), kinds));
    }
    if r.name.is_empty() {
        errs.push(FieldError::required(p.child("name"), ""));
    } else {
        errs.extend(formats::each_invalid(&p.child("name"), &r.name, meta::path_segment_name(&r.name)));
    }
    errs
}

/// `ValidateRoleBindingSubject`.
fn validate_subjects(subjects: Option<&Vec<Subject>>, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        let p = Path::new("subjects").index(i);
        if s.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        }
        let group = s.api_group.as_deref().unwrap_or_default();
        match s.kind.as_str() {
            "ServiceAccount" => {
                if !s.name.is_empty() {
                    errs.extend(formats::validate_dns_subdomain(&s.name, &p.child("name")));
                }
                if !group.is_empty() {
                    errs.push(FieldError::not_supported(p.child("apiGroup"), group, &[""]));
                }
                if !namespaced && s.namespace.as_deref().unwrap_or_default().is_empty() {
                    errs.push(FieldError::required(p.child("namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != GROUP {
                    errs.push(FieldError::not_supported(p.child("apiGroup"), group, &[GROUP]));
                }
            }
            other => errs.push(FieldError::not_supported(p.child("kind"), other, &["ServiceAccount", "User", "Group"])),
        }
    }
    errs
}

fn set_binding_defaults(role_ref: &mut RoleRef, subjects: Option<&mut Vec<Subject>>) {
    if role_ref.api_group.is_empty() {
        role_ref.api_group = GROUP.into();
    }
    for s in subjects.into_iter().flatten() {
        if s.api_group.as_deref().unwrap_or_default().is_empty() {
            match s.kind.as_str() {
                "ServiceAccount" => s.api_group = Some(String::new()),
                "User" | "Group" => s.api_group = Some(GROUP.into()),
                _ => {}
            }
        }
    }
}

fn role_ref_unchanged(new: &RoleRef, old: &RoleRef) -> Vec<FieldError> {
    if new == old {
        return Vec::new();
    }
    vec![FieldError::invalid("roleRef", formats::to_value(new), "cannot change roleRef")]
}

/// Role: rules need verbs, API groups and resources; no non-resource URLs.
pub struct RoleStrategy;

impl Strategy for RoleStrategy {
    type Object = Role;

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, r: &Role) -> Vec<FieldError> {
        validate_rules(r.rules.as_ref(), true)
    }
}

impl ObjectHooks for RoleStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// ClusterRole: like Role, plus non-resource URLs and aggregation rules.
pub struct ClusterRoleStrategy;

impl Strategy for ClusterRoleStrategy {
    type Object = ClusterRole;

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, r: &ClusterRole) -> Vec<FieldError> {
        let mut errs = validate_rules(r.rules.as_ref(), false);
        if let Some(agg) = &r.aggregation_rule {
            let p = Path::new("aggregationRule").child("clusterRoleSelectors");
            let selectors = agg.cluster_role_selectors.clone().unwrap_or_default();
            if selectors.is_empty() {
                errs.push(FieldError::required(
                    &p,
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                ));
            }
            for (i, s) in selectors.iter().enumerate() {
                errs.extend(label_selector::validate(s, &p.index(i)));
            }
        }
        errs
    }
}

impl ObjectHooks for ClusterRoleStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// RoleBinding: reference a Role or ClusterRole; the reference never changes.
pub struct RoleBindingStrategy;

impl Strategy for RoleBindingStrategy {
    type Object = RoleBinding;

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn set_defaults(&self, b: &mut RoleBinding) {
        set_binding_defaults(&mut b.role_ref, b.subjects.as_mut());
    }

    fn validate(&self, b: &RoleBinding) -> Vec<FieldError> {
        let mut errs = validate_role_ref(&b.role_ref, &["Role", "ClusterRole"]);
        errs.extend(validate_subjects(b.subjects.as_ref(), true));
        errs
    }

    fn validate_update(&self, new: &RoleBinding, old: &RoleBinding) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(role_ref_unchanged(&new.role_ref, &old.role_ref));
        errs
    }
}

impl ObjectHooks for RoleBindingStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// ClusterRoleBinding: reference a ClusterRole; service account subjects name their namespace.
pub struct ClusterRoleBindingStrategy;

impl Strategy for ClusterRoleBindingStrategy {
    type Object = ClusterRoleBinding;

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn set_defaults(&self, b: &mut ClusterRoleBinding) {
        set_binding_defaults(&mut b.role_ref, b.subjects.as_mut());
    }

    fn validate(&self, b: &ClusterRoleBinding) -> Vec<FieldError> {
        let mut errs = validate_role_ref(&b.role_ref, &["ClusterRole"]);
        errs.extend(validate_subjects(b.subjects.as_ref(), false));
        errs
    }

    fn validate_update(&self, new: &ClusterRoleBinding, old: &ClusterRoleBinding) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(role_ref_unchanged(&new.role_ref, &old.role_ref));
        errs
    }
}

impl ObjectHooks for ClusterRoleBindingStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| Some(s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            api_groups: v(groups),
            resources: v(resources),
            ..Default::default()
        }
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let r = Role { rules: Some(vec![rule(&["get"], &[""], &["pods"]), rule(&[], &[], &[])]), ..Default::default() };
        assert_eq!(
            messages(&RoleStrategy.validate(&r)),
            [
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].resources: Required value: resource rules must supply at least one resource"
            ]
        );
        assert_eq!(RoleStrategy.name_rule(), NameRule::PathSegment);
        let urls = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz".into()]),
            ..Default::default()
        };
        assert!(ClusterRoleStrategy
            .validate(&ClusterRole { rules: Some(vec![urls.clone()]), ..Default::default() })
            .is_empty());
        let errs = RoleStrategy.validate(&Role { rules: Some(vec![urls]), ..Default::default() });
        assert_eq!(errs.len(), 1);
        assert_eq!(
            (errs[0].field.as_str(), errs[0].detail.as_str()),
            ("rules[0].nonResourceURLs", "namespaced rules cannot apply to non-resource URLs")
        );
    }

    #[test]
    fn bindings_default_groups_and_check_role_ref() {
        let mut b = RoleBinding {
            role_ref: RoleRef { api_group: String::new(), kind: "Role".into(), name: "reader".into() },
            subjects: Some(vec![
                Subject { kind: "User".into(), name: "alice".into(), ..Default::default() },
                Subject { kind: "ServiceAccount".into(), name: "default".into(), ..Default::default() },
            ]),
            ..Default::default()
        };
        RoleBindingStrategy.set_defaults(&mut b);
        assert_eq!(b.role_ref.api_group, GROUP);
        let subjects = b.subjects.clone().expect("subjects");
        assert_eq!(subjects[0].api_group.as_deref(), Some(GROUP));
        assert_eq!(subjects[1].api_group.as_deref(), Some(""));
        assert!(RoleBindingStrategy.validate(&b).is_empty());
        let mut changed = b.clone();
        changed.role_ref.name = "writer".into();
        let m = messages(&RoleBindingStrategy.validate_update(&changed, &b));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("roleRef: Invalid value:") && m[0].ends_with("cannot change roleRef"));
        let mut bad = b.clone();
        bad.role_ref.kind = "Pod".into();
        assert_eq!(
            messages(&RoleBindingStrategy.validate(&bad)),
            ["roleRef.kind: Unsupported value: \"Pod\": supported values: \"Role\", \"ClusterRole\""]
        );
    }

    #[test]
    fn cluster_role_binding_service_accounts_need_namespace() {
        let mut b = ClusterRoleBinding {
            role_ref: RoleRef { api_group: GROUP.into(), kind: "ClusterRole".into(), name: "admin".into() },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: "default".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        ClusterRoleBindingStrategy.set_defaults(&mut b);
        assert_eq!(messages(&ClusterRoleBindingStrategy.validate(&b)), ["subjects[0].namespace: Required value"]);
    }
}
