# Convenience recipes over plain cargo; CI calls cargo directly (.ci/run).

# Build the salvage binary (release).
build:
    cargo build --release --locked -p salvage-cli

# The README's test command.
test:
    cargo test --workspace --locked

# Formatting, lints and docs as CI checks them.
check:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# Everything CI runs.
ci:
    bash .ci/run

# The benchmark suite (pass --quick for a run under a minute, --json for machines).
bench *ARGS:
    cargo run --release --locked -p salvage-bench -- {{ARGS}}
