//! The report's inline style sheet and script.

pub(super) const CSS: &str = r#"
:root{--fg:#1d2330;--muted:#5b6578;--line:#d8dde6;--ok:#17803d;--bad:#c0262d;--warn:#a45c00;--bg:#fff;--alt:#f5f7fa}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:16px 24px;background:#14213d;color:#fff}header h1{margin:0 0 4px;font-size:20px}header .summary{margin:0}
header .ok{color:#7ee2a0}header .bad{color:#ff9a9e}header button{font:inherit;padding:2px 10px}
main{padding:8px 24px 48px}h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse}table.corpus{width:100%}table.corpus th,table.corpus td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
table.corpus th{background:var(--alt);cursor:pointer;user-select:none}table.corpus tr.fail{background:#fff3f3}table.corpus td:first-child,table.corpus td:last-child{white-space:nowrap}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td ul{margin:2px 0;padding-left:18px}.bad{color:var(--bad)}.ok{color:var(--ok)}
.outcome{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;background:#e8ecf2}.o-recovered,.o-no_failure{background:#dcf5e3;color:var(--ok)}
.o-exhausted,.o-failed_fast,.o-unreadable{background:#fde2e2;color:var(--bad)}.o-not_recoverable,.o-incomplete{background:#fff0d6;color:var(--warn)}
section.session{border-top:2px solid var(--line);margin-top:24px}.meta{color:var(--muted);margin:0 0 8px}
.charts{display:flex;flex-wrap:wrap;gap:16px}figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px}
svg .t{font-size:13px;font-weight:600;fill:var(--fg)}svg .ax{font-size:10px;fill:var(--muted)}svg .grid{stroke:#eceff4}
svg .bar.s0.acc{fill:#2f6fdb}svg .bar.s1.acc{fill:#86a9f0}svg .bar.s0.rej{fill:#d9534f}svg .bar.s1.rej{fill:#efa09d}
svg .limit{fill:none;stroke:#222;stroke-width:1.5;stroke-dasharray:5 4}svg .lim{font-size:11px;fill:#222}
ol.timeline{list-style:none;padding:0;margin:12px 0;border-left:3px solid #2f6fdb}
li.ev{padding:3px 8px 3px 12px;margin:0;position:relative}li.ev:before{content:"";position:absolute;left:-7px;top:9px;width:9px;height:9px;border-radius:50%;background:#2f6fdb}
li.ev .seq{display:inline-block;min-width:2.5em;color:var(--muted);text-align:right;font-variant-numeric:tabular-nums}li.ev .kind{font-family:ui-monospace,monospace;font-size:12px;background:var(--alt);padding:0 4px;border-radius:3px}
li.abandoned{margin-left:28px;border-left:3px dashed #b0b8c6;opacity:.75}li.abandoned:before{background:#b0b8c6}.branch{color:var(--warn);font-size:12px}
li.k-rewind:before{background:var(--warn)}.rewind{color:var(--warn);margin-left:3em}
body.hide-abandoned li.abandoned{display:none}
details.diff{margin:4px 0 4px 3em}details summary{cursor:pointer;color:var(--muted)}table.diff td{padding:1px 6px;border-bottom:1px solid #f0f2f5;font-size:13px}
tr.dropped{background:#fdecec}tr.stubbed{background:#fff6e0}tr.added{background:#e9f8ee}td.sign{font-weight:700;width:1.5em}td.preview{color:#333;max-width:60em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details.marker{margin:4px 0 4px 1em}details.marker pre{max-height:24em;overflow:auto;background:var(--alt);padding:8px;white-space:pre-wrap;word-break:break-word;font-size:12px}
"#;

pub(super) const JS: &str = r#"
(function(){
  "use strict";
  var expand = document.getElementById("expand");
  if (expand) expand.addEventListener("click", function(){
    var all = document.querySelectorAll("details");
    var open = expand.textContent === "expand all";
    for (var i = 0; i < all.length; i++) all[i].open = open;
    expand.textContent = open ? "collapse all" : "expand all";
  });
  var ab = document.getElementById("show-abandoned");
  if (ab) ab.addEventListener("change", function(){
    document.body.classList.toggle("hide-abandoned", !ab.checked);
  });
  var table = document.getElementById("corpus");
  if (table) {
    var heads = table.tHead.rows[0].cells;
    for (var c = 0; c < heads.length; c++) (function(col){
      heads[col].addEventListener("click", function(){
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = heads[col].getAttribute("data-sort") !== "asc";
        rows.sort(function(a, b){
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          return (asc ? 1 : -1) * x.localeCompare(y, undefined, {numeric: true});
        });
        for (var i = 0; i < rows.length; i++) body.appendChild(rows[i]);
        heads[col].setAttribute("data-sort", asc ? "asc" : "desc");
      });
    })(c);
  }
  document.body.setAttribute("data-ready", "1");
})();
"#;
