//! What discovery shows of the remote group-versions: each in `/apis` (its group listed after
//! the served ones, groups by `groupPriorityMinimum` then name, versions by `versionPriority`
//! then Kubernetes version order, as upstream's aggregator sorts them), in `/apis/<group>`, and
//! in aggregated discovery with the resources of the `APIResourceList` its backend last served.

use super::{Aggregator, Remote};
use serde_json::{json, Map, Value};

/// Kubernetes version order: GA over beta over alpha, then by number (`v2 > v1 > v1beta2`).
fn version_rank(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or("");
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let Ok(major) = rest[..digits].parse::<u32>() else { return (0, 0, 0) };
    let tail = &rest[digits..];
    let minor = |t: &str| t.parse::<u32>().ok();
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta").and_then(minor) {
        (2, major, n)
    } else if let Some(n) = tail.strip_prefix("alpha").and_then(minor) {
        (1, major, n)
    } else {
        (0, 0, 0)
    }
}

/// The remote APIServices by group, groups and versions in upstream's order.
fn by_group(remotes: &[Remote]) -> Vec<(String, Vec<&Remote>)> {
    let mut groups: Vec<(String, Vec<&Remote>)> = Vec::new();
    for r in remotes.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) => vs.push(r),
            None => groups.push((r.group.clone(), vec![r])),
        }
    }
    for (_, vs) in groups.iter_mut() {
        vs.sort_by(|a, b| {
            b.version_priority
                .cmp(&a.version_priority)
                .then_with(|| version_rank(&b.version).cmp(&version_rank(&a.version)))
        });
    }
    let priority = |vs: &[&Remote]| vs.iter().map(|r| r.group_priority).max().unwrap_or(0);
    groups.sort_by(|(ga, a), (gb, b)| priority(b).cmp(&priority(a)).then_with(|| ga.cmp(gb)));
    groups
}

fn group_version(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// An `APIResourceList`'s resources as aggregated discovery's `APIResourceDiscovery` entries.
fn resources_v2(list: &Value, group: &str, version: &str) -> Vec<Value> {
    let all: Vec<&Value> = list.get("resources").and_then(Value::as_array).into_iter().flatten().collect();
    let s = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let kind_of = |r: &Value| {
        let g = r.get("group").and_then(Value::as_str).unwrap_or(group);
        let v = r.get("version").and_then(Value::as_str).unwrap_or(version);
        json!({"group": g, "version": v, "kind": s(r, "kind")})
    };
    let mut out = Vec::new();
    for r in all.iter().filter(|r| !s(r, "name").contains('/')) {
        let name = s(r, "name");
        let mut e = Map::new();
        e.insert("resource".into(), json!(name));
        e.insert("responseKind".into(), kind_of(r));
        e.insert(
            "scope".into(),
            json!(if r.get("namespaced").and_then(Value::as_bool) == Some(true) { "Namespaced" } else { "Cluster" }),
        );
        e.insert("singularResource".into(), json!(s(r, "singularName")));
        e.insert("verbs".into(), r.get("verbs").cloned().unwrap_or(json!([])));
        for k in ["shortNames", "categories"] {
            if let Some(v) = r.get(k).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                e.insert(k.into(), v.clone());
            }
        }
        let subs: Vec<Value> = all
            .iter()
            .filter_map(|sr| {
                let full = s(sr, "name");
                let sub = full.strip_prefix(&format!("{name}/"))?.to_string();
                Some(json!({"subresource": sub, "responseKind": kind_of(sr),
                            "verbs": sr.get("verbs").cloned().unwrap_or(json!([]))}))
            })
            .collect();
        if !subs.is_empty() {
            e.insert("subresources".into(), Value::Array(subs));
        }
        out.push(Value::Object(e));
    }
    out
}

impl Aggregator {
    /// Adds the remote groups and versions to an `APIGroupList` (`GET /apis`).
    pub fn merge_group_list(&self, doc: &mut Value) {
        let remotes = self.remotes();
        let Some(groups) = doc.get_mut("groups").and_then(Value::as_array_mut) else { return };
        for (group, versions) in by_group(&remotes) {
            let entries: Vec<Value> = versions.iter().map(|r| group_version(&group, &r.version)).collect();
            match groups.iter_mut().find(|g| g["name"] == group.as_str()) {
                Some(existing) => {
                    if let Some(vs) = existing.get_mut("versions").and_then(Value::as_array_mut) {
                        for e in entries {
                            if !vs.iter().any(|v| v["version"] == e["version"]) {
                                vs.push(e);
                            }
                        }
                    }
                }
                None => groups.push(json!({"name": group, "versions": entries, "preferredVersion": entries.first()})),
            }
        }
    }

    /// `GET /apis/<group>` of a group only remote APIServices serve.
    pub fn group_doc(&self, group: &str) -> Option<Value> {
        let remotes = self.remotes();
        let (name, versions) = by_group(&remotes).into_iter().find(|(g, _)| g == group)?;
        let entries: Vec<Value> = versions.iter().map(|r| group_version(&name, &r.version)).collect();
        Some(json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": entries,
                    "preferredVersion": entries.first()}))
    }

    /// Adds the remote group-versions whose backends answered to an aggregated discovery
    /// document of `/apis`.
    pub fn merge_aggregated(&self, doc: &mut Value) {
        let remotes = self.remotes();
        let docs = self.discovery_docs();
        let Some(items) = doc.get_mut("items").and_then(Value::as_array_mut) else { return };
        for (group, versions) in by_group(&remotes) {
            let entries: Vec<Value> = versions
                .iter()
                .filter_map(|r| {
                    let list = docs.get(&r.name)?;
                    Some(json!({"version": r.version, "resources": resources_v2(list, &group, &r.version),
                                "freshness": "Current"}))
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            match items.iter_mut().find(|i| i["metadata"]["name"] == group.as_str()) {
                Some(existing) => {
                    if let Some(vs) = existing.get_mut("versions").and_then(Value::as_array_mut) {
                        for e in entries {
                            if !vs.iter().any(|v| v["version"] == e["version"]) {
                                vs.push(e);
                            }
                        }
                    }
                }
                None => {
                    items.push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": entries}))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str, group_priority: i64, version_priority: i64) -> Remote {
        let (version, group) = name.split_once('.').unwrap_or((name, ""));
        Remote {
            name: name.into(),
            group: group.into(),
            version: version.into(),
            group_priority,
            version_priority,
            namespace: "default".into(),
            service: "api".into(),
            port: 443,
            ca_bundle: Vec::new(),
            insecure: false,
            available: true,
        }
    }

    #[test]
    fn groups_sort_by_priority_and_versions_by_priority_then_kube_order() {
        let rs = vec![
            remote("v1beta1.b.io", 100, 15),
            remote("v1.b.io", 100, 15),
            remote("v1alpha1.a.io", 100, 9),
            remote("v1.c.io", 2000, 9),
        ];
        let order: Vec<(String, Vec<String>)> =
            by_group(&rs).into_iter().map(|(g, vs)| (g, vs.iter().map(|r| r.version.clone()).collect())).collect();
        assert_eq!(
            order,
            vec![
                ("c.io".to_string(), vec!["v1".to_string()]),
                ("a.io".to_string(), vec!["v1alpha1".to_string()]),
                ("b.io".to_string(), vec!["v1".to_string(), "v1beta1".to_string()]),
            ]
        );
    }

    #[test]
    fn resource_lists_become_aggregated_entries_with_subresources() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "test.k1s.io/v1alpha1", "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
             "verbs": ["get", "list"], "shortNames": ["fl"]},
            {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder", "verbs": ["get"]}]});
        let r = resources_v2(&list, "test.k1s.io", "v1alpha1");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0]["resource"], "flunders");
        assert_eq!(r[0]["scope"], "Namespaced");
        assert_eq!(r[0]["responseKind"], json!({"group": "test.k1s.io", "version": "v1alpha1", "kind": "Flunder"}));
        assert_eq!(r[0]["shortNames"], json!(["fl"]));
        assert_eq!(r[0]["subresources"][0]["subresource"], "status");
    }
}
