//! The simulated provider's weight of payloads that real tools wrote (`testdata/media/`), against
//! what each file really holds: its pages, its pixel size, its seconds, as `expected.json`
//! records them from outside salvage (the upstream corpus's metadata, `file(1)`, the encoder's
//! command, `soxi`). The expected tokens are the documented rules applied to those figures here,
//! never a count copied from salvage's output.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use base64::Engine;
use salvage_replay::media::{payload_tokens, MAX_IMAGE_TOKENS, MEDIA_TOKENS, PAGE_TOKENS};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/media")
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap()
}

fn entries(kind: &str) -> Vec<Value> {
    expected().get(kind).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn payload(file: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir().join(file)).unwrap())
}

fn field(e: &Value, name: &str) -> u64 {
    e.get(name).and_then(Value::as_u64).unwrap_or_else(|| panic!("{e}: no {name}"))
}

fn file(e: &Value) -> &str {
    e.get("file").and_then(Value::as_str).unwrap()
}

/// Anthropic's image rule: the long edge scaled to at most 1568, then `w·h/750`.
fn scaled_area_tokens(w: u64, h: u64) -> u64 {
    let long = w.max(h);
    let (w, h) = if long > 1568 { (w * 1568 / long, h * 1568 / long) } else { (w, h) };
    w * h / 750
}

#[test]
fn every_sample_is_listed_and_every_listed_sample_exists() {
    let mut listed: Vec<String> =
        ["pdf", "image", "sound"].iter().flat_map(|k| entries(k)).map(|e| file(&e).to_string()).collect();
    listed.sort();
    let mut present = Vec::new();
    for sub in ["pdf", "image", "audio"] {
        for f in std::fs::read_dir(dir().join(sub)).unwrap() {
            present.push(format!("{sub}/{}", f.unwrap().file_name().to_string_lossy()));
        }
    }
    present.sort();
    assert_eq!(listed, present);
    assert!(listed.len() >= 30, "{} samples", listed.len());
}

#[test]
fn a_real_pdf_costs_its_pages() {
    let pdfs = entries("pdf");
    assert!(pdfs.len() >= 15);
    let mut wrong = Vec::new();
    for e in &pdfs {
        let want = field(e, "pages") * PAGE_TOKENS;
        let got = payload_tokens(&payload(file(e)));
        if got != want {
            wrong.push(format!(
                "{}: {} pages counted, {} real",
                file(e),
                got / PAGE_TOKENS,
                field(e, "pages")
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_real_image_costs_its_pixel_size() {
    let mut wrong = Vec::new();
    for e in entries("image") {
        let (w, h) = (field(&e, "width"), field(&e, "height"));
        let data = payload(file(&e));
        // The simulated provider: at least 85, at most 1 600.
        let want = scaled_area_tokens(w, h).clamp(MEDIA_TOKENS, MAX_IMAGE_TOKENS);
        let got = payload_tokens(&data);
        if got != want {
            wrong.push(format!("simulation, {}: {got} tokens, {want} for {w}x{h}", file(&e)));
        }
        // The client's estimator (behaviour spec section 1): at least 85, no ceiling.
        let image = salvage_types::message::Image { media_type: None, data: Some(data), url: None };
        let want = scaled_area_tokens(w, h).max(85);
        let got = salvage_types::weight::image_tokens(&image);
        if got != want {
            wrong.push(format!("client, {}: {got} tokens, {want} for {w}x{h}", file(&e)));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn real_sound_costs_its_seconds() {
    let mut wrong = Vec::new();
    for e in entries("sound") {
        let want = field(&e, "seconds") * 32;
        let got = payload_tokens(&payload(file(&e)));
        // An MP3 carries a few hundredths of a second of the encoder's delay and padding.
        if got < want || got > want + want / 100 {
            wrong.push(format!("{}: {got} tokens, {want} for {} s", file(&e), field(&e, "seconds")));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The sound reaches the count where the wire formats carry it: an OpenAI `input_audio` part
/// and a Gemini `inlineData` part holding the real LAME VBR file weigh its 10 seconds (they
/// weighed 5 when the first frame's bitrate stood for the file's).
#[test]
fn sound_in_request_blocks_weighs_its_seconds() {
    use salvage_replay::upstream::wire_tokens;
    let data = payload("audio/vbr-v9-10s.mp3");
    let blocks = [
        serde_json::json!([{"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}}]),
        serde_json::json!([{"inlineData": {"mimeType": "audio/mp3", "data": data}}]),
    ];
    for b in blocks {
        let n = wire_tokens(&b);
        assert!((320..=330).contains(&n), "{n} tokens for 10 s");
    }
}
