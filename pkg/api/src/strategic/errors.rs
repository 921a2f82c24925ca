//! Upstream's strategic-merge error messages (`mergepatch` sentinels and constructors), rendered
//! from JSON values the way Go prints them.

use serde_json::{Map, Value};

use super::gofmt;

/// `mergepatch.ErrBadJSONDoc`.
pub(super) const BAD_JSON_DOC: &str = "invalid JSON document";
/// `mergepatch.ErrNoListOfLists`.
pub(super) const NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
/// `mergepatch.ErrBadPatchFormatForPrimitiveList`.
pub(super) const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
/// `mergepatch.ErrBadPatchFormatForRetainKeys`.
pub(super) const BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
/// `mergepatch.ErrBadPatchFormatForSetElementOrderList`.
pub(super) const BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
/// Prefix of the decoding error for a patch body that is not a JSON object.
pub(super) const UNMARSHAL_PREFIX: &str = "json: cannot unmarshal ";

/// Go's name of the decoded map type.
pub(super) const MAP_TYPE: &str = "map[string]interface {}";
/// Go's name of the decoded list type.
pub(super) const SLICE_TYPE: &str = "[]interface {}";

/// `mergepatch.ErrNoMergeKey`.
pub(super) fn no_merge_key(map: &Map<String, Value>, merge_key: &str) -> String {
    format!("map: {} does not contain declared merge key: {merge_key}", map_v(map))
}

/// `mergepatch.ErrBadArgType`, with the expected Go type spelled out.
pub(super) fn bad_arg_type(expected: &str, actual: &Value) -> String {
    format!("expected a {expected}, but received a {}", gofmt::type_name(actual))
}

/// `mergepatch.ErrBadPatchType`.
pub(super) fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> String {
    format!("unknown patch type: {} in map: {}", gofmt::s(directive), map_v(map))
}

fn map_v(map: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let parts: Vec<String> =
        keys.into_iter().map(|key| format!("{key}:{}", map.get(key).map(gofmt::v).unwrap_or_default())).collect();
    format!("map[{}]", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_merge_key_prints_the_map_like_go() {
        let item = json!({"name": null, "image": "nginx:1.27", "ports": [{"containerPort": 80}]});
        let Value::Object(map) = item else { unreachable!() };
        assert_eq!(
            no_merge_key(&map, "containerPort"),
            "map: map[image:nginx:1.27 name:<nil> ports:[map[containerPort:80]]] does not contain declared merge \
             key: containerPort"
        );
    }
}
