//! `salvage proxy` overhead: added latency (p50, p99) and throughput against a direct connection to
//! the same loopback upstream, for 10 KB, 100 KB and 1 MB requests, JSON and streamed answers; and
//! the peak memory of 32 concurrent long streams (in a child process, so other workloads' peaks
//! do not count). The proxy journals every turn into a temporary database, as it does live.

use crate::harness::try_interleave;
use crate::{Plan, Row};
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Rig {
    _rt_up: tokio::runtime::Runtime,
    _rt_proxy: tokio::runtime::Runtime,
    upstream: SocketAddr,
    proxy: SocketAddr,
    /// A bare TCP byte pump to the same upstream on the proxy's runtime (see [`byte_pump`]).
    pump: SocketAddr,
    handle: Proxy,
    _dir: tempfile::TempDir,
}

fn rig(journaling: bool) -> anyhow::Result<Rig> {
    let rt_up = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let up = rt_up.block_on(loopback::start(usize::MAX, None))?;
    let rt_proxy = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let dir = tempfile::tempdir()?;
    let journal = salvage_journal::Journal::open(&dir.path().join("proxy.db"), &Default::default())?;
    let writer = Writer::start(
        journal,
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )?;
    let options = Options::new(format!("http://{}", up.addr).parse()?);
    let proxy =
        Proxy::new(options, journaling.then_some(writer), Box::new(|_| {})).map_err(anyhow::Error::msg)?;
    let listener = rt_proxy.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
    let addr = listener.local_addr()?;
    let served = proxy.clone();
    rt_proxy.spawn(async move { served.serve(listener).await });
    let pump = rt_proxy.block_on(byte_pump(up.addr))?;
    Ok(Rig {
        _rt_up: rt_up,
        _rt_proxy: rt_proxy,
        upstream: up.addr,
        proxy: addr,
        pump,
        handle: proxy,
        _dir: dir,
    })
}

/// The least work any relay between a client and `upstream` can do, started on the current
/// runtime: each accepted connection gets its own upstream connection and the bytes are copied
/// both ways through 64 KB buffers (`tokio::io::copy_bidirectional_with_sizes`: the default 8 KB
/// would cost the pump more reads than the proxy makes), with no HTTP parsed, no header touched and nothing
/// recorded. Its throughput against a direct connection is the ceiling of every HTTP proxy on
/// this machine, `salvage proxy` included: the information row that says how much of the relay's
/// cost is the extra hop itself.
async fn byte_pump(upstream: SocketAddr) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else { return };
                let _ = (client.set_nodelay(true), up.set_nodelay(true));
                // The pump ends when either side closes; how it ended is the client's to see.
                let _ =
                    tokio::io::copy_bidirectional_with_sizes(&mut client, &mut up, 64 << 10, 64 << 10).await;
            });
        }
    });
    Ok(addr)
}

/// An Anthropic Messages body of about `size` bytes.
fn body(size: usize, stream: bool) -> Vec<u8> {
    let text = "lorem ipsum dolor sit amet ".repeat(size / 27 + 1);
    let per = size / 10;
    let messages: Vec<serde_json::Value> = (0..10)
        .map(|i| {
            serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": &text[..per.min(text.len())]})
        })
        .chain(std::iter::once(serde_json::json!({"role": "user", "content": "go on"})))
        .collect();
    serde_json::to_vec(&serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "bench", "stream": stream, "messages": messages}))
        .unwrap_or_default()
}

fn connect(addr: SocketAddr) -> anyhow::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    Ok(BufReader::new(s))
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One exchange that must succeed: a status other than 200 fails the measurement, so an error
/// answered fast is never timed as a fast answer.
fn post(conn: &mut BufReader<TcpStream>, body: &[u8]) -> anyhow::Result<()> {
    let (status, answer) = loopback::exchange(conn, "/v1/messages", &[], body)?;
    anyhow::ensure!(status == 200, "HTTP {status}: {}", String::from_utf8_lossy(&answer));
    Ok(())
}

/// One request size and answer kind.
struct Case {
    label: &'static str,
    kind: &'static str,
    body: Vec<u8>,
    /// Requests per client connection in a throughput burst.
    per: usize,
}

impl Case {
    fn new(label: &'static str, size: usize, stream: bool) -> Case {
        let per = if size >= 1_000_000 {
            8
        } else if size >= 100_000 {
            40
        } else {
            150
        };
        Case { label, kind: if stream { "streamed" } else { "JSON" }, body: body(size, stream), per }
    }

    /// 4 client connections sending back to back.
    fn burst(&self, addr: SocketAddr) -> anyhow::Result<()> {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = self.body.clone();
                let per = self.per;
                std::thread::spawn(move || -> anyhow::Result<()> {
                    let mut c = connect(addr)?;
                    for _ in 0..per {
                        post(&mut c, &b)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        }
        Ok(())
    }

    /// Requests in one burst and the megabytes they send.
    fn sent(&self) -> (f64, f64) {
        let n = 4 * self.per;
        (n as f64, (n * self.body.len()) as f64 / 1e6)
    }
}

/// Runs the proxy workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let relay = rig(false)?;
    let rig = rig(true)?;
    let mut rows = Vec::new();
    let n_lat = if plan.scale < 1.0 { 60 } else { 200 };
    for (label, size) in [("10 KB", 10_000usize), ("100 KB", 100_000), ("1 MB", 1_000_000)] {
        for stream in [false, true] {
            let case = Case::new(label, size, stream);
            let n = if size >= 1_000_000 { n_lat / 4 } else { n_lat };
            rows.push(latency(&rig, &case, n)?);
            rows.push(relay_throughput(&relay, plan, &case)?);
            rows.push(pump_throughput(&relay, plan, &case)?);
            rows.push(journaled_throughput(&rig, plan, &case)?);
        }
    }
    rig.handle.flush();
    rows.push(memory().unwrap_or_else(|e| {
        Row::failed(
            "proxy peak memory, 32 concurrent streams (100 KB request, ~1.1 MB answer each)",
            "bytes streamed through",
            "<= 2x",
            &e,
        )
    }));
    Ok(rows)
}

/// Added latency: one request at a time on kept-alive connections, alternating direct and through
/// the journaling proxy, the journal caught up before each pair (as between the turns of a client
/// waiting on a model), so neither side runs beside the writer's backlog.
fn latency(rig: &Rig, case: &Case, n: usize) -> anyhow::Result<Row> {
    let mut direct = connect(rig.upstream)?;
    let mut via = connect(rig.proxy)?;
    let (mut a, mut p) = (Vec::new(), Vec::new());
    for i in 0..n + 5 {
        rig.handle.flush();
        let t = Instant::now();
        post(&mut direct, &case.body)?;
        let d = t.elapsed();
        let t = Instant::now();
        post(&mut via, &case.body)?;
        let q = t.elapsed();
        if i >= 5 {
            a.push(d);
            p.push(q);
        }
    }
    let (a50, p50) = (pct(&mut a, 0.5), pct(&mut p, 0.5));
    let (a99, p99) = (pct(&mut a, 0.99), pct(&mut p, 0.99));
    let added = ms(p50) - ms(a50);
    Ok(Row {
        workload: format!("proxy added latency, {} request, {} answer", case.label, case.kind),
        baseline: "direct connection".into(),
        ratio: ms(p50) / ms(a50).max(1e-9),
        target: "+<= 1 ms p50".into(),
        met: added <= 1.0,
        detail: format!(
            "p50 {:.3} ms vs {:.3} ms (+{added:.3} ms), p99 {:.3} ms vs {:.3} ms (+{:.3} ms)",
            ms(p50),
            ms(a50),
            ms(p99),
            ms(a99),
            ms(p99) - ms(a99)
        ),
    })
}

/// The CPU time the whole process has used (clients, upstream, proxy and writer alike; threads
/// that have ended included), from `/proc/self/stat` in ticks of 10 ms (`USER_HZ` is 100).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let fields: Vec<u64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // After the command name come the state (field 3), …, utime (14) and stime (15).
    let ticks = fields.get(11).copied().unwrap_or(0).saturating_add(fields.get(12).copied().unwrap_or(0));
    Duration::from_millis(ticks.saturating_mul(10))
}

/// Runs `f`, adding the process CPU time it took to `cpu`.
fn on_cpu(cpu: &std::cell::Cell<Duration>, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let before = process_cpu();
    let r = f();
    cpu.set(cpu.get() + process_cpu().saturating_sub(before));
    r
}

/// Bursts sent to `via` against the same bursts sent directly, interleaved: the timing pair and
/// the CPU time per request of each side (the whole process: on two cores, throughput is bounded
/// by two cores over the CPU a request takes), in ms as (via, direct).
fn against_direct(
    relay: &Rig,
    plan: &Plan,
    case: &Case,
    via: SocketAddr,
) -> anyhow::Result<(crate::harness::Pair, f64, f64)> {
    let (cpu_direct, cpu_via) = (std::cell::Cell::default(), std::cell::Cell::default());
    let rounds = plan.rounds.clamp(3, 5);
    let pair = try_interleave(
        rounds,
        || on_cpu(&cpu_direct, || case.burst(relay.upstream)),
        || on_cpu(&cpu_via, || case.burst(via)),
    )?;
    // The warm-up pair counts too: rounds + 1 bursts of n requests on each side.
    let per_request = |cpu: Duration| ms(cpu) / (case.sent().0 * (rounds + 1) as f64);
    Ok((pair, per_request(cpu_via.get()), per_request(cpu_direct.get())))
}

/// Throughput through the proxy relaying only, against the same bursts sent directly.
fn relay_throughput(relay: &Rig, plan: &Plan, case: &Case) -> anyhow::Result<Row> {
    let (pair, cpu_proxy, cpu_direct) = against_direct(relay, plan, case, relay.proxy)?;
    let (n, mb) = case.sent();
    Ok(Row::at_least(
        &format!(
            "proxy throughput, {} requests, {} answer, 4 connections, relay only",
            case.label, case.kind
        ),
        "direct connection",
        pair.speed_ratio(),
        0.9,
        format!(
            "{:.0} vs {:.0} req/s ({:.0} vs {:.0} MB/s sent); CPU per request {cpu_proxy:.2} vs {cpu_direct:.2} ms",
            n / pair.ours.as_secs_f64(),
            n / pair.baseline.as_secs_f64(),
            mb / pair.ours.as_secs_f64(),
            mb / pair.baseline.as_secs_f64(),
        ),
    ))
}

/// The bare byte pump's throughput against the same bursts sent directly (information: the
/// ceiling of any relay here, see [`byte_pump`]).
fn pump_throughput(relay: &Rig, plan: &Plan, case: &Case) -> anyhow::Result<Row> {
    let (pair, cpu_pump, cpu_direct) = against_direct(relay, plan, case, relay.pump)?;
    let n = case.sent().0;
    Ok(Row::info(
        &format!(
            "bare TCP byte pump (no HTTP: the floor of any relay), {} requests, {} answer, 4 connections",
            case.label, case.kind
        ),
        "direct connection",
        pair.speed_ratio(),
        format!(
            "{:.0} vs {:.0} req/s; CPU per request {cpu_pump:.2} vs {cpu_direct:.2} ms",
            n / pair.ours.as_secs_f64(),
            n / pair.baseline.as_secs_f64(),
        ),
    ))
}

/// Sustained throughput with the journal: a burst counts as done when every turn of it is
/// journaled (the writer must keep up; its bounded queue holds clients back when full), against
/// the same burst sent directly. What the clients saw (the queue taking part of the burst) is in
/// the detail. The journal catches up before each direct burst, so its backlog never slows one.
fn journaled_throughput(rig: &Rig, plan: &Plan, case: &Case) -> anyhow::Result<Row> {
    let (mut a, mut b, mut written) = (Vec::new(), Vec::new(), Vec::new());
    let (cpu_direct, cpu_proxy) = (std::cell::Cell::default(), std::cell::Cell::default());
    let rounds = plan.rounds.clamp(3, 5);
    for round in 0..=rounds {
        rig.handle.flush();
        let t = Instant::now();
        on_cpu(&cpu_direct, || case.burst(rig.upstream))?;
        let d = t.elapsed();
        let t = Instant::now();
        let mut q = Duration::ZERO;
        on_cpu(&cpu_proxy, || {
            case.burst(rig.proxy)?;
            q = t.elapsed();
            rig.handle.flush();
            Ok(())
        })?;
        let w = t.elapsed();
        if round > 0 {
            a.push(d);
            b.push(q);
            written.push(w);
        }
    }
    let (direct, answered, journaled) = (median(a), median(b), median(written));
    let (n, mb) = case.sent();
    let per_request = |cpu: Duration| ms(cpu) / (n * (rounds + 1) as f64);
    Ok(Row::at_least(
        &format!("proxy throughput, {} requests, {} answer, 4 connections, journaling", case.label, case.kind),
        "direct connection",
        direct.as_secs_f64() / journaled.as_secs_f64().max(1e-12),
        0.9,
        format!(
            "{:.0} turns/s journaled vs {:.0} req/s direct ({:.0} vs {:.0} MB/s); clients answered at {:.0} req/s; CPU per request {:.2} vs {:.2} ms",
            n / journaled.as_secs_f64(),
            n / direct.as_secs_f64(),
            mb / journaled.as_secs_f64(),
            mb / direct.as_secs_f64(),
            n / answered.as_secs_f64(),
            per_request(cpu_proxy.get()),
            per_request(cpu_direct.get())
        ),
    ))
}

fn memory() -> anyhow::Result<Row> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe).arg("--child-proxy-memory").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "the proxy memory child exited with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).map_err(|e| anyhow::anyhow!("{e}: {text}"))?;
    let grew = v["grew_mb"].as_f64().unwrap_or(f64::NAN);
    let streamed = v["streamed_mb"].as_f64().unwrap_or(f64::NAN);
    Ok(Row {
        workload: "proxy peak memory, 32 concurrent streams (100 KB request, ~1.1 MB answer each)".into(),
        baseline: "bytes streamed through".into(),
        ratio: grew / streamed.max(1e-9),
        // Each stream holds its request, the answer's text as rebuilt for the journal and a frame:
        // about twice its answer at most, never the raw stream on top.
        target: "<= 2x".into(),
        met: grew <= streamed * 2.0,
        detail: format!(
            "peak RSS +{grew:.1} MB while {streamed:.0} MB streamed; {:.2} s",
            v["seconds"].as_f64().unwrap_or(0.0)
        ),
    })
}

fn rss_kb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse::<f64>().ok()))
        })
        .unwrap_or(0.0)
}

/// The child of the memory workload: 32 concurrent long streams through the proxy; prints JSON.
pub fn child_memory() -> anyhow::Result<()> {
    let rig = rig(true)?;
    let b = body(100_000, true);
    // Warm up the pools and the allocator with one stream.
    let mut c = connect(rig.proxy)?;
    let (status, _) = loopback::exchange(&mut c, "/v1/messages", &[("x-test-stream-bytes", "1000000")], &b)?;
    anyhow::ensure!(status == 200, "the warm-up stream answered HTTP {status}");
    rig.handle.flush();
    let before = rss_kb("VmRSS:");
    let t = Instant::now();
    let handles: Vec<_> = (0..32)
        .map(|_| {
            let b = b.clone();
            let addr = rig.proxy;
            std::thread::spawn(move || -> anyhow::Result<usize> {
                // A reader that does not buffer the whole answer: count it as it comes.
                let mut c = connect(addr)?;
                let mut n = 0usize;
                let status = loopback::exchange_into(
                    &mut c,
                    "/v1/messages",
                    &[("x-test-stream-bytes", "1000000")],
                    &b,
                    &mut |x| n += x.len(),
                )?;
                anyhow::ensure!(status == 200, "a stream answered HTTP {status}");
                Ok(n)
            })
        })
        .collect();
    let mut total = 0usize;
    for h in handles {
        total += h.join().map_err(|_| anyhow::anyhow!("client thread"))??;
    }
    rig.handle.flush();
    let peak = rss_kb("VmHWM:");
    let grew = ((peak - before) / 1024.0).max(0.0);
    println!(
        "{}",
        serde_json::json!({"grew_mb": grew, "streamed_mb": total as f64 / 1e6, "seconds": t.elapsed().as_secs_f64()})
    );
    Ok(())
}
