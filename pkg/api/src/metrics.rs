//! `metrics.k8s.io/v1beta1`, the resource metrics API that `kubectl top` reads (upstream serves
//! it from metrics-server; k1s from the API server itself): NodeMetrics and PodMetrics, which
//! are computed on request, never stored.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";

/// A node's CPU and memory use over `window`, ending at `timestamp`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetrics {
    pub metadata: ObjectMeta,
    pub timestamp: Option<Time>,
    pub window: String,
    pub usage: BTreeMap<String, Quantity>,
}

/// One container's use within a PodMetrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerMetrics {
    pub name: String,
    pub usage: BTreeMap<String, Quantity>,
}

/// A pod's containers' CPU and memory use over `window`, ending at `timestamp`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    pub metadata: ObjectMeta,
    pub timestamp: Option<Time>,
    pub window: String,
    pub containers: Vec<ContainerMetrics>,
}

impl k8s_openapi::Resource for NodeMetrics {
    const API_VERSION: &'static str = "metrics.k8s.io/v1beta1";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "NodeMetrics";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Resource for PodMetrics {
    const API_VERSION: &'static str = "metrics.k8s.io/v1beta1";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "PodMetrics";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

fn usage_schema(g: &mut SchemaGenerator) -> Schema {
    let quantity = g.subschema_for::<Quantity>();
    json_schema!({"type": "object", "additionalProperties": quantity,
                  "description": "The memory and CPU usage: cpu in cores, memory in bytes."})
}

/// The schema both kinds share, with `field` (`usage` or `containers`) holding the usage.
fn metrics_schema(g: &mut SchemaGenerator, description: &str, field: &str, usage: Schema) -> Schema {
    let (meta, time) = (g.subschema_for::<ObjectMeta>(), g.subschema_for::<Time>());
    json_schema!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": meta,
            "timestamp": time,
            "window": {"type": "string", "description": "The window over which the usage was measured, ending at timestamp."},
            field: usage
        },
        "required": ["timestamp", "window", field]
    })
}

impl JsonSchema for NodeMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let usage = usage_schema(g);
        metrics_schema(g, "NodeMetrics sets resource usage metrics of a node.", "usage", usage)
    }
}

impl JsonSchema for PodMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let usage = usage_schema(g);
        let containers = json_schema!({
            "type": "array",
            "description": "Metrics for all containers are collected within the same time window.",
            "items": {"type": "object", "required": ["name", "usage"],
                      "properties": {"name": {"type": "string"}, "usage": usage}}
        });
        metrics_schema(g, "PodMetrics sets resource usage metrics of a pod.", "containers", containers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_name_their_usage_fields() {
        let mut g = SchemaGenerator::default();
        let node = NodeMetrics::json_schema(&mut g);
        assert!(node.get("properties").and_then(|p| p.get("usage")).is_some(), "{node:?}");
        assert_eq!(node.get("required"), Some(&serde_json::json!(["timestamp", "window", "usage"])));
        let pod = PodMetrics::json_schema(&mut g);
        let containers = pod.get("properties").and_then(|p| p.get("containers")).expect("containers");
        assert!(containers.pointer("/items/properties/usage/additionalProperties").is_some(), "{containers:?}");
    }
}
