#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 8: about a minute in all, as CI does), seeded
# from testdata/. Longer runs: `bash fuzz/run.sh 600`. A crash fails the run and leaves its input
# in fuzz/artifacts/TARGET/; turn it into a regression test in the crate it broke.
# cargo-fuzz needs nightly features; RUSTC_BOOTSTRAP=1 enables them on the stable toolchain this
# project builds with, and `-s none` uses coverage guidance without a sanitizer runtime.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${1:-8}"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
mkdir -p corpus/capture corpus/importers corpus/events corpus/classify corpus/recall corpus/sizes
for f in ../testdata/corpus/*.json ../testdata/bad/*.json; do [ "$(stat -c %s "$f")" -lt 200000 ] && cp "$f" corpus/capture/; done
cp ../testdata/requests/*.json corpus/importers/
cp ../testdata/samples/*/*.json corpus/importers/ 2>/dev/null || true
find ../testdata/samples/claude-code ../testdata/samples/codex ../testdata/samples/cline -type f -name '*.jsonl' -size -200k -exec cp {} corpus/importers/ \;
sed -n 's/.*"message": "\(.*\)".*/\1/p' ../testdata/provider-errors/*.json | sed -n '1,50p' | while IFS= read -r l; do printf '%s' "$l" > "corpus/classify/$(printf '%s' "$l" | md5sum | cut -c1-12)"; done
cp ../crates/types/tests/snapshots/events.jsonl corpus/events/all.jsonl
split -l 1 -d ../crates/types/tests/snapshots/events.jsonl corpus/events/kind-
printf '<<ccr:0123456789abcdef>>' > corpus/recall/marker; printf '{"keys":["aaaabbbbccccdddd"]}' > corpus/recall/json
printf '5MB' > corpus/sizes/mb; printf '2.5 kb' > corpus/sizes/kb
cargo fuzz build -s none
for t in capture importers classify recall sizes events; do
  echo "fuzz: $t for ${SECONDS_EACH}s"
  if ! cargo fuzz run -s none "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" -print_final_stats=1 > "target/$t.log" 2>&1; then
    tail -40 "target/$t.log"
    echo "fuzz: $t found a crash (input in fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units" "target/$t.log" || true
done
