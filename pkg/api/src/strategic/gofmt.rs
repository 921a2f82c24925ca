//! Go `fmt` renderings of JSON values, so that error messages read exactly like upstream's, which
//! print decoded JSON (`map[string]interface{}`) with `%v` / `%s` and `reflect` type names.
//!
//! The values involved are what the API server decodes: integral numbers are `int64`, all other
//! numbers `float64` (apimachinery's JSON decoding preserves integers).

use serde_json::{Number, Value};

/// `reflect.TypeOf(x)` printed with `%s`, as in `mergepatch.ErrBadArgType`.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a decoded JSON value: `map[a:1 b:[x y]]` (keys sorted), `<nil>` for null.
pub(super) fn v(value: &Value) -> String {
    let mut out = String::new();
    write_v(&mut out, value);
    out
}

/// Go's `%v` of a list (`[a b]`), for messages that print `[]interface{}` values.
pub(super) fn v_list<'v>(items: impl IntoIterator<Item = &'v Value>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_v(&mut out, item);
    }
    out.push(']');
    out
}

/// Go's `%s` of a decoded JSON value: strings verbatim, other scalars as `%!s(int64=1)`.
pub(super) fn s(value: &Value) -> String {
    let mut out = String::new();
    write_s(&mut out, value);
    out
}

fn write_v(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => out.push_str(&v_list(items)),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(item) = map.get(key) {
                    write_v(out, item);
                }
            }
            out.push(']');
        }
    }
}

fn write_s(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("%!s(<nil>)"),
        Value::Bool(b) => out.push_str(&format!("%!s(bool={b})")),
        Value::Number(n) => out.push_str(&format!("%!s({}={})", type_name(value), number(n))),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_s(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(item) = map.get(key) {
                    write_s(out, item);
                }
            }
            out.push(']');
        }
    }
}

fn number(n: &Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => float(n.as_f64().unwrap_or_default()),
    }
}

/// Go's `%v` of a `float64`: the shortest representation, in exponent form (`1.5e+06`) when the
/// decimal exponent is below -4 or at least 6 (`%g` with shortest precision).
fn float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return format!("{f}");
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return format!("{f}");
    };
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_print_with_sorted_keys_like_go() {
        let value = json!({"name": "web", "image": "nginx", "ports": [80, {"b": null, "a": true}]});
        assert_eq!(v(&value), "map[image:nginx name:web ports:[80 map[a:true b:<nil>]]]");
    }

    #[test]
    fn floats_print_like_go_percent_v() {
        assert_eq!(v(&json!(1.5)), "1.5");
        assert_eq!(v(&json!(123456.5)), "123456.5");
        assert_eq!(v(&json!(1234567.5)), "1.2345675e+06");
        assert_eq!(v(&json!(0.00001)), "1e-05");
        assert_eq!(v(&json!(-0.5)), "-0.5");
        assert_eq!(v(&json!(80)), "80");
    }

    #[test]
    fn percent_s_flags_non_strings_like_go() {
        assert_eq!(s(&json!("merge")), "merge");
        assert_eq!(s(&json!(1)), "%!s(int64=1)");
        assert_eq!(s(&json!(true)), "%!s(bool=true)");
        assert_eq!(s(&Value::Null), "%!s(<nil>)");
        assert_eq!(s(&json!({"a": 1})), "map[a:%!s(int64=1)]");
    }

    #[test]
    fn type_names_match_go_reflect() {
        assert_eq!(type_name(&json!({})), "map[string]interface {}");
        assert_eq!(type_name(&json!([])), "[]interface {}");
        assert_eq!(type_name(&json!(2)), "int64");
        assert_eq!(type_name(&json!(2.5)), "float64");
        assert_eq!(type_name(&Value::Null), "%!s(<nil>)");
    }
}
