//! The report's inline style sheet: the page layout, tables, tiles and print rules.
pub(super) const CSS: &str = r#"
:root{--fg:#1d2430;--muted:#5b6472;--line:#d8dde5;--soft:#f3f5f8;--warn:#7a4d00;--warnbg:#fff5dc;--warnline:#eccb7a;--read:#0072b2;--write:#d55e00;--readbg:#dcebf6;--writebg:#fbe6d9;--mixbg:#dcf1ea}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
main{max-width:1180px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:20px;margin:34px 0 8px;padding-top:10px;border-top:2px solid var(--fg)}
h3{font-size:15px;margin:22px 0 8px}
p{margin:6px 0}
a{color:#0b5cad}
.muted,.sub{color:var(--muted)}
nav.toc{margin:10px 0;font-size:13px}
nav.toc a{margin-right:12px;white-space:nowrap}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0 12px}
th,td{padding:3px 7px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
table[data-table=results]{font-size:13px}
th{background:var(--soft);font-weight:600}
td.n,th.n{text-align:right;white-space:nowrap}
td.sub-row{padding-left:22px;color:var(--muted)}
td.name{white-space:nowrap}
.ci{color:var(--muted);font-size:12px;margin-left:3px}
.wide{overflow-x:auto}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:1px 14px;margin:8px 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.cols{display:flex;flex-wrap:wrap;gap:14px 24px;align-items:flex-start;margin-top:8px}
.cols>*{flex:1 1 420px;min-width:0}
.cols>.view{flex:0 1 600px}
section.run>aside.warnings{margin:8px 0}
aside.warnings{background:var(--warnbg);border:1px solid var(--warnline);border-radius:6px;padding:8px 12px;font-size:13px}
aside.warnings.none{background:var(--soft);border-color:var(--line)}
aside.warnings h3{margin:2px 0 6px}
aside.warnings ul{margin:0;padding-left:18px}
aside.warnings li{margin:4px 0}
aside.warnings details{margin:2px 0 0}
aside.warnings details ul{padding-left:14px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);padding:0 2px;border-radius:2px}
.code{font:600 11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
a.badge,span.badge{display:inline-block;white-space:nowrap;font:600 10px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;padding:0 4px;border-radius:3px;background:var(--warnbg);color:var(--warn);border:1px solid var(--warnline);text-decoration:none;margin:1px}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:10px 14px}
@media (max-width:1000px){.grid{grid-template-columns:minmax(0,1fr)}}
figure{margin:0 0 10px;break-inside:avoid;page-break-inside:avoid}
figcaption{font-size:12px;color:var(--muted)}
svg.chart{width:100%;height:auto;display:block}
.cdm{display:grid;gap:6px;margin:8px 0 14px;max-width:640px}
.cdm .hd{font-weight:600;text-align:center;padding:2px}
.cdm .lbl{display:flex;align-items:center;font-weight:600;padding:6px 10px;background:#2f3a4a;color:#fff;border-radius:4px;white-space:pre-line}
.tile{border:1px solid var(--line);border-radius:4px;padding:6px 10px;text-align:right;background:linear-gradient(90deg,var(--tc) var(--fill),#fff var(--fill))}
.tile.read{--tc:var(--readbg)}.tile.write{--tc:var(--writebg)}.tile.mix{--tc:var(--mixbg)}
.tile .big{display:block;font-size:26px;font-weight:600;line-height:1.1}
.tile .cmp{display:flex;justify-content:space-between;gap:8px;align-items:baseline}
.tile .cmp b{font-size:20px}
.tile .cfg{color:var(--muted);font-size:12px;text-align:left;overflow-wrap:anywhere}
.tile .small{font-size:12px;color:var(--muted)}
.tile.empty{background:var(--soft);color:var(--muted);text-align:center}
tr.best td.v{font-weight:700}
.sig{color:#0b5cad;font-weight:700}
.worse{color:#b3261e}
details{margin:8px 0}
summary{cursor:pointer;color:var(--muted)}
table.kv td:first-child{color:var(--muted);white-space:nowrap}
table.kv table.kv{margin:0}
footer{margin-top:30px;color:var(--muted);font-size:12px}
@media print{
 main{max-width:none;padding:0}
 body{font-size:11px}
 section.run,section.comparison{break-before:page}
 .grid{grid-template-columns:minmax(0,1fr)}
 a{color:inherit;text-decoration:none}
 nav.toc{display:none}
 .tile,.cdm .lbl,th{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"#;
