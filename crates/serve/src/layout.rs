//! The frame of every page: one inline style sheet, the navigation bar, and the HTML
//! report's own documents with that bar put in. Nothing is loaded from elsewhere.

use iolab_report::html::esc;

const CSS: &str = r#"
:root{--fg:#1d2430;--muted:#5b6472;--line:#d8dde5;--soft:#f3f5f8}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:var(--fg);background:#fff}
main{max-width:1180px;margin:0 auto;padding:12px 24px 40px}
h1{font-size:22px;margin:8px 0 8px}
h2{font-size:18px;margin:24px 0 8px}
a{color:#0b5cad}
.muted{color:var(--muted)}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0 12px}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.n,th.n{text-align:right;white-space:nowrap}
td.nw{white-space:nowrap}
form.filters{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:end;background:var(--soft);padding:8px 10px;border-radius:6px;margin:8px 0}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
input,select,button{font:inherit;padding:2px 6px}
.pager{margin:8px 0;display:flex;gap:14px;align-items:center}
.better{color:#0b5cad;font-weight:700}.worse{color:#b3261e;font-weight:700}
.error{background:#fdecea;border:1px solid #e6a09a;border-radius:6px;padding:8px 12px}
figure{margin:6px 0 12px;max-width:760px}
svg.chart{width:100%;height:auto;display:block}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:var(--soft);padding:0 2px}
"#;

/// The navigation bar (styled inline: it also goes into the report's documents, whose
/// style sheet is the report's).
pub fn nav() -> String {
    let link = |href: &str, text: &str| {
        format!(
            "<a href=\"{href}\" style=\"margin-right:16px;color:#fff;font-weight:600\">{text}</a>"
        )
    };
    format!(
        "<nav class=\"site\" style=\"background:#2f3a4a;padding:8px 24px;font:14px system-ui,sans-serif\">\
         <span style=\"color:#c9d2de;margin-right:22px\">iolab serve</span>{}{}{}{}</nav>\n",
        link("/runs", "Runs"),
        link("/compare", "Compare"),
        link("/history", "History"),
        link("/studies", "Studies"),
    )
}

/// A whole page of the browser: `title` (plain text) and `body` (HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · iolab</title>\n<style>{CSS}</style>\n</head>\n<body>\n{}<main>\n{body}\n</main>\n\
         </body>\n</html>\n",
        esc(title),
        nav()
    )
}

/// A page that only says something: `title` (plain) and `html` (trusted markup).
pub fn message_page(title: &str, html: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1>\n<p class=\"error\">{html}</p>", esc(title)),
    )
}

/// An HTML report (`iolab_report::html::render`) with the navigation bar and `extra`
/// (trusted markup: the page's own links) at its top.
pub fn with_nav(report: String, extra: &str) -> String {
    match report.find("<body>\n") {
        Some(i) => {
            let at = i + "<body>\n".len();
            let mut out = String::with_capacity(report.len() + 600);
            out.push_str(&report[..at]);
            out.push_str(&nav());
            out.push_str(extra);
            out.push_str(&report[at..]);
            out
        }
        None => report,
    }
}
