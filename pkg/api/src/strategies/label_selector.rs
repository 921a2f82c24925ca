//! `LabelSelector` objects: validation (upstream's `ValidateLabelSelector`) and matching
//! (`LabelSelectorAsSelector(...).Matches(...)`) on the typed k8s-openapi form.

use super::formats;
use crate::field::{FieldError, Path};
use crate::meta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Validates match labels and match expressions.
pub fn validate(sel: &LabelSelector, path: &Path) -> Vec<FieldError> {
    let mut errs = formats::validate_labels(sel.match_labels.as_ref(), &path.child("matchLabels"));
    for (i, expr) in sel.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            op => errs.push(FieldError::invalid(p.child("operator"), op, "not a valid selector operator")),
        }
        errs.extend(formats::validate_qualified_name(&expr.key, &p.child("key")));
        for (j, v) in values.iter().enumerate() {
            for m in meta::label_value(v) {
                errs.push(FieldError::invalid(p.child("values").index(j), v.as_str(), m));
            }
        }
    }
    errs
}

/// Whether the selector has no requirements at all (it then matches everything).
pub fn is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty) && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether `labels` satisfy the selector; `None` when an operator is not a valid one.
pub fn matches(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> Option<bool> {
    let get = |k: &str| labels.and_then(|l| l.get(k));
    for (k, v) in sel.match_labels.iter().flatten() {
        if get(k) != Some(v) {
            return Some(false);
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let have = get(&e.key);
        let ok = match e.operator.as_str() {
            "In" => have.is_some_and(|h| values.contains(h)),
            "NotIn" => have.is_none_or(|h| !values.contains(h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => return None,
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn matching_follows_operators() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            match_expressions: Some(vec![req("tier", "In", &["a", "b"]), req("legacy", "DoesNotExist", &[])]),
        };
        let labels = BTreeMap::from([("app".to_string(), "web".to_string()), ("tier".to_string(), "a".to_string())]);
        assert_eq!(matches(&sel, Some(&labels)), Some(true));
        assert_eq!(matches(&sel, None), Some(false));
        assert!(is_empty(&LabelSelector::default()));
        assert_eq!(matches(&LabelSelector::default(), None), Some(true));
    }

    #[test]
    fn validation_reports_upstream_paths() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("bad key!".to_string(), "v".to_string())])),
            match_expressions: Some(vec![req("k", "In", &[]), req("k", "Exists", &["x"]), req("k", "Near", &[])]),
        };
        let errs = validate(&sel, &Path::new("spec").child("selector"));
        let fields: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(fields[0].split(':').next(), Some("spec.selector.matchLabels"));
        assert!(fields.contains(&"spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'".to_string()));
        assert!(fields.contains(&"spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_string()));
        assert!(fields.contains(
            &"spec.selector.matchExpressions[2].operator: Invalid value: \"Near\": not a valid selector operator"
                .to_string()
        ));
    }
}
