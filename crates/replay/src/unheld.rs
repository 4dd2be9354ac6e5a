//! Content a captured request refers to but does not hold: a conversation the provider keeps
//! (`previous_response_id`, `conversation`, Gemini's `cachedContent`, a stored `prompt`), and
//! files by id or address (`file_id`, `file_url`, a document `source` of type `url` or `file`,
//! Gemini's `fileData`, Bedrock's `s3Location`).
//!
//! The provider counts that content in the request's tokens; the simulated provider cannot, for
//! the capture does not hold it, and its size has no bound (a PDF by id may be a hundred pages,
//! a stored conversation any length). A replay of such a capture's context overflow would be
//! judged against a count that leaves it out: attempt 0's rejection is not reproduced, and a
//! recovery the simulation accepts may be rejected by the provider. So fidelity (check 0) fails
//! for a context overflow of a request that refers to unheld content, naming each reference,
//! and the other checks of such a run prove nothing about the recovery. Images by address are
//! not listed: an image costs at most [`crate::media::MAX_IMAGE_TOKENS`], and the simulation
//! counts an unheld one at that price.

use salvage_types::Capture;
use serde_json::Value;

/// One reference to content the capture does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unheld {
    /// Where it is: `request.previous_response_id`, `history[3].wire[0].source.file_id`, …
    pub path: String,
    /// What it is, for people: `a conversation the provider keeps (resp_04…)`.
    pub what: String,
}

/// Request fields that name a conversation or prompt the provider keeps.
const SERVER_CONTEXT: &[(&str, &str)] = &[
    ("previous_response_id", "a response the provider keeps, with its conversation"),
    ("conversation", "a conversation the provider keeps"),
    ("cachedContent", "content the provider caches"),
    ("cached_content", "content the provider caches"),
    ("prompt", "a prompt the provider keeps"),
];

/// Every reference in `capture`'s request to content it does not hold, in request order (the
/// request's fields, then the messages).
pub fn unheld(capture: &Capture) -> Vec<Unheld> {
    let mut out = Vec::new();
    if let Some(r) = &capture.request {
        for (key, what) in SERVER_CONTEXT {
            if let Some(v) = r.fields.get(*key).filter(|v| names_something(v)) {
                out.push(Unheld { path: format!("request.{key}"), what: format!("{what} ({})", short(v)) });
            }
        }
        for (key, v) in &r.fields {
            if key != "tools"
                && !NOT_CONTENT_KEYS.contains(&key.as_str())
                && !SERVER_CONTEXT.iter().any(|(k, _)| k == key)
            {
                walk(v, &format!("request.{key}"), &mut Vec::new(), None, &mut out);
            }
        }
    }
    for (i, m) in capture.history.iter().enumerate() {
        if let Some(w) = &m.wire {
            walk(w, &format!("history[{i}].wire"), &mut Vec::new(), None, &mut out);
        }
    }
    out
}

/// A value that names something: a non-empty string, or an object with an `id` (a Responses
/// `conversation` or `prompt` object).
fn names_something(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.trim().is_empty(),
        Value::Object(o) => o.get("id").is_some_and(|id| id.as_str().is_some_and(|s| !s.is_empty())),
        _ => false,
    }
}

/// A value for a message: a string or an object's `id`, cut to 28 characters.
fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("id").and_then(Value::as_str).unwrap_or("?"),
        _ => "?",
    };
    let cut: String = s.chars().take(28).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// True for a block type that is an image (an unheld image costs at most the highest image
/// price, which the simulation counts: not unbounded).
fn is_image_type(t: Option<&str>) -> bool {
    matches!(t, Some("image" | "input_image" | "image_url" | "image_file"))
}

/// Block types whose references do not reach the model's context: a file uploaded to the code
/// execution container, a web search's sources (a review showed both read as documents).
const NOT_CONTEXT: &[&str] =
    &["container_upload", "web_search_call", "web_search_tool_result", "mcp_tool_use"];

/// Keys whose values are not content: free-form metadata, MCP server definitions.
const NOT_CONTENT_KEYS: &[&str] = &["metadata", "mcp_servers"];

/// The block kind a key names where blocks are keyed by kind (Bedrock Converse: `image`,
/// `document`, `video`).
fn keyed_kind(k: &str) -> Option<&'static str> {
    match k {
        "image" => Some("image"),
        "document" => Some("document"),
        "video" => Some("video"),
        _ => None,
    }
}

/// One step of a path into a value.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// A path as text: `root.key[3].key`. Built only for a reference found: a walk over a large
/// request allocates nothing per node.
fn render(root: &str, path: &[Seg<'_>]) -> String {
    let mut out = root.to_string();
    for s in path {
        match s {
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Looks for references in `v` (at `path` under `root`); `block` is the kind of the block that
/// holds it.
fn walk<'a>(v: &'a Value, root: &str, path: &mut Vec<Seg<'a>>, block: Option<&str>, out: &mut Vec<Unheld>) {
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                walk(x, root, path, block, out);
                path.pop();
            }
        }
        Value::Object(o) => {
            // A placeholder of a modeled part: the message's own fields hold it.
            if o.contains_key("$") {
                return;
            }
            let parent = match path.last() {
                Some(Seg::Key(k)) => Some(*k),
                _ => None,
            };
            let own = o.get("type").and_then(Value::as_str);
            if own.is_some_and(|t| NOT_CONTEXT.contains(&t)) {
                return;
            }
            if own == Some("item_reference") {
                if let Some(id) = o.get("id").filter(|v| names_something(v)) {
                    path.push(Seg::Key("id"));
                    out.push(Unheld {
                        path: render(root, path),
                        what: format!("an item the provider keeps ({})", short(id)),
                    });
                    path.pop();
                }
                return;
            }
            let image = is_image_type(own) || is_image_type(block) || crate::upstream::is_image_mime(o);
            let kind = if image { Some("image") } else { own.or(block) };
            for (k, x) in o {
                if NOT_CONTENT_KEYS.contains(&k.as_str()) {
                    continue;
                }
                let named = x.as_str().filter(|s| !s.trim().is_empty());
                let address =
                    named.or_else(|| x.get("url").and_then(Value::as_str).filter(|s| !s.trim().is_empty()));
                let found = match (k.as_str(), named) {
                    ("file_id" | "file_url", Some(_)) if !image => {
                        Some(format!("a file by {k} ({})", short(x)))
                    }
                    ("fileUri" | "file_uri", Some(_)) if !image => {
                        Some(format!("a file by address ({})", short(x)))
                    }
                    ("uri", Some(_)) if parent == Some("s3Location") && !image => {
                        Some(format!("a file in S3 ({})", short(x)))
                    }
                    // An Anthropic document's source by address (a `source` of type `url`).
                    ("url", Some(_)) if own == Some("url") && parent == Some("source") && !image => {
                        Some(format!("a document by URL ({})", short(x)))
                    }
                    // Mistral's and OpenAI-compatible servers' parts by address.
                    ("document_url" | "video_url", _) if address.is_some() => {
                        let what = if k == "video_url" { "a video by URL" } else { "a document by URL" };
                        let shown = Value::String(address.unwrap_or_default().to_string());
                        Some(format!("{what} ({})", short(&shown)))
                    }
                    _ => None,
                };
                path.push(Seg::Key(k));
                match found {
                    Some(what) => out.push(Unheld { path: render(root, path), what }),
                    None => {
                        // A nested source inherits the block's kind (a document's `source`); a
                        // key that names a kind (Bedrock's `image`, `document`) sets it.
                        let inner = if let Some(keyed) = keyed_kind(k).filter(|_| x.is_object()) {
                            Some(keyed)
                        } else if image || k == "source" || k == "file" || k == "fileData" || k == "file_data"
                        {
                            // Everything inside an image is the image's.
                            kind
                        } else {
                            x.get("type").and_then(Value::as_str)
                        };
                        walk(x, root, path, inner, out);
                    }
                }
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic
    use super::*;
    use salvage_types::capture::Request;
    use salvage_types::Message;
    use serde_json::json;

    fn capture(fields: Value, wire: Vec<Value>) -> Capture {
        let mut c: Capture = serde_json::from_value(json!({
            "format": "salvage.capture/1", "id": "t", "history": [{"role": "user", "content": "hi"}],
            "failure": {"status": 400, "message": "prompt is too long"}
        }))
        .unwrap();
        c.request = Some(Request {
            format: serde_json::from_value(json!("openai_responses")).unwrap(),
            bytes: None,
            fields: fields.as_object().cloned().unwrap_or_default(),
        });
        for w in wire {
            let mut m = Message::user("see the attachment");
            m.wire = Some(w);
            c.history.push(m);
        }
        c
    }

    fn paths(c: &Capture) -> Vec<String> {
        unheld(c).into_iter().map(|u| u.path).collect()
    }

    #[test]
    fn server_kept_context_and_files_by_reference_are_listed() {
        let c = capture(
            json!({"model": "gpt-4.1", "previous_response_id": "resp_0435eb6c2aa8e9eb0069e15ffeb3fc81959cd",
                   "prompt": {"id": "pmpt_123", "version": "2"}, "conversation": null, "store": true}),
            vec![
                json!([{"type": "input_file", "file_id": "file-abc"}]),
                json!([{"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}]),
                json!([{"type": "document", "source": {"type": "file", "file_id": "file_011"}}]),
                json!([{"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/report.pdf"}}]),
                json!([{"document": {"format": "pdf", "name": "r", "source": {"s3Location": {"uri": "s3://b/r.pdf"}}}}]),
                json!([{"type": "file", "file": {"file_id": "file-xyz"}}]),
                json!([{"type": "item_reference", "id": "msg_0123456789"}]),
                json!([{"type": "document_url", "document_url": "https://arxiv.org/pdf/1805.04770"}]),
                json!([{"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}}]),
                json!([{"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://b/v.mp4"}}}}]),
            ],
        );
        assert_eq!(
            paths(&c),
            [
                "request.previous_response_id",
                "request.prompt",
                "history[1].wire[0].file_id",
                "history[2].wire[0].source.url",
                "history[3].wire[0].source.file_id",
                "history[4].wire[0].fileData.fileUri",
                "history[5].wire[0].document.source.s3Location.uri",
                "history[6].wire[0].file.file_id",
                "history[7].wire[0].id",
                "history[8].wire[0].document_url",
                "history[9].wire[0].video_url",
                "history[10].wire[0].video.source.s3Location.uri",
            ]
        );
        assert!(unheld(&c)[0].what.contains("resp_0435eb6c2aa8e9eb0069"), "{:?}", unheld(&c)[0]);
    }

    /// Images by address have a price ceiling the simulation counts; placeholders, empty and
    /// null references, and tool definitions name nothing unheld.
    #[test]
    fn images_placeholders_and_empty_references_are_not_listed() {
        let c = capture(
            json!({"previous_response_id": null, "cachedContent": "",
                   "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "m"}],
                   "metadata": {"file_id": "file-abc"}, "tools": [{"type": "function", "name": "f",
                   "parameters": {"properties": {"file_id": {"type": "string"}}}}]}),
            vec![
                json!([{"type": "input_image", "file_id": "file-img"}]),
                json!([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]),
                json!([{"fileData": {"mimeType": "image/png", "fileUri": "gs://b/a.png"}}]),
                json!([{"$": "image", "type": "input_image"}]),
                json!([{"type": "input_text", "text": "my file_id is file-abc"}]),
                // Review findings: an S3 image (Bedrock), MCP servers, a web search's sources,
                // metadata, a file uploaded to the code execution container.
                json!([{"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/a.png"}}}}]),
                json!([{"type": "web_search_call", "action": {"sources": [{"type": "url", "url": "https://a.example"}]}}]),
                json!([{"type": "container_upload", "file_id": "file_011"}]),
                json!([{"type": "input_text", "text": "x", "metadata": {"file_id": "file-abc"}}]),
            ],
        );
        assert_eq!(paths(&c), Vec::<String>::new());
    }
}
