//! The formats and markers the parsers use are `server/contracts/tool_formats.json`'s
//! (the Python twin: `tests/server/test_contracts.py`), read here as plain JSON.

use serde_json::Value;

use super::*;

fn file() -> Vec<Value> {
    let file: Value = serde_json::from_str(FILE).expect("tool_formats.json is JSON");
    file["formats"].as_array().cloned().unwrap_or_default()
}

fn field<'a>(spec: &'a Value, key: &str) -> &'a str {
    spec[key].as_str().unwrap_or_default()
}

#[test]
fn the_compiled_in_file_parses_and_names_every_format() {
    assert_eq!(CONTRACT.formats.len(), ALL.len());
    for (i, format) in ALL.iter().enumerate() {
        assert_eq!(*format as usize, i);
        assert_eq!(format.markers().name, format.name());
    }
}

#[test]
fn names_and_markers_are_the_files() {
    let specs = file();
    let names: Vec<&str> = specs.iter().map(|s| field(s, "name")).collect();
    assert_eq!(*PARSER_NAMES, names);
    for spec in &specs {
        let name = field(spec, "name");
        let format = format_of(name).expect("a ToolFormat per name");
        let m = format.markers();
        let got = [
            &m.begin,
            &m.end,
            &m.args,
            &m.call_begin,
            &m.call_end,
            &m.sep,
        ];
        let keys = ["begin", "end", "args", "call_begin", "call_end", "sep"];
        for (got, key) in got.into_iter().zip(keys) {
            assert_eq!(got, field(spec, key), "{name} {key}");
        }
        let native = spec["native"].as_bool().unwrap_or(false);
        let want = native.then(|| (field(spec, "begin"), field(spec, "end")));
        assert_eq!(format.native(), want, "{name}");
        if !matches!(format, ToolFormat::Llama3Json | ToolFormat::Pythonic) {
            assert_eq!(format.begin(), Some(field(spec, "begin")), "{name}");
        }
    }
}
