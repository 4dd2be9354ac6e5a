//! The HTML audit report in a real headless Chromium (`/usr/bin/chromium`, the Debian package;
//! `.ci/run` installs it): the page renders with no script error, no console error and no blocked
//! fetch, its DOM holds the expected rows, charts, diffs, markers and branches, and its screenshot
//! (saved as `target/report-screenshot.png`) is not blank.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{root, salvage};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const CHROMIUM: &str = "/usr/bin/chromium";

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Records every script error, failed resource load, CSP violation and `console.error` call as
/// an attribute on `<html>`, where `--dump-dom` shows it.
const PROBE: &str = r#"<script>
(function(){
  var root = document.documentElement;
  function note(what){ root.setAttribute("data-page-errors", (root.getAttribute("data-page-errors") || "") + "|" + what); }
  window.addEventListener("error", function(e){ note("error: " + (e.message || (e.target && (e.target.src || e.target.href)) || "resource")); }, true);
  window.addEventListener("unhandledrejection", function(e){ note("rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function(e){ note("csp: " + e.blockedURI); });
  var ce = console.error; console.error = function(){ note("console: " + Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); };
  var cw = console.warn; console.warn = function(){ note("console.warn: " + Array.prototype.join.call(arguments, " ")); return cw.apply(console, arguments); };
})();
</script>"#;

fn chromium(profile: &Path, extra: &[&str], page: &Path) -> Output {
    Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run chromium")
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn the_report_renders_in_chromium_without_errors_and_is_not_blank() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install the Debian package `chromium` (.ci/run does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    // Captures with rewrites and archived markers, one that is not recoverable, one unreadable.
    let picks =
        ["cap-only-tightens", "rung3-keep-four", "verbatim-recall-result", "auth-401", "images-in-history"];
    for p in picks {
        std::fs::copy(root().join(format!("testdata/corpus/{p}.json")), corpus.join(format!("{p}.json")))
            .unwrap();
    }
    std::fs::write(corpus.join("zz-broken.json"), "{\"format\": \"salvage.capture/1\", <not json").unwrap();
    let html = dir.path().join("replay.html");
    let o = salvage(dir.path(), &["replay", "corpus", "--html", html.to_str().unwrap(), "--jobs", "2"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the unreadable file fails the run: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A rewind to show a branch, then the session report.
    let session = ok(&salvage(dir.path(), &["journal", "sessions", "--title", "", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&session).unwrap();
    let id = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"].as_str().unwrap().starts_with("rung3-keep-four"))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&salvage(dir.path(), &["journal", "checkpoint", &id, "--name", "end"]));
    ok(&salvage(dir.path(), &["journal", "rewind", &id, "--to", "3"]));
    let report = dir.path().join("session.html");
    ok(&salvage(dir.path(), &["report", &id, "cap-only", "-o", report.to_str().unwrap()]).clone());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("http://") || !page.contains("src=\"http"), "no external assets");
    assert!(!page.contains("<link") && !page.contains(" src="), "everything is inline");

    let profile = dir.path().join("profile");
    let started = Instant::now();
    for (file, rows, sessions) in [(&html, picks.len() + 1, picks.len()), (&report, 2, 2)] {
        let text = std::fs::read_to_string(file).unwrap();
        let probed = dir.path().join(format!("probed-{}", file.file_name().unwrap().to_string_lossy()));
        std::fs::write(&probed, text.replacen("<head>", &format!("<head>{PROBE}"), 1)).unwrap();
        let o = chromium(&profile, &["--dump-dom"], &probed);
        let dom = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success() && dom.contains("</html>"),
            "chromium failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!dom.contains("data-page-errors=\""), "the page reported errors: {}", {
            let i = dom.find("data-page-errors=\"").unwrap();
            &dom[i..(i + 400).min(dom.len())]
        });
        assert!(dom.contains("data-ready=\"1\""), "the page's script ran to its end");
        assert_eq!(count(&dom, "<tr class=\"capture "), rows, "one corpus row per capture");
        assert_eq!(count(&dom, "<section class=\"session\""), sessions, "one section per journaled session");
        assert!(count(&dom, "<svg") >= 2 * sessions, "two charts per session");
        assert!(dom.contains("class=\"limit\""), "a cap or window line");
        assert!(dom.contains("<tr class=\"dropped\">"), "a rewrite shown as a diff");
        assert!(dom.contains("<details class=\"marker\">"), "markers expand to their archived content");
    }
    let dom = String::from_utf8_lossy(&chromium(&profile, &["--dump-dom"], &report).stdout).to_string();
    assert!(
        dom.contains("abandoned branch") && dom.contains("class=\"rewind\""),
        "the rewind shows as a branch"
    );
    let html_dom = String::from_utf8_lossy(&chromium(&profile, &["--dump-dom"], &html).stdout).to_string();
    assert!(html_dom.contains("data-outcome=\"unreadable\""), "the unreadable file is a failed row");

    // The screenshot is not blank: many distinct colours and real variance in luminance.
    let shot = root().join("target/report-screenshot.png");
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&shot);
    let o =
        chromium(&profile, &[&format!("--screenshot={}", shot.display()), "--window-size=1280,1600"], &html);
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&o.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    assert!(px >= 3, "RGB(A) screenshot");
    let (w, h) = (info.width as usize, info.height as usize);
    assert!(w >= 1000 && h >= 1000, "{w}x{h}");
    let mut lum: Vec<f64> = Vec::with_capacity(w * h);
    let mut colours = std::collections::HashSet::new();
    for p in buf[..info.buffer_size()].chunks(px) {
        lum.push(0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]));
        colours.insert((p[0] >> 3, p[1] >> 3, p[2] >> 3));
    }
    let mean = lum.iter().sum::<f64>() / lum.len() as f64;
    let var = lum.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / lum.len() as f64;
    assert!(var > 200.0, "luminance variance {var:.1}: the page looks blank");
    assert!(colours.len() > 20, "{} colours: the page looks blank", colours.len());
    let took = started.elapsed();
    let note = format!(
        "browser test: 5 Chromium runs (2 probed DOM dumps, 2 DOM checks, 1 screenshot) in {:.1} s; screenshot {} ({w}x{h}, luminance variance {var:.0}, {} colours)\n",
        took.as_secs_f64(),
        shot.display(),
        colours.len()
    );
    eprint!("{note}");
    std::fs::write(root().join("target/report-browser-test.txt"), note).unwrap();
}
