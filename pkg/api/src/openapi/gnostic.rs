//! The swagger 2.0 document as protobuf, in gnostic's `openapi.v2.Document` format
//! (github.com/google/gnostic-models `openapiv2/OpenAPIv2.proto`), which kubectl requests with
//! `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
//!
//! Only the messages and fields the Kubernetes document uses are declared; field numbers follow
//! the proto. Vendor extensions, defaults, enums and examples are `Any { yaml }`; the YAML is the
//! value's JSON text, which YAML parsers accept.

use serde_json::{Map, Value};

/// A value carried as YAML text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "2")]
    pub yaml: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedAny {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Document {
    #[prost(string, tag = "1")]
    pub swagger: String,
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    #[prost(string, tag = "3")]
    pub host: String,
    #[prost(string, tag = "4")]
    pub base_path: String,
    #[prost(string, repeated, tag = "5")]
    pub schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "12")]
    pub security: Vec<SecurityRequirement>,
    #[prost(message, optional, tag = "13")]
    pub security_definitions: Option<SecurityDefinitions>,
    #[prost(message, repeated, tag = "16")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Info {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(message, repeated, tag = "7")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<PathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathItem {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(message, optional, tag = "2")]
    pub get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    pub options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    pub head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub tags: Vec<String>,
    #[prost(string, tag = "2")]
    pub summary: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "5")]
    pub operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub schemes: Vec<String>,
    #[prost(bool, tag = "11")]
    pub deprecated: bool,
    #[prost(message, repeated, tag = "12")]
    pub security: Vec<SecurityRequirement>,
    #[prost(message, repeated, tag = "13")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ParametersItem {
    #[prost(oneof = "parameters_item::Oneof", tags = "1, 2")]
    pub oneof: Option<parameters_item::Oneof>,
}

pub mod parameters_item {
    // Mirrors the proto's oneof; boxing would only complicate construction.
    #[allow(clippy::large_enum_variant)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1")]
        Parameter(super::Parameter),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct JsonReference {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub description: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Parameter {
    #[prost(oneof = "parameter::Oneof", tags = "1, 2")]
    pub oneof: Option<parameter::Oneof>,
}

pub mod parameter {
    // Mirrors the proto's oneof; boxing would only complicate construction.
    #[allow(clippy::large_enum_variant)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1")]
        BodyParameter(super::BodyParameter),
        #[prost(message, tag = "2")]
        NonBodyParameter(super::NonBodyParameter),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BodyParameter {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub r#in: String,
    #[prost(bool, tag = "4")]
    pub required: bool,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
    #[prost(message, repeated, tag = "6")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NonBodyParameter {
    #[prost(oneof = "non_body_parameter::Oneof", tags = "3, 4")]
    pub oneof: Option<non_body_parameter::Oneof>,
}

pub mod non_body_parameter {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(super::QueryParameterSubSchema),
        #[prost(message, tag = "4")]
        PathParameterSubSchema(super::PathParameterSubSchema),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "6")]
    pub r#type: String,
    #[prost(string, tag = "7")]
    pub format: String,
    #[prost(bool, tag = "20")]
    pub unique_items: bool,
    #[prost(message, repeated, tag = "23")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "5")]
    pub r#type: String,
    #[prost(string, tag = "6")]
    pub format: String,
    #[prost(bool, tag = "19")]
    pub unique_items: bool,
    #[prost(message, repeated, tag = "22")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseValue {
    #[prost(oneof = "response_value::Oneof", tags = "1, 2")]
    pub oneof: Option<response_value::Oneof>,
}

pub mod response_value {
    // Mirrors the proto's oneof; boxing would only complicate construction.
    #[allow(clippy::large_enum_variant)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1")]
        Response(super::Response),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(message, optional, tag = "2")]
    pub schema: Option<SchemaItem>,
    #[prost(message, repeated, tag = "5")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SchemaItem {
    #[prost(oneof = "schema_item::Oneof", tags = "1")]
    pub oneof: Option<schema_item::Oneof>,
}

pub mod schema_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1")]
        Schema(super::Schema),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedSchema {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Schema {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub format: String,
    #[prost(string, tag = "3")]
    pub title: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    #[prost(double, tag = "6")]
    pub multiple_of: f64,
    #[prost(double, tag = "7")]
    pub maximum: f64,
    #[prost(bool, tag = "8")]
    pub exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub minimum: f64,
    #[prost(bool, tag = "10")]
    pub exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub max_length: i64,
    #[prost(int64, tag = "12")]
    pub min_length: i64,
    #[prost(string, tag = "13")]
    pub pattern: String,
    #[prost(int64, tag = "14")]
    pub max_items: i64,
    #[prost(int64, tag = "15")]
    pub min_items: i64,
    #[prost(bool, tag = "16")]
    pub unique_items: bool,
    #[prost(int64, tag = "17")]
    pub max_properties: i64,
    #[prost(int64, tag = "18")]
    pub min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    pub additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    #[prost(string, tag = "26")]
    pub discriminator: String,
    #[prost(bool, tag = "27")]
    pub read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AdditionalPropertiesItem {
    #[prost(oneof = "additional_properties_item::Oneof", tags = "1, 2")]
    pub oneof: Option<additional_properties_item::Oneof>,
}

pub mod additional_properties_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1")]
        Schema(Box<super::Schema>),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityRequirement {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedStringArray>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedStringArray {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<StringArray>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringArray {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityDefinitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedSecurityDefinitionsItem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<SecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityDefinitionsItem {
    #[prost(oneof = "security_definitions_item::Oneof", tags = "2")]
    pub oneof: Option<security_definitions_item::Oneof>,
}

pub mod security_definitions_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "2")]
        ApiKeySecurity(super::ApiKeySecurity),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ApiKeySecurity {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub r#in: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, repeated, tag = "5")]
    pub vendor_extension: Vec<NamedAny>,
}

// ---- conversion from the swagger JSON ----

fn string(map: &Map<String, Value>, key: &str) -> String {
    map.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn strings(map: &Map<String, Value>, key: &str) -> Vec<String> {
    match map.get(key) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn number(map: &Map<String, Value>, key: &str) -> f64 {
    map.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn integer(map: &Map<String, Value>, key: &str) -> i64 {
    map.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn any(value: &Value) -> Any {
    Any { yaml: format!("{value}\n") }
}

fn extensions(map: &Map<String, Value>) -> Vec<NamedAny> {
    map.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny { name: k.clone(), value: Some(any(v)) })
        .collect()
}

fn object(value: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    value.as_object().unwrap_or(&EMPTY)
}

fn schema(value: &Value) -> Schema {
    let m = object(value);
    let named = |key: &str| -> Vec<NamedSchema> {
        object(m.get(key).unwrap_or(&Value::Null))
            .iter()
            .map(|(name, s)| NamedSchema { name: name.clone(), value: Some(schema(s)) })
            .collect()
    };
    Schema {
        r#ref: string(m, "$ref"),
        format: string(m, "format"),
        title: string(m, "title"),
        description: string(m, "description"),
        default: m.get("default").map(any),
        multiple_of: number(m, "multipleOf"),
        maximum: number(m, "maximum"),
        exclusive_maximum: boolean(m, "exclusiveMaximum"),
        minimum: number(m, "minimum"),
        exclusive_minimum: boolean(m, "exclusiveMinimum"),
        max_length: integer(m, "maxLength"),
        min_length: integer(m, "minLength"),
        pattern: string(m, "pattern"),
        max_items: integer(m, "maxItems"),
        min_items: integer(m, "minItems"),
        unique_items: boolean(m, "uniqueItems"),
        max_properties: integer(m, "maxProperties"),
        min_properties: integer(m, "minProperties"),
        required: strings(m, "required"),
        r#enum: match m.get("enum") {
            Some(Value::Array(items)) => items.iter().map(any).collect(),
            _ => Vec::new(),
        },
        additional_properties: m.get("additionalProperties").map(|ap| {
            let oneof = match ap {
                Value::Bool(b) => additional_properties_item::Oneof::Boolean(*b),
                other => additional_properties_item::Oneof::Schema(Box::new(schema(other))),
            };
            Box::new(AdditionalPropertiesItem { oneof: Some(oneof) })
        }),
        r#type: match m.get("type") {
            Some(Value::String(t)) => Some(TypeItem { value: vec![t.clone()] }),
            Some(Value::Array(ts)) => {
                Some(TypeItem { value: ts.iter().filter_map(Value::as_str).map(str::to_string).collect() })
            }
            _ => None,
        },
        items: match m.get("items") {
            Some(Value::Array(items)) => Some(ItemsItem { schema: items.iter().map(schema).collect() }),
            Some(item) => Some(ItemsItem { schema: vec![schema(item)] }),
            None => None,
        },
        all_of: match m.get("allOf") {
            Some(Value::Array(items)) => items.iter().map(schema).collect(),
            _ => Vec::new(),
        },
        properties: m.contains_key("properties").then(|| Properties { additional_properties: named("properties") }),
        discriminator: string(m, "discriminator"),
        read_only: boolean(m, "readOnly"),
        example: m.get("example").map(any),
        vendor_extension: extensions(m),
    }
}

fn parameter(value: &Value) -> ParametersItem {
    let m = object(value);
    if let Some(Value::String(r)) = m.get("$ref") {
        let reference = JsonReference { r#ref: r.clone(), description: string(m, "description") };
        return ParametersItem { oneof: Some(parameters_item::Oneof::JsonReference(reference)) };
    }
    let inner = match m.get("in").and_then(Value::as_str) {
        Some("body") => parameter::Oneof::BodyParameter(BodyParameter {
            description: string(m, "description"),
            name: string(m, "name"),
            r#in: "body".into(),
            required: boolean(m, "required"),
            schema: m.get("schema").map(schema),
            vendor_extension: extensions(m),
        }),
        Some("path") => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(non_body_parameter::Oneof::PathParameterSubSchema(PathParameterSubSchema {
                required: boolean(m, "required"),
                r#in: "path".into(),
                description: string(m, "description"),
                name: string(m, "name"),
                r#type: string(m, "type"),
                format: string(m, "format"),
                unique_items: boolean(m, "uniqueItems"),
                vendor_extension: extensions(m),
            })),
        }),
        _ => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(non_body_parameter::Oneof::QueryParameterSubSchema(QueryParameterSubSchema {
                required: boolean(m, "required"),
                r#in: string(m, "in"),
                description: string(m, "description"),
                name: string(m, "name"),
                r#type: string(m, "type"),
                format: string(m, "format"),
                unique_items: boolean(m, "uniqueItems"),
                vendor_extension: extensions(m),
            })),
        }),
    };
    ParametersItem { oneof: Some(parameters_item::Oneof::Parameter(Parameter { oneof: Some(inner) })) }
}

fn parameters(m: &Map<String, Value>) -> Vec<ParametersItem> {
    match m.get("parameters") {
        Some(Value::Array(items)) => items.iter().map(parameter).collect(),
        _ => Vec::new(),
    }
}

fn operation(value: &Value) -> Operation {
    let m = object(value);
    let responses = object(m.get("responses").unwrap_or(&Value::Null));
    Operation {
        tags: strings(m, "tags"),
        summary: string(m, "summary"),
        description: string(m, "description"),
        operation_id: string(m, "operationId"),
        produces: strings(m, "produces"),
        consumes: strings(m, "consumes"),
        parameters: parameters(m),
        responses: Some(Responses {
            response_code: responses
                .iter()
                .filter(|(code, _)| !code.starts_with("x-"))
                .map(|(code, r)| {
                    let rm = object(r);
                    let response = Response {
                        description: string(rm, "description"),
                        schema: rm
                            .get("schema")
                            .map(|s| SchemaItem { oneof: Some(schema_item::Oneof::Schema(schema(s))) }),
                        vendor_extension: extensions(rm),
                    };
                    NamedResponseValue {
                        name: code.clone(),
                        value: Some(ResponseValue { oneof: Some(response_value::Oneof::Response(response)) }),
                    }
                })
                .collect(),
            vendor_extension: extensions(responses),
        }),
        schemes: strings(m, "schemes"),
        deprecated: boolean(m, "deprecated"),
        security: Vec::new(),
        vendor_extension: extensions(m),
    }
}

fn path_item(value: &Value) -> PathItem {
    let m = object(value);
    let op = |method: &str| m.get(method).map(operation);
    PathItem {
        r#ref: string(m, "$ref"),
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: parameters(m),
        vendor_extension: extensions(m),
    }
}

/// Converts a swagger 2.0 document (as produced by the v2 renderer) to gnostic's message.
pub fn document(doc: &Value) -> Document {
    let m = object(doc);
    let info = object(m.get("info").unwrap_or(&Value::Null));
    let paths = object(m.get("paths").unwrap_or(&Value::Null));
    let definitions = object(m.get("definitions").unwrap_or(&Value::Null));
    let security = match m.get("security") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|req| SecurityRequirement {
                additional_properties: object(req)
                    .iter()
                    .map(|(name, scopes)| NamedStringArray {
                        name: name.clone(),
                        value: Some(StringArray {
                            value: scopes
                                .as_array()
                                .map(|s| s.iter().filter_map(Value::as_str).map(str::to_string).collect())
                                .unwrap_or_default(),
                        }),
                    })
                    .collect(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let security_definitions = m.get("securityDefinitions").map(|defs| SecurityDefinitions {
        additional_properties: object(defs)
            .iter()
            .map(|(name, d)| {
                let dm = object(d);
                NamedSecurityDefinitionsItem {
                    name: name.clone(),
                    value: Some(SecurityDefinitionsItem {
                        oneof: Some(security_definitions_item::Oneof::ApiKeySecurity(ApiKeySecurity {
                            r#type: string(dm, "type"),
                            name: string(dm, "name"),
                            r#in: string(dm, "in"),
                            description: string(dm, "description"),
                            vendor_extension: extensions(dm),
                        })),
                    }),
                }
            })
            .collect(),
    });
    Document {
        swagger: string(m, "swagger"),
        info: Some(Info {
            title: string(info, "title"),
            version: string(info, "version"),
            description: string(info, "description"),
            vendor_extension: extensions(info),
        }),
        host: string(m, "host"),
        base_path: string(m, "basePath"),
        schemes: strings(m, "schemes"),
        consumes: strings(m, "consumes"),
        produces: strings(m, "produces"),
        paths: Some(Paths {
            vendor_extension: extensions(paths),
            path: paths
                .iter()
                .filter(|(name, _)| !name.starts_with("x-"))
                .map(|(name, item)| NamedPathItem { name: name.clone(), value: Some(path_item(item)) })
                .collect(),
        }),
        definitions: Some(Definitions {
            additional_properties: definitions
                .iter()
                .map(|(name, s)| NamedSchema { name: name.clone(), value: Some(schema(s)) })
                .collect(),
        }),
        security,
        security_definitions,
        vendor_extension: extensions(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    #[test]
    fn schema_conversion_keeps_refs_types_items_and_extensions() {
        let s = schema(&json!({
            "type": "object",
            "required": ["a"],
            "properties": {
                "a": {"type": "array", "items": {"$ref": "#/definitions/X"}, "x-kubernetes-list-type": "atomic"},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        }));
        let encoded = s.encode_to_vec();
        let back = Schema::decode(encoded.as_slice()).expect("decode");
        assert_eq!(back.r#type.as_ref().map(|t| t.value.clone()), Some(vec!["object".to_string()]));
        let props = back.properties.expect("properties").additional_properties;
        assert_eq!(props[0].name, "a");
        let a = props[0].value.as_ref().expect("a");
        assert_eq!(a.items.as_ref().expect("items").schema[0].r#ref, "#/definitions/X");
        assert_eq!(a.vendor_extension[0].name, "x-kubernetes-list-type");
        assert_eq!(a.vendor_extension[0].value.as_ref().map(|v| v.yaml.as_str()), Some("\"atomic\"\n"));
        let m = props[1].value.as_ref().expect("m");
        let ap = m.additional_properties.as_ref().and_then(|ap| ap.oneof.clone());
        assert!(
            matches!(ap, Some(additional_properties_item::Oneof::Schema(s)) if s.r#type.as_ref().map(|t| t.value[0].as_str()) == Some("string"))
        );
    }
}
