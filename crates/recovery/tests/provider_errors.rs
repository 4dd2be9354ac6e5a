//! The provider-error table in `testdata/provider-errors/`: one file per provider and gateway
//! style, every real error body classified as expected.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::classify::{classify, FailureInput};
use salvage_types::capture::Failure;
use serde_json::Value;

#[test]
fn every_real_error_body_is_classified() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/provider-errors");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let names: Vec<String> =
        files.iter().map(|p| p.file_stem().unwrap().to_string_lossy().to_string()).collect();
    for style in [
        "anthropic",
        "openai-chat",
        "openai-responses",
        "gemini",
        "xai",
        "mistral",
        "groq",
        "bedrock",
        "nginx-413",
        "cloudflare",
        "akamai",
        "aws-sdk-html",
        "resets",
        "huggingface-tgi",
        "vllm",
        "llamacpp",
        "openrouter",
        "azure",
        "axios",
        "transport-node",
        "transport-python",
        "transport-go",
        "word-boundary-traps",
    ] {
        assert!(names.iter().any(|n| n == style), "testdata/provider-errors/{style}.json exists");
    }
    let mut n = 0;
    for f in &files {
        let cases: Vec<Value> = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        assert!(!cases.is_empty());
        for c in cases {
            let source = c["source"].as_str().unwrap_or("");
            assert!(!source.is_empty(), "{}: {} names no source", f.display(), c["name"]);
            let failure = Failure {
                status: c["status"].as_u64().map(|s| u16::try_from(s).unwrap()),
                message: c["message"].as_str().unwrap().to_string(),
                transport: c["transport"].as_str().map(str::to_string),
                rejected_request_bytes: None,
            };
            let input = FailureInput::new(failure, c["history_bytes"].as_u64().unwrap());
            let got = classify(&input);
            assert_eq!(
                got.class.as_str(),
                c["class"].as_str().unwrap(),
                "{}: {} ({})",
                f.display(),
                c["name"],
                got.reason
            );
            n += 1;
        }
    }
    assert!(n >= 90, "{n} cases");
}
