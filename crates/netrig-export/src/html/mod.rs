//! One self-contained HTML file per run or experiment: the command or plan
//! that produced it, both ends' environment, every warning, the tables, the
//! plots as inline SVG and the whole JSON document embedded, with CSS for a
//! light and a dark page and nothing fetched from the network. A person
//! who was not there can judge the run from it alone.

use crate::{Exporter, TableLayout};
use netrig_document::experiment::Experiment;
use netrig_document::result::measure::Environment;
use netrig_document::result::{IntervalResult, TestResult};
use netrig_plot::Plot;
use std::fmt::Write;

pub mod flame;
pub mod lab;
pub mod text;

/// HTML-escapes text.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = r#"
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --warn: #9a6700; --line: #d0d7de; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #8b949e; --warn: #d29922; --line: #30363d; } }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 2em auto; max-width: 88em; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: .2em; margin-top: 2em; }
pre, code { font: 13px/1.35 ui-monospace, monospace; } pre { overflow-x: auto; padding: .8em; border: 1px solid var(--line); border-radius: 6px; }
pre#command { white-space: pre-wrap; overflow-wrap: anywhere; }
.result { font-size: 13px; line-height: 1.35; }
.result p.line { font-family: ui-monospace, monospace; white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; padding-left: 2ch; text-indent: -2ch; }
.result .gap { height: .8em; }
.result .block { margin: .3em 0 .6em; }
table.text { border-collapse: collapse; font-variant-numeric: tabular-nums; max-width: 100%; }
table.text th, table.text td { padding: .1em .55em; vertical-align: top; text-align: left; }
table.text th { font-weight: 600; border-bottom: 1px solid var(--line); vertical-align: bottom; white-space: nowrap; }
table.text td.word { white-space: nowrap; }
table.text td.num { text-align: right; }
table.text tbody tr:nth-child(even) { background: color-mix(in srgb, var(--line) 25%, transparent); }
.muted { color: var(--muted); } .warn { color: var(--warn); }
table.env { border-collapse: collapse; } table.env td, table.env th { border: 1px solid var(--line); padding: .2em .6em; text-align: left; vertical-align: top; white-space: pre-line; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; color: var(--fg); }
figcaption { color: var(--muted); font-size: .9em; }
details summary { cursor: pointer; }
"#;

/// Marks the page once every plot has drawn (a browser test reads it).
const SCRIPT: &str = r#"
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure.plot svg');
  var drawn = 0;
  figs.forEach(function (s) { var b = s.getBoundingClientRect(); if (b.width > 0 && b.height > 0) drawn++; });
  document.body.setAttribute('data-plots', String(figs.length));
  document.body.setAttribute('data-plots-drawn', String(drawn));
  // The result's tables and lines wider than the page (a scroll bar, or
  // columns cut off): their indices, none when everything fits.
  var wide = [];
  document.querySelectorAll('.result table, .result p, .result pre').forEach(function (t, i) {
    var box = t.closest('.result').clientWidth;
    if (t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().width > box + 1) wide.push(i);
  });
  document.body.setAttribute('data-wide', wide.join(' '));
});
"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}{}</style>\n<script>{SCRIPT}</script>\n</head>\n<body>\n{body}\n</body></html>\n",
        esc(title),
        flame::STYLE
    )
}

fn environment(out: &mut String, local: Option<&Environment>, remote: Option<&Environment>) {
    let _ = writeln!(out, "<h2>Environment</h2>\n<table class=\"env\"><tr><th></th><th>local (client)</th><th>remote (agent)</th></tr>");
    let row = |out: &mut String, name: &str, f: &dyn Fn(&Environment) -> String| {
        let cell = |e: Option<&Environment>| e.map_or("-".to_string(), |e| esc(&f(e)));
        let _ = writeln!(
            out,
            "<tr><th>{name}</th><td>{}</td><td>{}</td></tr>",
            cell(local),
            cell(remote)
        );
    };
    row(out, "host", &|e| e.hostname.clone());
    row(out, "kernel", &|e| format!("{} {}", e.kernel, e.kernel_version));
    row(out, "CPU", &|e| {
        format!(
            "{} ({} online, {})",
            e.cpu_model.clone().unwrap_or_default(),
            e.cpus_online,
            e.arch
        )
    });
    row(out, "virtualisation", &|e| {
        e.virtualization.clone().unwrap_or_else(|| "none seen".into())
    });
    row(out, "sysctls", &|e| {
        e.sysctls
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let _ = writeln!(out, "</table>");
}

fn warnings(out: &mut String, w: &[String]) {
    let _ = writeln!(out, "<h2>Warnings</h2>");
    if w.is_empty() {
        let _ = writeln!(out, "<p class=\"muted\">None.</p>");
        return;
    }
    let _ = writeln!(out, "<ul>");
    for (i, x) in w.iter().enumerate() {
        // Each once (the same warning from two places says nothing more).
        if !w[..i].contains(x) {
            let _ = writeln!(out, "<li class=\"warn\">{}</li>", esc(x));
        }
    }
    let _ = writeln!(out, "</ul>");
}

/// A table as printed, as HTML that fits the page (tables and wrapping lines).
fn result(out: &mut String, id: &str, table: &str) {
    let _ = writeln!(
        out,
        "<section class=\"result\" id=\"{id}\">\n{}</section>",
        text::to_html(table)
    );
}

fn plots(out: &mut String, plots: &[Plot]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>Plots</h2>");
    for p in plots {
        let _ = writeln!(
            out,
            "<figure class=\"plot\" id=\"plot-{}\">{}<figcaption>{}</figcaption></figure>",
            esc(&p.name),
            p.svg,
            esc(&p.title)
        );
    }
}

fn json(out: &mut String, v: &impl serde::Serialize) {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    let _ = writeln!(
        out,
        "<h2>The whole result</h2>\n<details><summary>JSON ({} bytes; the same document `--json` prints)</summary>\n<pre id=\"json\">{}</pre></details>",
        text.len(),
        esc(&text)
    );
}

/// The report of one run: `command` is the command line that ran it,
/// `table` the table netrig printed.
pub fn run_report(r: &TestResult, command: &str, table: &str) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<h1>netrig {}: {}</h1>", esc(&r.test), esc(&r.agent.address));
    let _ = writeln!(
        b,
        "<p class=\"muted\">netrig {} · protocol v{} · agent {}</p>\n<pre id=\"command\">{}</pre>",
        esc(&r.netrig_version),
        r.agent.protocol_version,
        esc(&r.agent.software),
        esc(command)
    );
    let _ = writeln!(b, "<h2>Result</h2>");
    result(&mut b, "table", table);
    warnings(&mut b, &r.warnings);
    plots(&mut b, &netrig_plot::plots_for_result(r));
    // Where each end's CPU time went (`--profile`): its flame graph, or why it has none.
    if let Some(p) = &r.profile {
        b.push_str(&flame::section(p));
    }
    environment(
        &mut b,
        r.environment.local.as_ref(),
        r.environment.remote.as_ref(),
    );
    json(&mut b, r);
    page(&format!("netrig {}", r.test), &b)
}

/// The report as an exporter: it keeps each interval's rows as they come
/// and writes the whole page when the result is in.
pub struct HtmlExporter {
    command: String,
    layout: &'static dyn TableLayout,
    rows: String,
    per_flow: bool,
}

impl HtmlExporter {
    /// For a run laid out as `layout` with `flows` flows, made by `command`.
    pub fn new(command: impl Into<String>, layout: &'static dyn TableLayout, flows: usize) -> HtmlExporter {
        HtmlExporter {
            command: command.into(),
            layout,
            rows: String::new(),
            per_flow: (2..=16).contains(&flows),
        }
    }
}

impl Exporter for HtmlExporter {
    fn interval(&mut self, _out: &mut dyn std::io::Write, i: &IntervalResult) -> std::io::Result<()> {
        if self.rows.is_empty() {
            self.rows.push_str(&self.layout.interval_header());
            self.rows.push('\n');
        }
        self.rows.push_str(&self.layout.interval_rows(i, self.per_flow));
        Ok(())
    }

    fn result(&mut self, out: &mut dyn std::io::Write, r: &TestResult) -> std::io::Result<()> {
        let mut table = self.rows.clone();
        if !table.is_empty() {
            table.push('\n');
        }
        table.push_str(&self.layout.render(r));
        if let Some(h) = &r.server_host {
            table.push_str(&crate::table::server_host(h));
        }
        out.write_all(run_report(r, &self.command, &table).as_bytes())
    }
}

/// The report of a suite (`netrig quick --html`): each result's table,
/// warnings and plots, the environment once, every result's JSON.
pub fn suite_report(name: &str, results: &[(TestResult, String)], command: &str) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>netrig {}</h1>\n<pre id=\"command\">{}</pre>",
        esc(name),
        esc(command)
    );
    for (i, (r, table)) in results.iter().enumerate() {
        let _ = writeln!(b, "<h2 id=\"test-{i}\">{}</h2>", esc(&r.test));
        result(&mut b, &format!("table-{i}"), table);
        if !r.warnings.is_empty() {
            let _ = writeln!(b, "<ul>");
            for w in &r.warnings {
                let _ = writeln!(b, "<li class=\"warn\">{}</li>", esc(w));
            }
            let _ = writeln!(b, "</ul>");
        }
        for p in netrig_plot::plots_for_result(r) {
            let _ = writeln!(
                b,
                "<figure class=\"plot\" id=\"plot-{i}-{}\">{}<figcaption>{}</figcaption></figure>",
                esc(&p.name),
                p.svg,
                esc(&p.title)
            );
        }
    }
    let first = results.first().map(|(r, _)| r);
    environment(
        &mut b,
        first.and_then(|r| r.environment.local.as_ref()),
        first.and_then(|r| r.environment.remote.as_ref()),
    );
    let all: Vec<&TestResult> = results.iter().map(|(r, _)| r).collect();
    json(&mut b, &all);
    page(&format!("netrig {name}"), &b)
}

/// The report of an experiment: `command` is the command line or plan that
/// ran it.
pub fn experiment_report(e: &Experiment, command: &str) -> String {
    experiment_page(e, command, None)
}

/// [`experiment_report`] without the JSON document embedded (a long experiment's is megabytes):
/// the report names `source`, the saved document it was made from, instead.
pub fn experiment_report_without_data(e: &Experiment, command: &str, source: &str) -> String {
    experiment_page(e, command, Some(source))
}

fn experiment_page(e: &Experiment, command: &str, source: Option<&str>) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>netrig experiment {}{}</h1>",
        esc(&e.plan.name),
        if e.complete { "" } else { " (incomplete)" }
    );
    if let Some(d) = &e.plan.description {
        let _ = writeln!(b, "<p>{}</p>", esc(d));
    }
    if let Some(a) = &e.answer {
        answer(&mut b, a, e.plan.study.as_ref());
    }
    let _ = writeln!(
        b,
        "<p class=\"muted\">netrig {}</p>\n<pre id=\"command\">{}</pre>",
        esc(&e.netrig_version),
        esc(command)
    );
    if let Ok(plan) = toml::to_string_pretty(&e.plan) {
        let _ = writeln!(
            b,
            "<details><summary>The plan as run</summary><pre>{}</pre></details>",
            esc(&plan)
        );
    }
    // The table without its warnings: they are listed once, below it.
    let mut bare = e.clone();
    bare.warnings.clear();
    bare.stopped = None;
    let _ = writeln!(b, "<h2>Result</h2>");
    result(&mut b, "table", &crate::experiment::render(&bare));
    let mut w = e.warnings.clone();
    if let Some(s) = &e.stopped {
        w.insert(0, format!("stopped early: {s}"));
    }
    warnings(&mut b, &w);
    if let Some(d) = lab::diagram(e) {
        b.push_str(&d);
    }
    plots(&mut b, &netrig_plot::plots_for_experiment(e));
    b.push_str(&crate::experiment::profile::html(&e.tests, esc));
    b.push_str(&flame::arm_differences(&e.tests));
    let first = e
        .tests
        .iter()
        .flat_map(|t| &t.points)
        .flat_map(|p| &p.arms)
        .flat_map(|a| &a.runs)
        .next()
        .or_else(|| {
            e.groups
                .iter()
                .flat_map(|g| &g.arms)
                .flat_map(|a| &a.runs)
                .flat_map(|r| &r.members)
                .find_map(|m| m.result.as_ref())
        });
    environment(
        &mut b,
        first.and_then(|r| r.environment.local.as_ref()),
        first.and_then(|r| r.environment.remote.as_ref()),
    );
    if !e.commands.is_empty() {
        let _ = writeln!(b, "<h2>Set-up and tear-down</h2>\n<pre>");
        for c in &e.commands {
            let _ = writeln!(
                b,
                "{} {:<8} {} → {} ({:.2} s)",
                esc(&c.arm),
                esc(&c.phase),
                esc(&c.command),
                c.status.map_or("killed".into(), |s| s.to_string()),
                c.seconds
            );
        }
        let _ = writeln!(b, "</pre>");
    }
    match source {
        None => json(&mut b, e),
        Some(f) => {
            let _ = writeln!(
                b,
                "<h2>The whole result</h2>\n<p>Not embedded here: the saved document <code>{}</code> holds it (<code>netrig report</code> without <code>--no-data</code> embeds it).</p>",
                esc(f)
            );
        }
    }
    page(&format!("netrig experiment {}", e.plan.name), &b)
}

/// A study's answer: the question, the answer in words, each finding with its verdict.
fn answer(
    b: &mut String,
    a: &netrig_document::experiment::study::Answer,
    s: Option<&netrig_document::plan::study::StudyPlan>,
) {
    let _ = writeln!(b, "<section id=\"answer\"><h2>The question</h2>");
    let _ = writeln!(
        b,
        "<p class=\"question\"><strong>{}</strong></p>",
        esc(&a.question)
    );
    if let Some(s) = s {
        let _ = writeln!(
            b,
            "<p class=\"muted\">Study {}: {} (the full form takes about {} min).</p>",
            esc(&a.study),
            if a.quick {
                "the quick form, fewer points and runs: the shape of the answer, not its figures"
            } else {
                "the full form"
            },
            s.full_minutes
        );
    }
    let _ = writeln!(b, "<h2>The answer</h2>");
    for line in &a.summary {
        let _ = writeln!(b, "<p>{}</p>", esc(line));
    }
    if !a.findings.is_empty() {
        let _ = writeln!(
            b,
            "<table class=\"findings\"><tr><th>Finding</th><th>Verdict</th><th>What was measured</th></tr>"
        );
        for f in &a.findings {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td class=\"verdict\">{}</td><td>{}</td></tr>",
                esc(&f.topic),
                esc(&f.verdict),
                esc(&f.text)
            );
        }
        let _ = writeln!(b, "</table>");
    }
    let _ = writeln!(b, "</section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> TestResult {
        let path = format!(
            "{}/../netrig-report/tests/fixtures/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_run_report_holds_everything_and_fetches_nothing() {
        let r = fixture("tcp-stream");
        let html = run_report(&r, "netrig tcp-stream -l 2 <x>", "TABLE & more");
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(
            html.contains("netrig tcp-stream -l 2 &lt;x&gt;"),
            "the command, escaped"
        );
        assert!(html.contains("TABLE &amp; more"));
        assert!(
            html.contains("<h2>Environment</h2>")
                && html.contains(&esc(&r.environment.local.as_ref().unwrap().kernel_version))
        );
        // The numbers of the JSON are in it, as the JSON.
        let n = serde_json::to_string(&r.summary.throughput_bps).unwrap();
        assert!(html.contains(&esc(&format!("\"throughput_bps\": {n}"))));
        for w in &r.warnings {
            assert!(html.contains(&esc(w)));
        }
        for banned in ["href=\"http", "src=", "<link", "url(http", "@import"] {
            assert!(!html.contains(banned), "fetches {banned}");
        }
    }

    /// A study's answer opens the report: the question, the answer's sentences, each finding with
    /// its verdict, and whether it was the quick form.
    #[test]
    fn a_study_s_answer_opens_the_report() {
        let mut e = netrig_document::fixtures::experiment(
            "tcp-stream",
            "-m",
            &["32", "2920"],
            &["a", "b"],
            |_, _, _, _| {},
        );
        e.plan.study = Some(netrig_document::plan::study::StudyPlan {
            kind: "ipqos".into(),
            question: "What does the policy cost per packet?".into(),
            full_minutes: 40.0,
            quick: Default::default(),
            ran_quick: true,
        });
        e.answer = Some(netrig_document::experiment::study::Answer {
            study: "ipqos".into(),
            question: "What does the policy cost per packet?".into(),
            summary: vec!["The rule raised service demand by +12.0 % ± 3.0 % at 32 bytes & more.".into()],
            findings: vec![netrig_document::experiment::study::Finding {
                topic: "b at -m 32".into(),
                text: "sd_local +12.0 % ± 3.0 %".into(),
                verdict: "holds".into(),
                figures: Default::default(),
            }],
            quick: true,
        });
        let html = experiment_report(&e, "netrig run plans/ipqos.toml --quick");
        let q = html
            .find("What does the policy cost per packet?")
            .expect("the question");
        assert!(
            q < html.find("<h2>Result</h2>").unwrap(),
            "the answer comes before the table"
        );
        assert!(html.contains("at 32 bytes &amp; more."));
        assert!(html.contains("<td>b at -m 32</td><td class=\"verdict\">holds</td>"));
        assert!(html.contains("the quick form"));
        assert!(html.contains("about 40 min"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
