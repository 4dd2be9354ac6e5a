//! `salvage proxy`: record (and with `--recover`, recover) the sessions of any client live.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::Output;
use salvage_journal::Journal;
use salvage_proxy::record::{Keep, Writer, WriterOptions, Written};
use salvage_proxy::route::Api;
use salvage_proxy::{Options, Proxy};
use salvage_types::config::SETTING_NAMES;
use salvage_types::Config;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Arguments of `salvage proxy`.
#[derive(clap::Args)]
#[command(after_help = "Point a client at the proxy with one environment variable:\n  \
ANTHROPIC_BASE_URL=http://127.0.0.1:8787      Claude Code and the Anthropic SDKs\n  \
OPENAI_BASE_URL=http://127.0.0.1:8787/v1      Codex and the OpenAI SDKs\n\n\
Example:\n  salvage proxy --upstream https://api.anthropic.com --captures .salvage/captures --recover\n\n\
Every turn is journaled (salvage journal sessions); every failure is written to --captures as a\n\
salvage.capture/1 file that `salvage replay FILE` reproduces. Credentials are never recorded.")]
pub struct Args {
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: String,
    /// The provider's base URL (`https://api.anthropic.com`, `https://api.openai.com`, a gateway…).
    #[arg(long, value_name = "URL")]
    upstream: String,
    /// The API of every request (default: from the path: /v1/messages, /v1/chat/completions,
    /// /v1/responses).
    #[arg(long, value_parser = ["anthropic", "openai", "openai-responses"])]
    provider: Option<String>,
    /// Write a redacted, ready-to-replay capture of every failure into this folder.
    #[arg(long, value_name = "DIR")]
    captures: Option<PathBuf>,
    /// On a recoverable failure (overflow, body cap, WAF, reset on a large body) compact with the
    /// recovery ladder and retry, so the client gets an answer (CHATCLI_MAX_RECOVERY_ATTEMPTS bounds it).
    #[arg(long)]
    recover: bool,
    /// Also trust the certificates of this PEM file for an HTTPS upstream (besides the bundled roots).
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<PathBuf>,
    /// Journal nothing (captures are still written when --captures is given, and --recover still
    /// recovers).
    #[arg(long)]
    no_journal: bool,
    /// The request bodies the proxy holds at once, across every request in flight (e.g. 1GB,
    /// 512MB). A request that does not fit waits up to 10 s for room, then is answered 503 with
    /// retry-after and a JSON error naming this budget.
    #[arg(long, value_name = "SIZE", default_value = "1GB")]
    request_budget: String,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs the command until interrupted (SIGINT or SIGTERM), then finishes journaling.
pub fn run(args: Args, env: &BTreeMap<String, String>, out: &mut Output) -> Outcome {
    let settings: BTreeMap<String, String> = env
        .iter()
        .filter(|(k, _)| SETTING_NAMES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let options = options(&args, &settings)?;
    let listen: std::net::SocketAddr =
        args.listen.parse().map_err(|e| Failure::Input(format!("--listen {}: {e}", args.listen)))?;
    // Bound before the journal or the captures folder is made: an address that cannot be had
    // leaves nothing behind (review of the CLI, finding 11).
    let bound = std::net::TcpListener::bind(listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Failure::Input(format!("--listen {listen}: {e}")))?;
    let writer = writer(&args, settings)?;
    let proxy = Proxy::new(options, writer, Box::new(|line: &str| eprintln!("salvage proxy: {line}")))
        .map_err(Failure::input)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Problem(format!("runtime: {e}")))?;
    let result = rt.block_on(serve(&args, bound, proxy.clone(), out));
    proxy.flush();
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

/// The largest `--upstream-ca` file read (a bundle of every public root is about 250 KB).
const MAX_CA_BYTES: u64 = 4 << 20;

/// What the proxy is asked to do, from the arguments and the `CHATCLI_*` settings.
fn options(args: &Args, settings: &BTreeMap<String, String>) -> Result<Options, Failure> {
    let upstream: salvage_proxy::server::Uri =
        args.upstream.parse().map_err(|e| Failure::Input(format!("--upstream {}: {e}", args.upstream)))?;
    let extra_roots = match &args.upstream_ca {
        None => Vec::new(),
        Some(p) => {
            // A certificate bundle is small: read bounded, a regular file only (a FIFO hung the
            // proxy's start, /dev/zero grew it until memory ran out; review of the CLI, finding 3).
            let pem = salvage_types::input::read_input(p, MAX_CA_BYTES, false).map_err(Failure::input)?;
            salvage_proxy::server::read_pem_certificates(&pem)
                .map_err(|e| Failure::Input(format!("{}: {e}", p.display())))?
        }
    };
    let budget = salvage_types::ByteSize::parse(&args.request_budget).ok_or_else(|| {
        Failure::Input(format!("--request-budget: {:?} is not a size such as 1GB", args.request_budget))
    })?;
    Ok(Options {
        upstream,
        api: args.provider.as_deref().and_then(Api::parse),
        recover: args.recover,
        config: Config::from_env(settings),
        extra_roots,
        max_request_bytes: 256 * 1024 * 1024,
        settings: settings.clone(),
        request_budget: usize::try_from(budget.0).unwrap_or(usize::MAX),
        budget_wait: salvage_proxy::budget::DEFAULT_WAIT,
    })
}

/// The journal writer (none when neither the journal nor captures are wanted; an in-memory
/// journal when only captures are).
fn writer(args: &Args, settings: BTreeMap<String, String>) -> Result<Option<Writer>, Failure> {
    if let Some(dir) = &args.captures {
        // Owner-only, as every output (the captures hold conversations).
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir).map_err(|e| Failure::Input(format!("{}: cannot create: {e}", dir.display())))?;
    }
    if args.no_journal && args.captures.is_none() {
        return Ok(None);
    }
    let journal = if args.no_journal {
        Journal::in_memory().map_err(Failure::input)?
    } else {
        // The same `--db` rules as every command: no SQLite URI or `:memory:`, no folder made
        // but the default one (review of the CLI, finding 11).
        Journal::from_store(args.db.open()?)
    };
    let report = Box::new(|w: Written| match w {
        Written::Turn { session, capture: Some(c) } => {
            eprintln!("salvage proxy: {session}: failure captured in {}", c.display())
        }
        Written::Turn { .. } => {}
        Written::Failed(e) => eprintln!("salvage proxy: journal: {e}"),
    });
    // An in-memory journal serves captures only: it keeps the conversations written last.
    let keep = args.no_journal.then_some(Keep::DEFAULT);
    let options = WriterOptions { captures: args.captures.clone(), settings, keep };
    Writer::start(journal, options, report)
        .map(Some)
        .map_err(|e| Failure::Problem(format!("journal writer: {e}")))
}

/// Listens and serves until SIGINT or SIGTERM.
async fn serve(
    args: &Args,
    bound: std::net::TcpListener,
    proxy: Proxy,
    out: &mut Output,
) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::from_std(bound)
        .map_err(|e| Failure::Input(format!("--listen {}: {e}", args.listen)))?;
    let local = listener.local_addr().map_err(|e| Failure::Problem(e.to_string()))?;
    out.line(&format!("listening on http://{local} -> {}", args.upstream))?;
    out.flush()?;
    eprintln!(
        "salvage proxy: journal {}; captures {}; recovery {}",
        if args.no_journal { "off".to_string() } else { args.db.db.display().to_string() },
        args.captures.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "off".into()),
        if args.recover { "on" } else { "off" }
    );
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::Problem(format!("signal: {e}")))?;
    #[cfg(unix)]
    let terminated = term.recv();
    #[cfg(not(unix))]
    let terminated = std::future::pending::<Option<()>>();
    tokio::select! {
        r = proxy.serve(listener) => r.map_err(|e| Failure::Problem(e.to_string())),
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = terminated => Ok(()),
    }
}
