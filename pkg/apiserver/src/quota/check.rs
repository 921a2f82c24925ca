//! Whether one request fits the namespace's quotas, and the usage each quota would show if it
//! were admitted (upstream's `CheckRequest`, without the limited-resources configuration).

use k1s_api::quota::usage::{Evaluator, Operation};
use k1s_api::quota::{self, ResourceList, ScopeSelector};
use serde_json::Value;
use std::borrow::Borrow;
use std::sync::{Arc, OnceLock};

/// A stored ResourceQuota as admission reads it: `status.hard` is what is enforced (the quota
/// controller copies `spec.hard` there) and `status.used` what is charged.
#[derive(Clone, Debug)]
pub struct QuotaDoc {
    pub name: String,
    /// The stored quota, shared: a batch copies each quota's usage, not the whole object.
    pub object: Arc<Value>,
    pub hard: ResourceList,
    pub used: ResourceList,
    /// The scope requirements of its spec, read once.
    pub scopes: Vec<ScopeSelector>,
}

impl QuotaDoc {
    pub fn new(object: Value) -> QuotaDoc {
        QuotaDoc {
            name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string(),
            hard: quota::parse_list(object.pointer("/status/hard")),
            used: quota::parse_list(object.pointer("/status/used")),
            scopes: quota::scope_selectors(&object),
            object: Arc::new(object),
        }
    }

    /// Whether the quota applies to `obj`: it limits something the evaluator measures and the
    /// object falls in all its scopes (upstream's `generic.Matches`).
    pub fn matches(&self, eval: &Evaluator, obj: &Value) -> bool {
        !eval.matching_resources(self.hard.keys()).is_empty() && eval.matches_scopes(&self.scopes, obj)
    }
}

/// The request being checked.
pub struct Request<'a> {
    pub operation: Operation,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
    /// A write through `/status` is charged but never refused for exceeding.
    pub status: bool,
    pub now: jiff::Timestamp,
}

/// [`check_request_with`] of a request checked once.
#[cfg(test)]
pub fn check_request<D: Borrow<QuotaDoc>>(
    quotas: &[D],
    eval: &Evaluator,
    req: &Request<'_>,
) -> Result<Vec<Option<ResourceList>>, String> {
    check_request_with(quotas, eval, req, &OnceLock::new())
}

/// For each quota (same order as `quotas`), the new `status.used` if the request changes it.
/// `Err` is the reason of a refusal (the text after `… is forbidden: `). The request's usage,
/// which depends only on the request, is computed at most once into `usage`: a request
/// checked again (in its batch, after its first check) reuses it.
pub fn check_request_with<D: Borrow<QuotaDoc>>(
    quotas: &[D],
    eval: &Evaluator,
    req: &Request<'_>,
    usage: &OnceLock<ResourceList>,
) -> Result<Vec<Option<ResourceList>>, String> {
    let mut out = vec![None; quotas.len()];
    let mut interesting = Vec::new();
    for (i, q) in quotas.iter().map(Borrow::borrow).enumerate() {
        if !q.matches(eval, req.object) {
            continue;
        }
        let restricted = eval.matching_resources(q.hard.keys());
        eval.constraints(&restricted, req.object).map_err(|e| format!("failed quota: {}: {e}", q.name))?;
        if restricted.iter().any(|r| !q.used.contains_key(r)) {
            let mut names = restricted.clone();
            names.sort();
            return Err(format!("status unknown for quota: {}, resources: {}", q.name, names.join(",")));
        }
        interesting.push(i);
    }
    if interesting.is_empty() {
        return Ok(out);
    }
    let input = usage.get_or_init(|| eval.usage(req.object, req.now));
    let negative = quota::negative(input);
    if !negative.is_empty() {
        return Err(format!("quota usage is negative for resource(s): {}", negative.join(",")));
    }
    let mut deltas: Vec<(usize, ResourceList)> = interesting.iter().map(|i| (*i, input.clone())).collect();
    if req.operation == Operation::Update {
        let Some(old) = req.old_object else {
            return Err("unable to get previous usage since prior version of object was not found".into());
        };
        if old.pointer("/metadata/resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty()) {
            let delta = quota::subtract_non_negative(input, &eval.usage(old, req.now));
            for (i, d) in &mut deltas {
                if quotas[*i].borrow().matches(eval, old) {
                    *d = delta.clone();
                }
            }
        }
    }
    for (i, delta) in deltas {
        let delta = quota::remove_zeros(&delta);
        if delta.is_empty() {
            continue;
        }
        let q = quotas[i].borrow();
        let requested = quota::mask(&delta, q.hard.keys());
        let new_used = quota::add(&q.used, &requested);
        if !req.status {
            let masked = quota::mask(&new_used, requested.keys());
            let exceeded = quota::exceeded(&masked, &q.hard);
            if !exceeded.is_empty() {
                return Err(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    q.name,
                    quota::pretty_print(&quota::mask(&requested, &exceeded)),
                    quota::pretty_print(&quota::mask(&q.used, &exceeded)),
                    quota::pretty_print(&quota::mask(&q.hard, &exceeded)),
                ));
            }
        }
        out[i] = Some(new_used);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(name: &str, hard: Value, used: Value, spec: Value) -> QuotaDoc {
        QuotaDoc::new(json!({"metadata": {"name": name}, "spec": spec, "status": {"hard": hard, "used": used}}))
    }

    fn create(obj: &Value) -> Request<'_> {
        Request {
            operation: Operation::Create,
            object: obj,
            old_object: None,
            status: false,
            now: jiff::Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_pod_over_the_pod_count_is_refused_with_upstreams_message() {
        let pods = Evaluator::new("", "pods");
        let q = [doc("q", json!({"pods": "2"}), json!({"pods": "2"}), json!({}))];
        let pod = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            check_request(&q, &pods, &create(&pod)).expect_err("refused"),
            "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        );
        let q = [doc("q", json!({"pods": "2"}), json!({"pods": "1"}), json!({}))];
        let out = check_request(&q, &pods, &create(&pod)).expect("fits");
        assert_eq!(out[0].as_ref().map(quota::pretty_print).as_deref(), Some("pods=2"));
    }

    #[test]
    fn quotas_without_usage_and_pods_without_requests_are_refused() {
        let pods = Evaluator::new("", "pods");
        let pod = json!({"spec": {"containers": [{"name": "c"}]}});
        let unknown = [doc("q", json!({"pods": "2"}), json!({}), json!({}))];
        assert_eq!(
            check_request(&unknown, &pods, &create(&pod)).expect_err("refused"),
            "status unknown for quota: q, resources: pods"
        );
        let cpu = [doc("q", json!({"requests.cpu": "1"}), json!({"requests.cpu": "0"}), json!({}))];
        assert_eq!(
            check_request(&cpu, &pods, &create(&pod)).expect_err("refused"),
            "failed quota: q: must specify requests.cpu for: c"
        );
    }

    #[test]
    fn scoped_quotas_only_charge_matching_pods() {
        let pods = Evaluator::new("", "pods");
        let q = [doc("be", json!({"pods": "1"}), json!({"pods": "1"}), json!({"scopes": ["BestEffort"]}))];
        let burstable = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(check_request(&q, &pods, &create(&burstable)).expect("not in scope")[0], None);
        let be = json!({"spec": {"containers": [{"name": "c"}]}});
        assert!(check_request(&q, &pods, &create(&be)).is_err());
    }

    #[test]
    fn service_updates_charge_only_the_difference() {
        let svcs = Evaluator::new("", "services");
        let q = [doc(
            "q",
            json!({"services.nodeports": "2", "services": "5"}),
            json!({"services.nodeports": "1", "services": "1"}),
            json!({}),
        )];
        let old = json!({"metadata": {"resourceVersion": "5"}, "spec": {"type": "NodePort", "ports": [{"port": 1}]}});
        let new = json!({"spec": {"type": "NodePort", "ports": [{"port": 1}, {"port": 2}]}});
        let req = Request {
            operation: Operation::Update,
            object: &new,
            old_object: Some(&old),
            status: false,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let out = check_request(&q, &svcs, &req).expect("fits");
        assert_eq!(out[0].as_ref().map(quota::pretty_print).as_deref(), Some("services=1,services.nodeports=2"));
    }
}
