//! The Rust structs against the committed JSON Schema of the args-json,
//! `server/contracts/args.schema.json`, generated from the one declaration
//! (`server/args_json.py`) by `python scripts/gen_args_schema.py`: for `ServeArgs`,
//! `RenderArgs` and `HttpArgs`, the same keys both ways, the same required keys, the same
//! defaults where the schema names one, and a value of each JSON type is taken exactly
//! when the schema allows it.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::args::{HttpArgs, RenderArgs, ServeArgs};

const SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/args.schema.json"
));

const FIX: &str = "the args-json is declared in server/args_json.py: change it there, run \
    `python scripts/gen_args_schema.py`, and make rust/server/src/args.rs (args/http.rs) match";

/// One value of each JSON type: a string, an integer, a fraction, a bool, an array, an
/// object and null.
fn candidates() -> [Value; 7] {
    [
        json!("x"),
        json!(1),
        json!(0.5),
        json!(true),
        json!(["x"]),
        json!({}),
        Value::Null,
    ]
}

/// The definition of `name` (`ServeArgs`, `RenderArgs`, `HttpArgs`) in the schema.
fn definition(name: &str) -> Map<String, Value> {
    let schema: Value = serde_json::from_str(SCHEMA).expect("args.schema.json parses");
    match &schema["$defs"][name] {
        Value::Object(def) => def.clone(),
        other => panic!("args.schema.json has no $defs.{name} object ({other}); {FIX}"),
    }
}

fn properties(def: &Map<String, Value>) -> Map<String, Value> {
    def.get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn required(def: &Map<String, Value>) -> BTreeSet<String> {
    def.get("required")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON types a property's schema allows (`$ref`: an object).
fn types(property: &Value) -> BTreeSet<String> {
    let one = |s: &Value| -> Vec<String> {
        if s.get("$ref").is_some() {
            return vec!["object".to_owned()];
        }
        match &s["type"] {
            Value::String(t) => vec![t.clone()],
            Value::Array(ts) => ts
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    match property.get("anyOf").and_then(Value::as_array) {
        Some(options) => options.iter().flat_map(one).collect(),
        None => one(property).into_iter().collect(),
    }
}

/// Whether `value` is of one of `types` (an integer is a number too); an array's items
/// must be of the `items` schema's types.
fn allows(property: &Value, value: &Value) -> bool {
    let allowed = types(property);
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let typed = allowed.contains(kind) || (kind == "integer" && allowed.contains("number"));
    let items = match (value, property.get("items")) {
        (Value::Array(values), Some(item)) => values.iter().all(|v| allows(item, v)),
        _ => true,
    };
    typed && items
}

/// A value the property's schema allows.
fn sample(property: &Value) -> Value {
    candidates()
        .into_iter()
        .find(|v| allows(property, v))
        .unwrap_or_else(|| panic!("no sample value fits the schema {property}"))
}

/// A document with the required keys of `def` only.
fn minimal(def: &Map<String, Value>) -> Map<String, Value> {
    let props = properties(def);
    required(def)
        .into_iter()
        .map(|key| {
            let value = sample(&props[&key]);
            (key, value)
        })
        .collect()
}

/// The keys of `T` as Rust serializes them (every field, null where unset).
fn rust_keys<T: Serialize>(value: &T) -> BTreeSet<String> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map.keys().cloned().collect(),
        other => panic!("not serialized as an object: {other:?}"),
    }
}

fn parses<T: DeserializeOwned>(doc: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(doc.clone())).map_err(|e| e.to_string())
}

fn check_keys(name: &str, rust: BTreeSet<String>) {
    let schema: BTreeSet<String> = properties(&definition(name)).keys().cloned().collect();
    let only_rust: Vec<_> = rust.difference(&schema).collect();
    let only_schema: Vec<_> = schema.difference(&rust).collect();
    assert!(
        only_rust.is_empty() && only_schema.is_empty(),
        "{name}: keys only in the Rust struct {only_rust:?}, only in the schema \
         {only_schema:?}; {FIX}"
    );
}

#[test]
fn the_rust_keys_are_the_schema_keys() {
    check_keys("ServeArgs", rust_keys(&ServeArgs::default()));
    check_keys("RenderArgs", rust_keys(&RenderArgs::default()));
    check_keys("HttpArgs", rust_keys(&HttpArgs::default()));
}

/// Every schema type of every key parses, every other type is refused; a key the schema
/// requires is required, any other may be left out; an unknown key is refused.
fn check_types<T: DeserializeOwned + Serialize>(name: &str) {
    let def = definition(name);
    let props = properties(&def);
    let base = minimal(&def);
    let parsed: T = parses(&base).unwrap_or_else(|e| panic!("{name} {base:?}: {e}; {FIX}"));
    let defaults = serde_json::to_value(&parsed).expect("serializes");
    let mut full = base.clone();
    full.extend(props.iter().map(|(k, p)| (k.clone(), sample(p))));
    if let Err(e) = parses::<T>(&full) {
        panic!("{name}: a document with every key of the schema: {e}; {FIX}");
    }
    for (key, property) in &props {
        for value in candidates() {
            let mut doc = base.clone();
            doc.insert(key.clone(), value.clone());
            let result = parses::<T>(&doc);
            assert_eq!(
                result.is_ok(),
                allows(property, &value),
                "{name}.{key} = {value}: the schema says {property}, Rust says {result:?}; {FIX}",
                result = result.err()
            );
        }
        let mut without = full.clone();
        without.remove(key);
        assert_eq!(
            parses::<T>(&without).is_ok(),
            !required(&def).contains(key),
            "{name}.{key}: required in the schema and in Rust must agree; {FIX}"
        );
        if let Some(default) = property.get("default") {
            assert_eq!(
                &defaults[key], default,
                "{name}.{key}: the default when absent; {FIX}"
            );
        }
    }
    let mut unknown = base.clone();
    unknown.insert("not_an_args_json_key".into(), json!(1));
    assert!(
        parses::<T>(&unknown).is_err(),
        "{name} takes an unknown key"
    );
}

#[test]
fn the_rust_types_take_what_the_schema_allows() {
    check_types::<ServeArgs>("ServeArgs");
    check_types::<RenderArgs>("RenderArgs");
    check_types::<HttpArgs>("HttpArgs");
}

/// The schema's `$ref`s name its own definitions (a nested object is checked as one).
#[test]
fn every_nested_object_is_a_checked_definition() {
    for name in ["ServeArgs", "RenderArgs"] {
        let refs: BTreeSet<String> = properties(&definition(name))
            .values()
            .filter_map(|p| p.get("$ref").and_then(Value::as_str).map(str::to_owned))
            .collect();
        assert_eq!(
            refs,
            BTreeSet::from(["#/$defs/HttpArgs".to_owned()]),
            "{name}: a nested object the Rust tests do not check; {FIX}"
        );
    }
}
