//! The SVG bar charts of a session section.

use super::esc;
use super::session::Attempt;
use std::fmt::Write as _;

/// The chart's geometry: the canvas, the plot area and the value at the top of the scale.
struct Frame {
    w: f64,
    hgt: f64,
    left: f64,
    right: f64,
    top: f64,
    plot_w: f64,
    plot_h: f64,
    max: f64,
}

impl Frame {
    /// The y coordinate of a value.
    fn y(&self, v: f64) -> f64 {
        self.top + self.plot_h - v / self.max * self.plot_h
    }
}

/// A grouped bar chart (one group per attempt, one bar per series) with a limit line.
pub(super) fn chart(
    title: &str,
    groups: &[Vec<Option<u64>>],
    series: &[&str],
    limit: Option<(&str, u64)>,
    limits: &[Option<u64>],
    attempts: &[Attempt],
    fmt: fn(u64) -> String,
) -> String {
    let (w, hgt, left, right, top, bottom) = (460.0f64, 220.0f64, 64.0f64, 12.0f64, 28.0f64, 40.0f64);
    let vmax = groups.iter().flatten().flatten().copied().max().unwrap_or(1).max(1);
    let lmax = limits.iter().flatten().copied().max().unwrap_or(0);
    // A limit far above every bar (a 200k-token window over a 5k-token request) would flatten the
    // bars: it is then named at the top instead of drawn.
    let limit_on_scale = lmax <= vmax.saturating_mul(3);
    let max = if limit_on_scale { vmax.max(lmax) } else { vmax } as f64 * 1.1;
    let f = Frame { w, hgt, left, right, top, plot_w: w - left - right, plot_h: hgt - top - bottom, max };
    let mut s = String::new();
    let _ = write!(
        s,
        "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {hgt}\" width=\"{w}\" height=\"{hgt}\" role=\"img\" aria-label=\"{}\"><text x=\"{left}\" y=\"16\" class=\"t\">{}</text>",
        esc(title),
        esc(title)
    );
    scale(&mut s, &f, fmt);
    let gw = f.plot_w / groups.len().max(1) as f64;
    bars(&mut s, &f, gw, groups, series, attempts, fmt);
    limit_line(&mut s, &f, gw, limits, limit, limit_on_scale, fmt);
    legend(&mut s, &f, series);
    s.push_str("</svg></figure>");
    s
}

/// The horizontal grid lines with their values.
fn scale(s: &mut String, f: &Frame, fmt: fn(u64) -> String) {
    for k in 0..=4 {
        let v = f.max / 1.1 * f64::from(k) / 4.0;
        let yy = f.y(v);
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/><text x=\"{}\" y=\"{:.1}\" class=\"ax\" text-anchor=\"end\">{}</text>",
            f.left,
            f.w - f.right,
            f.left - 4.0,
            yy + 4.0,
            esc(&fmt(v as u64))
        );
    }
}

/// One group of bars per attempt (`gw` wide), labelled with the attempt and its verdict.
fn bars(
    s: &mut String,
    f: &Frame,
    gw: f64,
    groups: &[Vec<Option<u64>>],
    series: &[&str],
    attempts: &[Attempt],
    fmt: fn(u64) -> String,
) {
    let (left, top, plot_h) = (f.left, f.top, f.plot_h);
    let bw = (gw * 0.7 / series.len().max(1) as f64).min(48.0);
    for (g, vals) in groups.iter().enumerate() {
        let x0 = left + gw * g as f64 + (gw - bw * series.len() as f64) / 2.0;
        let a = &attempts[g];
        for (k, v) in vals.iter().enumerate() {
            let Some(v) = v else { continue };
            let yy = f.y(*v as f64);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{yy:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" class=\"bar s{k} {}\"><title>attempt {}: {} {}</title></rect>",
                x0 + bw * k as f64,
                (top + plot_h - yy).max(0.5),
                if a.accepted { "acc" } else { "rej" },
                a.attempt,
                esc(series[k]),
                esc(&fmt(*v))
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"ax\" text-anchor=\"middle\">#{} {}</text>",
            left + gw * (g as f64 + 0.5),
            top + plot_h + 16.0,
            a.attempt,
            if a.accepted { "✓" } else { "✗" }
        );
    }
}

/// The limit in force at each attempt as a step line with its name, or only its name at the top
/// when it is off the scale.
fn limit_line(
    s: &mut String,
    f: &Frame,
    gw: f64,
    limits: &[Option<u64>],
    limit: Option<(&str, u64)>,
    limit_on_scale: bool,
    fmt: fn(u64) -> String,
) {
    let left = f.left;
    let mut path = String::new();
    for (g, l) in limits.iter().enumerate() {
        if let Some(l) = l {
            let yy = f.y(*l as f64);
            let (x1, x2) = (left + gw * g as f64, left + gw * (g as f64 + 1.0));
            let _ =
                write!(path, "{}{x1:.1},{yy:.1} L{x2:.1},{yy:.1} ", if path.is_empty() { "M" } else { "L" });
        }
    }
    if !path.is_empty() && limit_on_scale {
        let _ = write!(s, "<path d=\"{}\" class=\"limit\"/>", path.trim_end());
    }
    if let (Some((name, v)), false) = (limit, limit_on_scale) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"16\" class=\"lim\" text-anchor=\"end\">{} {} (above the scale)</text>",
            f.w - f.right,
            esc(name),
            esc(&fmt(v))
        );
    } else if let Some((name, v)) = limit {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"lim\" text-anchor=\"end\">{} {}</text>",
            f.w - f.right,
            f.y(v as f64) - 4.0,
            esc(name),
            esc(&fmt(v))
        );
    }
}

/// One swatch per series along the bottom.
fn legend(s: &mut String, f: &Frame, series: &[&str]) {
    let mut lx = f.left;
    for (k, name) in series.iter().enumerate() {
        let _ = write!(
            s,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" class=\"bar s{k} acc\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"ax\">{}</text>",
            f.hgt - 14.0,
            lx + 14.0,
            f.hgt - 5.0,
            esc(name)
        );
        lx += 90.0;
    }
}
