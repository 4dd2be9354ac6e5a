//! A message's `wire` value: the provider's own shape of the message as a *template*.
//!
//! `wire` is `{"f": FORMAT, "m": TEMPLATE, "join"?: true}`. `TEMPLATE` is the provider message (or,
//! for the Responses API, the list of input items) exactly as it was sent, except that every part
//! salvage models is replaced by a *slot marker*: an object whose `"$"` key names the slot kind.
//! Everything else in the template — thinking blocks with their signatures, documents,
//! `cache_control`, unknown blocks and unknown fields — is carried verbatim, so it is weighed, sent
//! and exported, never dropped. The modeled text is never stored twice: a text slot records at
//! most its length (`"$n"`, only when a message has several text slots), never its text.
//!
//! Slot kinds (keys starting with `$` are control keys, never sent):
//!
//! | `$` | position | filled with |
//! |---|---|---|
//! | `text` | a block | the block's other fields plus `text` (or the key in `$k`) = the next text segment |
//! | `s` | a value | the next text segment as a string (`""` when none is left) |
//! | `json` | a block | `{"json": segment parsed}` plus the other fields, or `{"text": segment}` when it no longer parses |
//! | `jsonv` | a value | the next segment parsed as JSON, or `{"output": segment}` (`"error"` for an error result) |
//! | `id` | a value | the message's `tool_call_id` |
//! | `err` | a value | `$v` (default `true`) when the message `is_error`, else the field is left out |
//! | `call` | a block or value | the next tool call, built in the format's shape from the other fields (or `$as`, verbatim) |
//! | `image` | a block | the next image, built in the format's shape from the other fields |
//! | `part` | a block | the next system part (Anthropic `system` blocks) |
//! | `raw` | a block or value | `v`, verbatim (an opaque object that itself has a `"$"` key) |
//!
//! A message's content is its text segments joined with `"\n"`. When the content was rewritten
//! (compaction cut it, replaced it with a stub), the whole new content goes to the first text slot
//! and the other text blocks are left out; tool calls and images fill their slots in order, slots
//! left without a value are left out, and values without a slot are placed where the format puts
//! new ones. A message without `wire` (written by salvage, or a template of another format) is
//! built from the format's default template for its role.

use salvage_types::capture::RequestFormat;
use salvage_types::message::{Image, Message, ToolCall};
use serde_json::{Map, Value};
use std::collections::HashMap;

pub(crate) use crate::arguments::{arguments_from_string, arguments_object, arguments_string};

/// The key of a slot marker.
pub(crate) const MARK: &str = "$";

/// A marker object `{"$": kind}` with more fields to add.
pub(crate) fn marker(kind: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(MARK.into(), Value::String(kind.into()));
    m
}

/// A value copied into a template: an object carrying a `"$"` key anywhere would read as a
/// marker, so it is wrapped in a `raw` marker.
pub(crate) fn lit(v: Value) -> Value {
    if has_mark(&v) {
        let mut m = marker("raw");
        m.insert("v".into(), v);
        Value::Object(m)
    } else {
        v
    }
}

fn has_mark(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key(MARK) || o.values().any(has_mark),
        Value::Array(a) => a.iter().any(has_mark),
        _ => false,
    }
}

/// True for a template node that is a slot (a modeled part), false for a verbatim copy.
pub(crate) fn is_slot(t: &Value) -> bool {
    t.get(MARK).and_then(Value::as_str).is_some_and(|k| k != "raw")
}

/// A text-bearing marker during import: `$t` holds the text until [`finish`] moves it into the
/// message content.
pub(crate) fn text_marker(kind: &str, rest: Map<String, Value>, text: &str) -> Value {
    let mut m = marker(kind);
    for (k, v) in rest {
        m.insert(k, lit(v));
    }
    m.insert("$t".into(), Value::String(text.into()));
    Value::Object(m)
}

/// A marker with the block's other fields (copied literally).
pub(crate) fn slot(kind: &str, rest: Map<String, Value>) -> Value {
    let mut m = marker(kind);
    for (k, v) in rest {
        m.insert(k, lit(v));
    }
    Value::Object(m)
}

/// A call slot that sends the call as it was (its shape is one the builder does not reproduce);
/// the call is still modeled, so that its result stays paired.
pub(crate) fn call_as_sent(block: &Value) -> Value {
    let mut m = marker("call");
    m.insert("$as".into(), lit(block.clone()));
    Value::Object(m)
}

/// The `wire` value of a message.
pub(crate) fn wire(format: RequestFormat, template: Value, join: bool) -> Value {
    let mut o = Map::new();
    o.insert("f".into(), Value::String(format.as_str().into()));
    o.insert("m".into(), template);
    if join {
        o.insert("join".into(), Value::Bool(true));
    }
    Value::Object(o)
}

/// A message's template for `format`, if its `wire` is one: `(template, join)`.
pub(crate) fn template_of(m: &Message, format: RequestFormat) -> Option<(&Value, bool)> {
    let o = m.wire.as_ref()?.as_object()?;
    if o.get("f")?.as_str()? != format.as_str() {
        return None;
    }
    Some((o.get("m")?, o.get("join").and_then(Value::as_bool).unwrap_or(false)))
}

/// A message's template in `format`: its own (`wired`, the third value), else the format's
/// default for it; with its join flag.
pub(crate) fn template_for(
    m: &Message,
    format: RequestFormat,
    default: fn(&Message) -> (Value, bool),
) -> (Value, bool, bool) {
    match template_of(m, format) {
        Some((t, j)) => (t.clone(), j, true),
        None => {
            let (t, j) = default(m);
            (t, j, false)
        }
    }
}

/// A message being imported: the message and its template.
pub(crate) struct Draft {
    pub msg: Message,
    pub template: Value,
    pub join: bool,
}

/// Finishes a draft: the text slots' texts become the content (joined with `"\n"`), lengths are
/// recorded when there are several slots (or an empty one), and `wire` is kept unless the
/// template is exactly the format's default for this message.
pub(crate) fn finish(
    mut d: Draft,
    format: RequestFormat,
    default: impl Fn(&Message) -> (Value, bool),
) -> Message {
    let mut texts = Vec::new();
    take_texts(&mut d.template, &mut texts);
    let annotate = texts.len() >= 2 || texts.iter().any(String::is_empty);
    if annotate {
        let mut lens = texts.iter().map(|t| t.len() as u64);
        put_lengths(&mut d.template, &mut lens);
    }
    // One text (nearly every message) is moved, not copied by a join.
    d.msg.content = if texts.len() == 1 { texts.pop().unwrap_or_default() } else { texts.join("\n") };
    let (def, def_join) = default(&d.msg);
    if !(def == d.template && def_join == d.join) {
        d.msg.wire = Some(wire(format, d.template, d.join));
    }
    d.msg
}

fn is_text_kind(k: &str) -> bool {
    matches!(k, "text" | "s" | "json" | "jsonv")
}

/// The walk over a template's text slot markers, in order (never inside a `raw` value), once
/// for a mutable template and once for a shared one: `$fn(template, f)` calls `f` on each.
macro_rules! text_slot_walk {
    ($fn:ident, $values:ident, $iter:ident $(, $mut:tt)?) => {
        fn $fn(v: &$($mut)? Value, f: &mut dyn FnMut(&$($mut)? Map<String, Value>)) {
            match v {
                Value::Object(o) => match o.get(MARK).and_then(Value::as_str) {
                    Some("raw") => {}
                    Some(k) if is_text_kind(k) => f(o),
                    _ => o.$values().for_each(|x| $fn(x, f)),
                },
                Value::Array(a) => a.$iter().for_each(|x| $fn(x, f)),
                _ => {}
            }
        }
    };
}

text_slot_walk!(each_text_slot, values_mut, iter_mut, mut);
text_slot_walk!(each_text_slot_in, values, iter);

/// Takes each text slot's text (`$t`) out, in order.
fn take_texts(v: &mut Value, out: &mut Vec<String>) {
    each_text_slot(v, &mut |o| {
        out.push(match o.shift_remove("$t") {
            Some(Value::String(s)) => s,
            _ => String::new(),
        })
    });
}

/// Records the lengths of the text slots (`$n`), in order.
fn put_lengths(v: &mut Value, lens: &mut dyn Iterator<Item = u64>) {
    each_text_slot(v, &mut |o| {
        if let Some(n) = lens.next() {
            o.insert("$n".into(), Value::from(n));
        }
    });
}

/// The recorded lengths of a template's text slots, in order (`None` where not recorded).
fn slot_lengths(v: &Value, out: &mut Vec<Option<u64>>) {
    each_text_slot_in(v, &mut |o| out.push(o.get("$n").and_then(Value::as_u64)));
}

/// Splits `content` over `k` text slots: by the recorded lengths when the content is the one
/// imported; else the whole content goes to the first slot (`rewritten` is then true).
fn split<'a>(content: &'a str, lens: &[Option<u64>]) -> (Vec<Option<&'a str>>, bool) {
    match lens.len() {
        0 => (Vec::new(), false),
        1 => (vec![Some(content)], false),
        k => {
            if let Some(parts) = split_exact(content, lens) {
                return (parts.into_iter().map(Some).collect(), false);
            }
            let mut v = vec![None; k];
            if let Some(first) = v.first_mut() {
                *first = Some(content);
            }
            (v, true)
        }
    }
}

fn split_exact<'a>(content: &'a str, lens: &[Option<u64>]) -> Option<Vec<&'a str>> {
    let mut out = Vec::with_capacity(lens.len());
    let mut pos = 0usize;
    for (i, n) in lens.iter().enumerate() {
        let n = usize::try_from((*n)?).ok()?;
        let end = pos.checked_add(n)?;
        out.push(content.get(pos..end)?);
        pos = end;
        if i.saturating_add(1) < lens.len() {
            let next = pos.checked_add(1)?;
            if content.get(pos..next)? != "\n" {
                return None;
            }
            pos = next;
        }
    }
    (pos == content.len()).then_some(out)
}

/// Rewrites a message's content text slot by text slot: each segment the template splits the
/// content into is mapped on its own and the recorded lengths follow, so the rebuilt body still
/// has one block per segment. A content the template does not split is mapped whole. `f`
/// answers `None` for a segment it leaves as it is: a content no segment of which changed is
/// neither copied nor rewritten.
pub fn map_segments(m: &mut Message, mut f: impl FnMut(&str) -> Option<String>) {
    let lens = m.wire.as_ref().and_then(|w| w.get("m")).map(|t| {
        let mut lens = Vec::new();
        slot_lengths(t, &mut lens);
        lens
    });
    let parts = match &lens {
        Some(lens) if lens.len() >= 2 => split_exact(&m.content, lens),
        _ => None,
    };
    let Some(parts) = parts else {
        if let Some(new) = f(&m.content) {
            m.content = new;
        }
        return;
    };
    let mapped: Vec<Option<String>> = parts.iter().map(|p| f(p)).collect();
    if mapped.iter().all(Option::is_none) {
        return;
    }
    let mapped: Vec<String> =
        mapped.into_iter().zip(parts).map(|(new, old)| new.unwrap_or_else(|| old.to_string())).collect();
    m.content = mapped.join("\n");
    if let Some(t) = m.wire.as_mut().and_then(|w| w.get_mut("m")) {
        let mut it = mapped.iter().map(|s| s.len() as u64);
        put_lengths(t, &mut it);
    }
}

/// Builds blocks in one format's shape.
pub(crate) trait Shape {
    /// A tool call built from a marker's other fields.
    fn call(&self, rest: Map<String, Value>, call: &ToolCall) -> Value;
    /// An image built from a marker's other fields.
    fn image(&self, rest: Map<String, Value>, image: &Image) -> Value;
}

/// What the filling of one message's template consumed and what is left to place.
pub(crate) struct Fill<'a> {
    shape: &'a dyn Shape,
    msg: &'a Message,
    segs: Vec<Option<&'a str>>,
    seg_i: usize,
    rewritten: bool,
    /// Content with no text slot to go to (placed by the format).
    pub leftover_text: Option<&'a str>,
    call_i: usize,
    image_i: usize,
    part_i: usize,
    /// Tool names by call id over the whole history (for formats whose results name the tool).
    pub names: &'a HashMap<String, String>,
}

impl<'a> Fill<'a> {
    /// Prepares to fill `template` for `msg`.
    pub fn new(
        shape: &'a dyn Shape,
        msg: &'a Message,
        template: &Value,
        names: &'a HashMap<String, String>,
    ) -> Self {
        let mut lens = Vec::new();
        slot_lengths(template, &mut lens);
        let (segs, rewritten) = split(&msg.content, &lens);
        let leftover_text = (lens.is_empty() && !msg.content.is_empty()).then_some(msg.content.as_str());
        Fill { shape, msg, segs, seg_i: 0, rewritten, leftover_text, call_i: 0, image_i: 0, part_i: 0, names }
    }

    /// Tool calls no slot took.
    pub fn rest_calls(&self) -> &'a [ToolCall] {
        self.msg.tool_calls.get(self.call_i..).unwrap_or(&[])
    }

    /// Images no slot took.
    pub fn rest_images(&self) -> &'a [Image] {
        self.msg.images.get(self.image_i..).unwrap_or(&[])
    }

    fn next_seg(&mut self) -> Option<&'a str> {
        let s = self.segs.get(self.seg_i).copied().flatten();
        self.seg_i = self.seg_i.saturating_add(1);
        s
    }

    /// Fills a template node; `None` means the node is left out.
    pub fn fill(&mut self, t: &Value) -> Option<Value> {
        match t {
            Value::Array(a) => Some(Value::Array(a.iter().filter_map(|x| self.fill(x)).collect())),
            Value::Object(o) => match o.get(MARK).and_then(Value::as_str) {
                Some(kind) => self.fill_marker(kind, o),
                None => {
                    let mut out = Map::with_capacity(o.len());
                    for (k, v) in o {
                        if let Some(x) = self.fill(v) {
                            out.insert(k.clone(), x);
                        }
                    }
                    Some(Value::Object(out))
                }
            },
            other => Some(other.clone()),
        }
    }

    /// The marker's fields that are sent (not control keys), filled.
    fn rest(&mut self, o: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in o {
            if k.starts_with('$') {
                continue;
            }
            if let Some(x) = self.fill(v) {
                out.insert(k.clone(), x);
            }
        }
        out
    }

    fn fill_marker(&mut self, kind: &str, o: &Map<String, Value>) -> Option<Value> {
        match kind {
            "raw" => o.get("v").cloned(),
            "text" => {
                let seg = self.next_seg()?;
                if seg.is_empty() && (self.rewritten || !o.contains_key("$n")) {
                    return None;
                }
                let key = o.get("$k").and_then(Value::as_str).unwrap_or("text").to_string();
                let mut b = self.rest(o);
                b.insert(key, Value::String(seg.into()));
                Some(Value::Object(b))
            }
            "s" => Some(Value::String(self.next_seg().unwrap_or_default().into())),
            "json" => {
                let seg = self.next_seg()?;
                let mut b = self.rest(o);
                match serde_json::from_str::<Value>(seg) {
                    Ok(v) if !seg.is_empty() => {
                        b.insert("json".into(), v);
                    }
                    _ => {
                        b = Map::new();
                        b.insert("text".into(), Value::String(seg.into()));
                    }
                }
                Some(Value::Object(b))
            }
            "jsonv" => {
                let seg = self.next_seg().unwrap_or_default();
                match serde_json::from_str::<Value>(seg) {
                    Ok(v @ Value::Object(_)) => Some(v),
                    _ => {
                        let key = if self.msg.is_error { "error" } else { "output" };
                        let mut m = Map::new();
                        m.insert(key.into(), Value::String(seg.into()));
                        Some(Value::Object(m))
                    }
                }
            }
            "id" => Some(Value::String(self.msg.tool_call_id.clone().unwrap_or_default())),
            "err" => self.msg.is_error.then(|| o.get("$v").cloned().unwrap_or(Value::Bool(true))),
            "call" => {
                let call = self.msg.tool_calls.get(self.call_i)?;
                self.call_i = self.call_i.saturating_add(1);
                if let Some(as_sent) = o.get("$as") {
                    // A call whose shape the builder does not reproduce, kept as sent.
                    return self.fill(as_sent);
                }
                let mut rest = self.rest(o);
                for (k, v) in o {
                    if k.starts_with('$') && k != MARK {
                        if let Some(x) = self.fill(v) {
                            rest.insert(k.clone(), x);
                        }
                    }
                }
                Some(self.shape.call(rest, call))
            }
            "image" => {
                let image = self.msg.images.get(self.image_i)?;
                self.image_i = self.image_i.saturating_add(1);
                let rest = self.rest(o);
                Some(self.shape.image(rest, image))
            }
            "part" => {
                let part = self.msg.system_parts.get(self.part_i)?;
                self.part_i = self.part_i.saturating_add(1);
                let mut b = self.rest(o);
                b.insert("type".into(), Value::String(part.kind.clone()));
                b.insert("text".into(), Value::String(part.text.clone()));
                if let Some(cc) = &part.cache_control {
                    b.insert("cache_control".into(), cc.clone());
                }
                Some(Value::Object(b))
            }
            // A marker this build does not know is carried as it is.
            _ => Some(Value::Object(o.clone())),
        }
    }
}

/// Takes the control flag `key` out of a call marker's fields.
pub(crate) fn flag(rest: &mut Map<String, Value>, key: &str) -> bool {
    rest.shift_remove(key).is_some_and(|v| v != Value::Bool(false))
}

/// Drops control keys a builder did not use.
pub(crate) fn strip_control(rest: &mut Map<String, Value>) {
    rest.retain(|k, _| !k.starts_with('$'));
}

/// Tool names by call id, over a history.
pub(crate) fn call_names(history: &[Message]) -> HashMap<String, String> {
    history.iter().flat_map(|m| m.tool_calls.iter()).map(|c| (c.id.clone(), c.name.clone())).collect()
}

/// An image block as an `image` slot with `rest` when the format rebuilds it as sent (the image
/// is then modeled and returned), else the block verbatim.
pub(crate) fn image_slot(
    shape: &dyn Shape,
    rest: Map<String, Value>,
    img: Image,
    sent: &Value,
) -> (Value, Option<Image>) {
    if shape.image(rest.clone(), &img) == *sent {
        (slot("image", rest), Some(img))
    } else {
        (lit(sent.clone()), None)
    }
}

/// Fills a template and places what had no slot with `place`.
pub(crate) fn build(
    shape: &dyn Shape,
    msg: &Message,
    template: &Value,
    names: &HashMap<String, String>,
    place: impl FnOnce(&mut Value, &mut Fill<'_>),
) -> Value {
    let mut f = Fill::new(shape, msg, template, names);
    let mut v = f.fill(template).unwrap_or(Value::Null);
    place(&mut v, &mut f);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_uses_lengths_when_they_fit() {
        let (s, rw) = split("ab\ncd", &[Some(2), Some(2)]);
        assert_eq!(s, vec![Some("ab"), Some("cd")]);
        assert!(!rw);
        let (s, rw) = split("abXcd", &[Some(2), Some(2)]);
        assert_eq!(s, vec![Some("abXcd"), None]);
        assert!(rw);
        let (s, _) = split("é\n", &[Some(1), Some(0)]);
        assert_eq!(s, vec![Some("é\n"), None], "never splits inside a char");
    }

    #[test]
    fn lit_escapes_dollar_objects() {
        let v = serde_json::json!({"a": {"$": "x"}});
        assert_eq!(lit(v)["$"], "raw");
        assert_eq!(lit(serde_json::json!({"a": 1})), serde_json::json!({"a": 1}));
    }
}
