//! stub
use crate::{Cx, Imported};
use salvage_types::capture::{CaptureError, Request};
use salvage_types::message::Message;
use serde_json::Value;
pub(crate) fn import(cx: &Cx<'_>, _body: &Value) -> Result<Imported, CaptureError> {
    Err(cx.err("", "todo"))
}
pub(crate) fn body(_request: &Request, _history: &[Message]) -> Value {
    Value::Null
}
