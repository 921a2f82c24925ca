//! Discovery documents: `/api`, `/apis`, `/apis/<group>`, per-group-version `APIResourceList`s,
//! and aggregated discovery (`apidiscovery.k8s.io` v2 and v2beta1), of the resources served:
//! the built-ins, then the custom resources of the established definitions.

use k1s_api::resources::ResourceInfo;
use serde_json::{json, Value};

/// What discovery lists: every served resource, built-ins first.
pub type Served<'a> = &'a [&'static ResourceInfo];

/// Groups in the order discovery lists them (upstream's priority order, roughly).
fn groups(served: Served<'_>) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in served {
        match out.iter_mut().find(|(og, _)| *og == r.group) {
            Some((_, vs)) if vs.contains(&r.version) => {}
            Some((_, vs)) => vs.push(r.version),
            None => out.push((r.group, vec![r.version])),
        }
    }
    // Preferred version first: the highest stable one (v2 over v1 for autoscaling).
    for (_, vs) in out.iter_mut() {
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

fn version_priority(v: &str) -> (u8, u32, u32) {
    // v2 > v1 > v1beta2 > v1beta1 > v1alpha1
    let rest = v.trim_start_matches('v');
    let (num, tail) = rest.split_at(rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len()));
    let major = num.parse::<u32>().unwrap_or(0);
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(b) = tail.strip_prefix("beta") {
        (2, major, b.parse().unwrap_or(0))
    } else if let Some(a) = tail.strip_prefix("alpha") {
        (1, major, a.parse().unwrap_or(0))
    } else {
        (0, major, 0)
    }
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `GET /api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(group: &str, versions: &[&str], server_address: &str) -> Value {
    let vs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": gv(group, v), "version": v})).collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `GET /apis`.
pub fn api_group_list(served: Served<'_>, server_address: &str) -> Value {
    let groups: Vec<Value> = groups(served)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| {
            let mut v = api_group(g, &vs, server_address);
            if let Some(m) = v.as_object_mut() {
                m.remove("serverAddressByClientCIDRs");
            }
            v
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`.
pub fn api_group_doc(served: Served<'_>, group: &str, server_address: &str) -> Option<Value> {
    let (g, vs) = groups(served).into_iter().find(|(g, _)| *g == group && !g.is_empty())?;
    let mut v = api_group(g, &vs, server_address);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    if let Some(m) = v.as_object_mut() {
        m.remove("serverAddressByClientCIDRs");
    }
    Some(v)
}

fn resources_of(served: Served<'_>, group: &str, version: &str) -> Vec<&'static ResourceInfo> {
    served.iter().copied().filter(|r| r.group == group && r.version == version).collect()
}

/// `GET /api/v1`, `GET /apis/<group>/<version>`.
pub fn api_resource_list(served: Served<'_>, group: &str, version: &str) -> Option<Value> {
    let rs = resources_of(served, group, version);
    if rs.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for r in &rs {
        let mut e = json!({
            "name": r.resource,
            "singularName": r.singular,
            "namespaced": r.namespaced(),
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        if let Some(h) = k1s_api::conversion::storage_version_hash(r) {
            e["storageVersionHash"] = json!(h);
        }
        list.push(e);
        for s in &r.subresources {
            let mut e = json!({
                "name": format!("{}/{}", r.resource, s.name),
                "singularName": "",
                "namespaced": r.namespaced(),
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if s.group != r.group || s.version != r.version {
                e["group"] = json!(s.group);
                e["version"] = json!(s.version);
            }
            list.push(e);
        }
    }
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv(group, version), "resources": list}))
}

/// Which aggregated discovery version an Accept header asks for, if any.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("as=APIGroupDiscoveryList") && has("g=apidiscovery.k8s.io") {
            if has("v=v2") {
                return Some("v2");
            }
            if has("v=v2beta1") {
                return Some("v2beta1");
            }
        }
    }
    None
}

/// Aggregated discovery for `/api` (core) or `/apis` (named groups).
pub fn aggregated(served: Served<'_>, core: bool, version: &str) -> Value {
    let items: Vec<Value> = groups(served)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = resources_of(served, g, v)
                        .into_iter()
                        .map(|r| {
                            let mut e = json!({
                                "resource": r.resource,
                                "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                                "scope": if r.namespaced() { "Namespaced" } else { "Cluster" },
                                "singularResource": r.singular,
                                "verbs": r.verbs,
                            });
                            if !r.short_names.is_empty() {
                                e["shortNames"] = json!(r.short_names);
                            }
                            if !r.categories.is_empty() {
                                e["categories"] = json!(r.categories);
                            }
                            if !r.subresources.is_empty() {
                                e["subresources"] = Value::Array(
                                    r.subresources
                                        .iter()
                                        .map(|s| {
                                            json!({
                                                "subresource": s.name,
                                                "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                                                "verbs": s.verbs,
                                            })
                                        })
                                        .collect(),
                                );
                            }
                            e
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtins() -> Vec<&'static ResourceInfo> {
        k1s_api::resources::all().iter().collect()
    }

    #[test]
    fn autoscaling_prefers_v2_and_core_lists_subresources() {
        let served = builtins();
        let g = api_group_doc(&served, "autoscaling", "127.0.0.1:6443").expect("group");
        assert_eq!(g["preferredVersion"]["version"], "v2");
        let core = api_resource_list(&served, "", "v1").expect("core");
        let names: Vec<&str> =
            core["resources"].as_array().expect("list").iter().filter_map(|r| r["name"].as_str()).collect();
        assert!(names.contains(&"pods/status") && names.contains(&"pods/exec") && names.contains(&"namespaces"));
        let agg = aggregated(&served, false, "v2");
        let apps =
            agg["items"].as_array().expect("items").iter().find(|i| i["metadata"]["name"] == "apps").expect("apps");
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .expect("r")
            .iter()
            .find(|r| r["resource"] == "deployments")
            .expect("d");
        assert_eq!(
            deploy["subresources"]
                .as_array()
                .expect("subs")
                .iter()
                .find(|s| s["subresource"] == "scale")
                .expect("scale")["responseKind"]["kind"],
            "Scale"
        );
        assert_eq!(
            aggregated_version("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"),
            Some("v2")
        );
    }
}
