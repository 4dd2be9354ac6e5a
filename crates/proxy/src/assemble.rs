//! Rebuilding the assistant message from a response as it streams past: Anthropic SSE events,
//! OpenAI chat chunks, Responses events, or a whole JSON body. Fed chunk by chunk; of a stream it
//! holds only the current partial line and the message being built, never the stream. A JSON body
//! is one document: its frames are kept by reference (the frames relayed, not a copy) and parsed
//! when the response ends, by the writer, off the request path.

use crate::decode::{decode_whole, Coding, Decoder};
use crate::route::Api;
use bytes::{Bytes, BytesMut};
use salvage_types::message::{Message, ToolCall};
use serde_json::{Map, Value};

/// A JSON (non-streaming) body is parsed when it is at most this size (larger ones are relayed
/// and the reply is not rebuilt).
pub const MAX_JSON_COPY: usize = 64 * 1024 * 1024;

/// What a response said, once it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The assistant message.
    pub message: Message,
    /// The stop reason (`end_turn`, `stop`, `tool_use`, `length`, …).
    pub stop_reason: Option<String>,
    /// Input tokens the provider counted.
    pub input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// An error event inside a 200 stream (Anthropic `event: error`).
    pub stream_error: Option<String>,
    /// The response's id (OpenAI Responses), which a later request may continue.
    pub response_id: Option<String>,
}

#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    args: String,
}

/// Incremental parser of one response.
#[derive(Debug)]
pub struct Assembler {
    api: Api,
    sse: bool,
    line: Vec<u8>,
    json: Vec<Bytes>,
    json_len: usize,
    json_over: bool,
    text: String,
    calls: Vec<Call>,
    /// Anthropic content block index → call index.
    block_call: Vec<(u64, usize)>,
    /// The body's content-coding: a stream is decoded as it arrives, a JSON body when it ends.
    coding: Coding,
    decoder: Option<Decoder>,
    out: Assembled,
}

impl Assembler {
    /// A parser for a response of `api`; `sse` when the response is an event stream.
    pub fn new(api: Api, sse: bool) -> Assembler {
        Assembler {
            api,
            sse,
            line: Vec::new(),
            json: Vec::new(),
            json_len: 0,
            json_over: false,
            text: String::new(),
            calls: Vec::new(),
            block_call: Vec::new(),
            coding: Coding::Identity,
            decoder: None,
            out: Assembled {
                message: Message::assistant(""),
                stop_reason: None,
                input_tokens: None,
                output_tokens: None,
                stream_error: None,
                response_id: None,
            },
        }
    }

    /// A parser for a response body encoded in `coding` (its `content-encoding`).
    pub fn encoded(api: Api, sse: bool, coding: Coding) -> Assembler {
        let mut a = Assembler::new(api, sse);
        a.coding = coding;
        if sse && coding != Coding::Identity {
            a.decoder = Some(Decoder::new(coding));
        }
        a
    }

    /// A parser of a body in a coding the proxy does not read: the response is recorded as
    /// accepted, its reply as unknown.
    pub fn unreadable(api: Api) -> Assembler {
        let mut a = Assembler::new(api, false);
        a.json_over = true;
        a
    }

    /// Feeds the next bytes of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.sse {
            self.feed_encoded_sse(chunk);
        } else {
            self.keep_json(Bytes::copy_from_slice(chunk));
        }
    }

    /// Feeds the next frame of the body as relayed: a JSON body keeps the frame itself (a
    /// reference, not a copy).
    pub fn feed_bytes(&mut self, chunk: &Bytes) {
        if self.sse {
            self.feed_encoded_sse(chunk);
        } else {
            self.keep_json(chunk.clone());
        }
    }

    /// An event stream's bytes, decoded first when the stream is encoded.
    fn feed_encoded_sse(&mut self, chunk: &[u8]) {
        match self.decoder.take() {
            None => self.feed_sse(chunk),
            Some(mut d) => {
                d.feed(chunk, &mut |plain| self.feed_sse(plain));
                self.decoder = Some(d);
            }
        }
    }

    /// The bytes this parser holds (the partial line, the text and calls rebuilt, a JSON body's
    /// frames): what its turn weighs in the writer's queue.
    pub fn held(&self) -> usize {
        let calls: usize = self
            .calls
            .iter()
            .map(|c| c.id.len().saturating_add(c.name.len()).saturating_add(c.args.len()))
            .fold(0, usize::saturating_add);
        self.line.len().saturating_add(self.json_len).saturating_add(self.text.len()).saturating_add(calls)
    }

    fn keep_json(&mut self, chunk: Bytes) {
        let len = self.json_len.saturating_add(chunk.len());
        if self.json_over || len > MAX_JSON_COPY {
            self.json_over = true;
            self.json = Vec::new();
            self.json_len = 0;
            return;
        }
        self.json_len = len;
        self.json.push(chunk);
    }

    /// Complete lines are parsed where they lie in the frame; only a line split across frames is
    /// gathered first.
    fn feed_sse(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let (line, after) = rest.split_at_checked(i).unwrap_or((rest, &[]));
            if self.line.is_empty() {
                self.sse_line(line);
            } else {
                let mut gathered = std::mem::take(&mut self.line);
                gathered.extend_from_slice(line);
                self.sse_line(&gathered);
                gathered.clear();
                self.line = gathered;
            }
            rest = after.get(1..).unwrap_or_default();
        }
        self.line.extend_from_slice(rest);
    }

    fn sse_line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else { return };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            return;
        }
        let Ok(Value::Object(ev)) = serde_json::from_slice::<Value>(data) else { return };
        match self.api {
            Api::AnthropicMessages => self.anthropic_event(&ev),
            Api::OpenaiChat => self.chat_chunk(&ev),
            Api::OpenaiResponses => self.responses_event(&ev),
        }
    }

    fn anthropic_event(&mut self, ev: &Map<String, Value>) {
        match ev.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(u) = ev.get("message").and_then(|m| m.get("usage")) {
                    self.anthropic_usage(u);
                }
            }
            Some("content_block_start") => {
                let block = ev.get("content_block");
                if block.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("tool_use") {
                    let b = block.unwrap_or(&Value::Null);
                    let idx = ev.get("index").and_then(Value::as_u64).unwrap_or(0);
                    self.block_call.push((idx, self.calls.len()));
                    self.calls.push(Call {
                        id: str_of(b, "id"),
                        name: str_of(b, "name"),
                        args: String::new(),
                    });
                } else if let Some(t) = block.and_then(|b| b.get("text")).and_then(Value::as_str) {
                    self.text.push_str(t);
                }
            }
            Some("content_block_delta") => {
                let d = ev.get("delta").unwrap_or(&Value::Null);
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => self.text.push_str(str_in(d, "text")),
                    Some("input_json_delta") => {
                        let idx = ev.get("index").and_then(Value::as_u64).unwrap_or(0);
                        let call = self.block_call.iter().find(|(i, _)| *i == idx).map(|&(_, c)| c);
                        if let Some(call) = call.and_then(|c| self.calls.get_mut(c)) {
                            call.args.push_str(str_in(d, "partial_json"));
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(s) = ev.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str) {
                    self.out.stop_reason = Some(s.to_string());
                }
                if let Some(u) = ev.get("usage") {
                    self.anthropic_usage(u);
                }
            }
            Some("error") => {
                self.out.stream_error = Some(Value::Object(ev.clone()).to_string());
            }
            _ => {}
        }
    }

    fn anthropic_usage(&mut self, u: &Value) {
        if let Some(n) = u.get("input_tokens").and_then(Value::as_u64) {
            let cached =
                u.get("cache_read_input_tokens").and_then(Value::as_u64).unwrap_or(0).saturating_add(
                    u.get("cache_creation_input_tokens").and_then(Value::as_u64).unwrap_or(0),
                );
            self.out.input_tokens = Some(n.saturating_add(cached));
        }
        if let Some(n) = u.get("output_tokens").and_then(Value::as_u64) {
            self.out.output_tokens = Some(n);
        }
    }

    fn chat_chunk(&mut self, ev: &Map<String, Value>) {
        if let Some(choice) = ev.get("choices").and_then(Value::as_array).and_then(|c| c.first()) {
            let d = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(t) = d.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
            }
            if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    let idx =
                        usize::try_from(c.get("index").and_then(Value::as_u64).unwrap_or(0)).unwrap_or(0);
                    if self.calls.len() <= idx {
                        self.calls.resize_with(idx.saturating_add(1), Call::default);
                    }
                    let Some(call) = self.calls.get_mut(idx) else { continue };
                    if let Some(id) = c.get("id").and_then(Value::as_str) {
                        call.id = id.to_string();
                    }
                    if let Some(f) = c.get("function") {
                        if let Some(n) = f.get("name").and_then(Value::as_str) {
                            call.name.push_str(n);
                        }
                        if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                            call.args.push_str(a);
                        }
                    }
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.out.stop_reason = Some(r.to_string());
            }
        }
        if let Some(u) = ev.get("usage").filter(|u| !u.is_null()) {
            self.chat_usage(u);
        }
    }

    fn chat_usage(&mut self, u: &Value) {
        if let Some(n) = u.get("prompt_tokens").and_then(Value::as_u64) {
            self.out.input_tokens = Some(n);
        }
        if let Some(n) = u.get("completion_tokens").and_then(Value::as_u64) {
            self.out.output_tokens = Some(n);
        }
    }

    fn responses_event(&mut self, ev: &Map<String, Value>) {
        match ev.get("type").and_then(Value::as_str) {
            Some("response.output_text.delta") => {
                self.text.push_str(ev.get("delta").and_then(Value::as_str).unwrap_or_default())
            }
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                if let Some(r) = ev.get("response") {
                    // The final event carries the whole response: it wins over the deltas.
                    self.text.clear();
                    self.calls.clear();
                    self.responses_object(r);
                }
            }
            Some("error") => self.out.stream_error = Some(Value::Object(ev.clone()).to_string()),
            _ => {}
        }
    }

    fn responses_object(&mut self, r: &Value) {
        if let Some(id) = r.get("id").and_then(Value::as_str) {
            self.out.response_id = Some(id.to_string());
        }
        for item in r.get("output").and_then(Value::as_array).into_iter().flatten() {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    for p in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            self.text.push_str(t);
                        }
                    }
                }
                Some("function_call") => self.calls.push(Call {
                    id: str_of(item, "call_id"),
                    name: str_of(item, "name"),
                    args: str_of(item, "arguments"),
                }),
                _ => {}
            }
        }
        if let Some(s) = r.get("status").and_then(Value::as_str) {
            self.out.stop_reason = Some(s.to_string());
        }
        if let Some(u) = r.get("usage") {
            if let Some(n) = u.get("input_tokens").and_then(Value::as_u64) {
                self.out.input_tokens = Some(n);
            }
            if let Some(n) = u.get("output_tokens").and_then(Value::as_u64) {
                self.out.output_tokens = Some(n);
            }
        }
    }

    fn json_body(&mut self) {
        let json = match self.json.as_slice() {
            [one] => one.clone(),
            many => {
                let mut all = BytesMut::with_capacity(self.json_len);
                for c in many {
                    all.extend_from_slice(c);
                }
                all.freeze()
            }
        };
        self.json = Vec::new();
        let json = match self.coding {
            Coding::Identity => json,
            c => match decode_whole(c, &json, MAX_JSON_COPY) {
                Some(plain) => Bytes::from(plain),
                None => return,
            },
        };
        let Ok(v) = serde_json::from_slice::<Value>(&json) else { return };
        match self.api {
            Api::AnthropicMessages => {
                for b in v.get("content").and_then(Value::as_array).into_iter().flatten() {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => self.text.push_str(str_in(b, "text")),
                        Some("tool_use") => self.calls.push(Call {
                            id: str_of(b, "id"),
                            name: str_of(b, "name"),
                            args: b.get("input").map(Value::to_string).unwrap_or_default(),
                        }),
                        _ => {}
                    }
                }
                if let Some(s) = v.get("stop_reason").and_then(Value::as_str) {
                    self.out.stop_reason = Some(s.to_string());
                }
                if let Some(u) = v.get("usage") {
                    self.anthropic_usage(u);
                }
            }
            Api::OpenaiChat => {
                if let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|c| c.first()) {
                    let m = choice.get("message").unwrap_or(&Value::Null);
                    if let Some(t) = m.get("content").and_then(Value::as_str) {
                        self.text.push_str(t);
                    }
                    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                        let f = c.get("function").unwrap_or(&Value::Null);
                        self.calls.push(Call {
                            id: str_of(c, "id"),
                            name: str_of(f, "name"),
                            args: str_of(f, "arguments"),
                        });
                    }
                    if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                        self.out.stop_reason = Some(r.to_string());
                    }
                }
                if let Some(u) = v.get("usage") {
                    self.chat_usage(u);
                }
            }
            Api::OpenaiResponses => self.responses_object(&v),
        }
    }

    /// The response ended: the message as rebuilt.
    pub fn finish(mut self) -> Assembled {
        if self.sse {
            if let Some(mut d) = self.decoder.take() {
                d.finish(&mut |plain| self.feed_sse(plain));
            }
            let line = std::mem::take(&mut self.line);
            self.sse_line(&line);
        } else if !self.json_over {
            self.json_body();
        }
        let mut m = Message::assistant(std::mem::take(&mut self.text));
        for c in self.calls.drain(..) {
            let arguments = if c.args.trim().is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_str(&c.args).unwrap_or(Value::String(c.args))
            };
            m.tool_calls.push(ToolCall { id: c.id, kind: "function".into(), name: c.name, arguments });
        }
        self.out.message = m;
        self.out
    }
}

fn str_in<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn str_of(v: &Value, key: &str) -> String {
    str_in(v, key).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_split(a: &mut Assembler, s: &str) {
        // Split at every 7 bytes to exercise partial lines.
        for c in s.as_bytes().chunks(7) {
            a.feed(c);
        }
    }

    #[test]
    fn anthropic_stream_with_text_and_tool_use() {
        let s = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu1\",\"name\":\"ls\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"p\\\":\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n";
        let mut a = Assembler::new(Api::AnthropicMessages, true);
        feed_split(&mut a, s);
        let r = a.finish();
        assert_eq!(r.message.content, "Hello");
        assert_eq!(r.message.tool_calls[0].name, "ls");
        assert_eq!(r.message.tool_calls[0].arguments, serde_json::json!({"p": 1}));
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!((r.input_tokens, r.output_tokens), (Some(12), Some(9)));
    }

    #[test]
    fn openai_chat_chunks_and_json() {
        let s =
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        let mut a = Assembler::new(Api::OpenaiChat, true);
        feed_split(&mut a, s);
        let r = a.finish();
        assert_eq!(r.message.content, "Hi there");
        assert_eq!(r.stop_reason.as_deref(), Some("stop"));
        assert_eq!(r.input_tokens, Some(5));
        let mut a = Assembler::new(Api::OpenaiChat, false);
        feed_split(
            &mut a,
            r#"{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        );
        let r = a.finish();
        assert_eq!((r.message.content.as_str(), r.stop_reason.as_deref()), ("ok", Some("length")));
    }
}
