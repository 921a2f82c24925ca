//! The ClusterRole aggregation controller: a ClusterRole with an `aggregationRule` holds, as its
//! `rules`, the rules of every other ClusterRole its selectors match (selector by selector, roles
//! in name order, each rule once), as upstream's clusterrole-aggregation controller writes them.
//! The API server's authorizer also resolves aggregation when it decides, so a new labelled role
//! counts at once; this makes what an aggregated role grants visible in the role itself
//! (`kubectl get clusterrole view -o yaml`, `kubectl describe clusterrole edit`).

use crate::Context;
use futures::StreamExt;
use k1s_api::selectors;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use std::sync::Arc;

const MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules `role` should hold among `all` ClusterRoles; `None` when it aggregates nothing.
pub fn aggregated_rules(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Option<Vec<PolicyRule>> {
    let agg = role.aggregation_rule.as_ref()?;
    let mut sorted: Vec<&ClusterRole> = all.iter().map(Arc::as_ref).collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for sel in agg.cluster_role_selectors.iter().flatten() {
        for other in &sorted {
            if other.metadata.name == role.metadata.name
                || !selectors::matches(Some(sel), other.metadata.labels.as_ref())
            {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Writes the aggregated rules of every aggregating role whose rules differ.
async fn sync(api: &Api<ClusterRole>, all: &[Arc<ClusterRole>]) {
    for role in all {
        let Some(rules) = aggregated_rules(role, all) else { continue };
        if role.rules.as_deref().unwrap_or_default() == rules.as_slice() {
            continue;
        }
        let name = role.metadata.name.clone().unwrap_or_default();
        let mut updated = (**role).clone();
        updated.rules = Some(rules);
        let pp = PostParams { field_manager: Some(MANAGER.into()), ..Default::default() };
        // A conflict means a newer version is on its way through the watch: it is synced then.
        if let Err(e) = api.replace(&name, &pp, &updated).await {
            tracing::debug!(clusterrole = %name, error = %e, "aggregating rules failed; retrying on the next change");
        }
    }
}

pub async fn run(ctx: Arc<Context>) {
    let api = Api::<ClusterRole>::all(ctx.client.clone());
    let (roles, writer) = reflector::store::<ClusterRole>();
    let mut events =
        reflector::reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff().boxed();
    loop {
        let event = tokio::select! {
            _ = ctx.cancel.cancelled() => return,
            e = events.next() => e,
        };
        match event {
            None => return,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "watching ClusterRoles failed; retrying");
                continue;
            }
            // Until the initial list is complete the cache is partial.
            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
            Some(Ok(_)) => {}
        }
        sync(&api, &roles.state()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use std::collections::BTreeMap;

    fn rule(resource: &str, verb: &str) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.into()]),
            verbs: vec![verb.into()],
            ..Default::default()
        }
    }

    fn role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>, aggregates: Option<&str>) -> Arc<ClusterRole> {
        Arc::new(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: aggregates.map(|label| AggregationRule {
                cluster_role_selectors: Some(vec![LabelSelector {
                    match_labels: Some(BTreeMap::from([(label.to_string(), "true".to_string())])),
                    ..Default::default()
                }]),
            }),
        })
    }

    #[test]
    fn aggregated_roles_take_the_matching_roles_rules_in_name_order_once_each() {
        let all = vec![
            role("view", &[("to-edit", "true")], vec![rule("stale", "get")], Some("to-view")),
            role("z-extra", &[("to-view", "true")], vec![rule("widgets", "get"), rule("pods", "get")], None),
            role("a-base", &[("to-view", "true")], vec![rule("pods", "get")], None),
            role("other", &[], vec![rule("secrets", "get")], None),
            role("edit", &[], Vec::new(), Some("to-edit")),
        ];
        let view = aggregated_rules(&all[0], &all).expect("aggregates");
        assert_eq!(view, vec![rule("pods", "get"), rule("widgets", "get")]);
        // edit takes view's rules as stored: the chain settles as each role is rewritten.
        assert_eq!(aggregated_rules(&all[4], &all), Some(vec![rule("stale", "get")]));
        assert_eq!(aggregated_rules(&all[3], &all), None);
    }
}
