//! Score plugins with upstream's default weights: NodeResourcesFit (LeastAllocated, 1),
//! NodeResourcesBalancedAllocation (1), ImageLocality (1), NodeAffinity preferred terms (2),
//! TaintToleration PreferNoSchedule (3) and InterPodAffinity preferred terms (2). Each plugin
//! scores 0–100 per node after its normalization; the node's score is the weighted sum.

use crate::cache::Cache;
use crate::interpod::preferred_scores;
use crate::matching::{term_matches, tolerated};
use crate::node_info::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::Toleration;

pub const MAX_NODE_SCORE: i64 = 100;

const WEIGHT_FIT: i64 = 1;
const WEIGHT_BALANCED: i64 = 1;
const WEIGHT_IMAGE: i64 = 1;
const WEIGHT_NODE_AFFINITY: i64 = 2;
const WEIGHT_TAINT: i64 = 3;
const WEIGHT_INTER_POD: i64 = 2;

const MB: i64 = 1024 * 1024;
/// Images smaller than this add nothing to ImageLocality.
const IMAGE_MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, images beyond this size add nothing more.
const IMAGE_MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// LeastAllocated over CPU and memory (weights 1 and 1), with the non-zero request defaults.
fn least_allocated(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let pairs = [
        (node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu, node.allocatable.milli_cpu),
        (node.non_zero_requested.memory + pod.non_zero_requests.memory, node.allocatable.memory),
    ];
    let (mut sum, mut weights) = (0, 0);
    for (req, alloc) in pairs {
        if alloc == 0 {
            continue;
        }
        sum += least_requested(req, alloc);
        weights += 1;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// BalancedAllocation: how evenly CPU and memory would be used; best-effort pods are not scored.
fn balanced_allocation(pod: &PodInfo, node: &NodeInfo) -> i64 {
    if pod.requests.milli_cpu == 0 && pod.requests.memory == 0 {
        return 0;
    }
    let pairs = [
        (node.requested.milli_cpu + pod.requests.milli_cpu, node.allocatable.milli_cpu),
        (node.requested.memory + pod.requests.memory, node.allocatable.memory),
    ];
    let fractions: Vec<f64> = pairs
        .iter()
        .filter(|(_, alloc)| *alloc != 0)
        .map(|(req, alloc)| (*req as f64 / *alloc as f64).min(1.0))
        .collect();
    let std = if fractions.len() == 2 { ((fractions[0] - fractions[1]) / 2.0).abs() } else { 0.0 };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Upstream's `normalizedImageName`: an image without tag or digest means `:latest`.
fn normalized_image(name: &str) -> String {
    if name.rfind(':') <= name.rfind('/') {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// ImageLocality: the sizes of the pod's images already on the node, scaled by how widely
/// each is spread across nodes.
fn image_locality(cache: &Cache, pod: &PodInfo, node: &NodeInfo, total_nodes: usize) -> i64 {
    let Some(n) = &node.node else { return 0 };
    let on_node: Vec<&str> = n
        .status
        .as_ref()
        .and_then(|s| s.images.as_ref())
        .into_iter()
        .flatten()
        .flat_map(|i| i.names.iter().flatten())
        .map(String::as_str)
        .collect();
    let spec = pod.spec();
    let containers: Vec<&str> =
        spec.init_containers.iter().flatten().chain(&spec.containers).filter_map(|c| c.image.as_deref()).collect();
    let mut sum = 0i64;
    for image in &containers {
        let image = normalized_image(image);
        if !on_node.contains(&image.as_str()) {
            continue;
        }
        if let Some(state) = cache.image(&image) {
            let spread = state.num_nodes as f64 / total_nodes.max(1) as f64;
            sum += (state.size as f64 * spread) as i64;
        }
    }
    let max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * containers.len().max(1) as i64;
    let clamped = sum.clamp(IMAGE_MIN_THRESHOLD, max_threshold);
    MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD) / (max_threshold - IMAGE_MIN_THRESHOLD)
}

fn node_affinity_preferred(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let Some(n) = &node.node else { return 0 };
    let preferred = pod
        .spec()
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or_default();
    preferred.iter().filter(|p| p.weight != 0 && term_matches(&p.preference, n)).map(|p| i64::from(p.weight)).sum()
}

fn intolerable_prefer_no_schedule(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let tolerations: Vec<Toleration> = pod
        .tolerations()
        .iter()
        .filter(|t| t.effect.as_deref().is_none_or(|e| e.is_empty() || e == "PreferNoSchedule"))
        .cloned()
        .collect();
    node.taints.iter().filter(|t| t.effect == "PreferNoSchedule" && !tolerated(&tolerations, t)).count() as i64
}

/// Upstream's `DefaultNormalizeScore`: scales to 0–100 by the maximum, optionally reversed.
fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// InterPodAffinity's min-max normalization.
fn min_max_normalize(scores: &mut [i64]) {
    let (Some(min), Some(max)) = (scores.iter().copied().min(), scores.iter().copied().max()) else { return };
    let diff = max - min;
    for s in scores.iter_mut() {
        *s = if diff > 0 { (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64 } else { 0 };
    }
}

/// The weighted total score of each of `nodes`, in order.
pub fn score_nodes(cache: &Cache, pod: &PodInfo, nodes: &[&NodeInfo]) -> Vec<i64> {
    let total_nodes = cache.num_nodes();
    let mut totals = vec![0i64; nodes.len()];
    let mut add = |scores: Vec<i64>, weight: i64| {
        for (t, s) in totals.iter_mut().zip(scores) {
            *t += s * weight;
        }
    };
    add(nodes.iter().map(|n| least_allocated(pod, n)).collect(), WEIGHT_FIT);
    add(nodes.iter().map(|n| balanced_allocation(pod, n)).collect(), WEIGHT_BALANCED);
    add(nodes.iter().map(|n| image_locality(cache, pod, n, total_nodes)).collect(), WEIGHT_IMAGE);
    let mut affinity: Vec<i64> = nodes.iter().map(|n| node_affinity_preferred(pod, n)).collect();
    default_normalize(&mut affinity, false);
    add(affinity, WEIGHT_NODE_AFFINITY);
    let mut taints: Vec<i64> = nodes.iter().map(|n| intolerable_prefer_no_schedule(pod, n)).collect();
    default_normalize(&mut taints, true);
    add(taints, WEIGHT_TAINT);
    let mut inter_pod = preferred_scores(cache, pod, nodes);
    min_max_normalize(&mut inter_pod);
    add(inter_pod, WEIGHT_INTER_POD);
    totals
}

/// Index of the best score; ties are broken by `pick(n)`, which returns a number below `n`
/// (upstream picks uniformly at random among the best).
pub fn select_best(scores: &[i64], mut pick: impl FnMut(usize) -> usize) -> Option<usize> {
    let max = scores.iter().copied().max()?;
    let best: Vec<usize> = scores.iter().enumerate().filter(|(_, s)| **s == max).map(|(i, _)| i).collect();
    let chosen = pick(best.len()).min(best.len() - 1);
    Some(best[chosen])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, NodeBuilder, PodBuilder};

    fn scores(nodes: Vec<NodeBuilder>, existing: Vec<PodBuilder>, incoming: PodBuilder) -> Vec<i64> {
        let mut cache = Cache::default();
        for n in nodes {
            cache.set_node(n.build());
        }
        for p in existing {
            let info = cache.pod_info(p.build());
            cache.set_assigned_pod(info);
        }
        let pod = cache.pod_info(incoming.build());
        let list: Vec<&NodeInfo> = cache.nodes().collect();
        score_nodes(&cache, &pod, &list)
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        let s = scores(
            vec![node("a", "4", "4Gi"), node("b", "4", "4Gi")],
            vec![pod("x").cpu("3").memory("1Gi").node("a")],
            pod("p").cpu("500m").memory("512Mi"),
        );
        assert!(s[1] > s[0], "{s:?}");
    }

    #[test]
    fn least_allocated_matches_upstream_arithmetic() {
        let cache = {
            let mut c = Cache::default();
            c.set_node(node("a", "4", "4Gi").build());
            c
        };
        let p = cache.pod_info(pod("p").cpu("1").memory("1Gi").build());
        let a = cache.node("a").expect("node");
        // cpu (4000-1000)*100/4000 = 75, memory 75: average 75.
        assert_eq!(least_allocated(&p, a), 75);
        // Balanced: both fractions 0.25, no deviation.
        assert_eq!(balanced_allocation(&p, a), 100);
        // A pod with no requests counts 100m and 200Mi when scoring.
        let empty = cache.pod_info(pod("e").build());
        assert_eq!(least_allocated(&empty, a), (97 + 95) / 2);
    }

    #[test]
    fn preferred_node_affinity_and_prefer_no_schedule_taints_steer_the_choice() {
        let s = scores(
            vec![node("a", "4", "4Gi").label("disk", "ssd"), node("b", "4", "4Gi")],
            vec![],
            pod("p").preferred_node(10, "disk", "ssd"),
        );
        assert_eq!(s[0] - s[1], WEIGHT_NODE_AFFINITY * MAX_NODE_SCORE);
        let s = scores(
            vec![node("a", "4", "4Gi").taint("soft", "x", "PreferNoSchedule"), node("b", "4", "4Gi")],
            vec![],
            pod("p"),
        );
        assert_eq!(s[1] - s[0], WEIGHT_TAINT * MAX_NODE_SCORE);
        let s = scores(
            vec![node("a", "4", "4Gi").taint("soft", "x", "PreferNoSchedule"), node("b", "4", "4Gi")],
            vec![],
            pod("p").toleration("soft", "Exists", "", "PreferNoSchedule"),
        );
        assert_eq!(s[0], s[1]);
    }

    #[test]
    fn image_locality_prefers_nodes_holding_large_images() {
        let s = scores(
            vec![node("a", "4", "4Gi").image("registry/app:v1", 500 * MB), node("b", "4", "4Gi")],
            vec![],
            pod("p").image("registry/app:v1"),
        );
        // 500MB on one of two nodes: 250MB effective, (250-23)*100/(1000-23) = 23.
        assert_eq!(s[0] - s[1], 23);
        assert_eq!(normalized_image("busybox"), "busybox:latest");
        assert_eq!(normalized_image("localhost:5000/busybox"), "localhost:5000/busybox:latest");
        assert_eq!(normalized_image("busybox:1.36"), "busybox:1.36");
    }

    fn inter_pod(nodes: Vec<NodeBuilder>, existing: Vec<PodBuilder>, incoming: PodBuilder) -> Vec<i64> {
        let mut cache = Cache::default();
        for n in nodes {
            cache.set_node(n.build());
        }
        for p in existing {
            let info = cache.pod_info(p.build());
            cache.set_assigned_pod(info);
        }
        let pod = cache.pod_info(incoming.build());
        let list: Vec<&NodeInfo> = cache.nodes().collect();
        let mut raw = preferred_scores(&cache, &pod, &list);
        min_max_normalize(&mut raw);
        raw
    }

    #[test]
    fn preferred_pod_affinity_and_anti_affinity_follow_existing_pods() {
        let nodes = || vec![node("a", "4", "4Gi"), node("b", "4", "4Gi"), node("c", "4", "4Gi")];
        let existing = || vec![pod("cache").label("app", "cache").node("a")];
        let host = "kubernetes.io/hostname";
        let s = inter_pod(nodes(), existing(), pod("p").preferred_affinity(50, "app", "cache", host));
        assert_eq!(s, vec![100, 0, 0]);
        let s = inter_pod(nodes(), existing(), pod("p").preferred_anti_affinity(50, "app", "cache", host));
        assert_eq!(s, vec![0, 100, 100]);
        // An existing pod's preference for the incoming pod counts as well, and so does its
        // required affinity (with weight 1).
        let fans = vec![
            pod("fan").preferred_affinity(5, "app", "web", host).node("b"),
            pod("hard").affinity("app", "web", host).node("c"),
        ];
        let s = inter_pod(nodes(), fans, pod("p").label("app", "web"));
        assert_eq!(s, vec![0, 100, 20]);
        // The weighted total follows.
        let totals = scores(nodes(), existing(), pod("p").preferred_affinity(50, "app", "cache", host));
        assert!(totals[0] > totals[1] && totals[1] == totals[2], "{totals:?}");
    }

    #[test]
    fn ties_are_broken_by_the_picker() {
        assert_eq!(select_best(&[5, 9, 9, 1], |_| 1), Some(2));
        assert_eq!(select_best(&[5, 9, 9, 1], |_| 0), Some(1));
        assert_eq!(select_best(&[], |_| 0), None);
    }
}
