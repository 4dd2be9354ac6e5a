//! Tool-call arguments between the JSON string chat-style formats send and the object salvage
//! models, rebuilt byte for byte: compact JSON, or Python's `json.dumps` style (recorded as the
//! call slot's `$fmt`).

use serde_json::{Map, Value};

/// Tool-call arguments as the JSON string chat-style formats send, in the recorded style
/// (`$fmt`: absent for compact JSON, `py` for Python's `json.dumps` default, `py8` for it without
/// `ensure_ascii`).
pub(crate) fn arguments_string(args: &Value, fmt: Option<&str>) -> String {
    match (args, fmt) {
        (Value::String(s), _) => s.clone(),
        (other, Some("py")) => py_json(other, true),
        (other, Some("py8")) => py_json(other, false),
        (other, _) => other.to_string(),
    }
}

/// Arguments read from a JSON string: parsed when the string is exactly the compact form, or
/// Python's `json.dumps` form, of what it parses to (so it is rebuilt byte for byte; the style is
/// returned for the call slot's `$fmt`), else kept as the string.
pub(crate) fn arguments_from_string(raw: &str) -> (Value, Option<&'static str>) {
    if !crate::within_value_budget(raw) {
        return (Value::String(raw.to_string()), None);
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v) if v.is_object() => {
            let compact = v.to_string();
            if compact == raw {
                (v, None)
            } else if py_json(&v, true) == raw {
                (v, Some("py"))
            } else if py_json(&v, false) == raw {
                (v, Some("py8"))
            } else {
                (Value::String(raw.to_string()), None)
            }
        }
        _ => (Value::String(raw.to_string()), None),
    }
}

/// JSON as Python's `json.dumps` writes it by default: `", "` and `": "` separators, and with
/// `ascii`, every non-ASCII character escaped as `\uXXXX`.
fn py_json(v: &Value, ascii: bool) -> String {
    let mut out = String::new();
    py_write(v, ascii, &mut out);
    out
}

fn py_write(v: &Value, ascii: bool, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_write(x, ascii, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(k, ascii, out);
                out.push_str(": ");
                py_write(x, ascii, out);
            }
            out.push('}');
        }
        Value::String(s) => py_str(s, ascii, out),
        other => out.push_str(&other.to_string()),
    }
}

fn py_str(s: &str, ascii: bool, out: &mut String) {
    let quoted = Value::String(s.to_string()).to_string();
    if !ascii {
        out.push_str(&quoted);
        return;
    }
    for c in quoted.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
}

/// Arguments as an object for formats that send them as JSON (a string that parses to an
/// object is parsed; any other non-object is wrapped).
pub(crate) fn arguments_object(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => args.clone(),
        },
        Value::Null => Value::Object(Map::new()),
        other => other.clone(),
    }
}
