//! Matching rules shared by the plugins: node affinity and taints are `k1s_api::node_affinity`'s
//! (shared with the DaemonSet controller), label selectors `k1s_api::selectors`'.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

static NO_LABELS: Labels = BTreeMap::new();

/// The labels of an object, or an empty map.
pub fn labels_of(labels: Option<&Labels>) -> &Labels {
    labels.unwrap_or(&NO_LABELS)
}

pub use k1s_api::node_affinity::{first_untolerated, node_matches_pod, term_matches, tolerated};
