//! A mesh's document as a person reads it: a text table ([`table`]), CSV ([`csv`]) and a
//! self-contained HTML page with the heat map ([`html`]).
//!
//! The matrix: rows are the client hosts, columns the server hosts. Each cell shows the
//! throughput (3 significant digits, in Gbit/s or Mbit/s), or for request/response kinds (any
//! cell with `transactions_per_s`) the median latency in µs. The diagonal is `—`, a pair not
//! tested `·`, a test that failed `×` (its error listed below the matrix). A pair tested more
//! than once (`--pairs` naming it twice) shows its last test that ran. A second matrix shows
//! retransmits when any test had some.

use crate::matrix::{MeshCell, MeshDocument, Pattern};
use std::fmt::Write as _;

/// What the matrix shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Payload bits/s.
    Throughput,
    /// Request/response kinds: the median round trip, µs.
    LatencyP50,
}

impl Figure {
    /// Latency when any cell has transactions per second (a request/response kind), else
    /// throughput.
    pub fn of(doc: &MeshDocument) -> Figure {
        if doc.cells.iter().any(|c| c.transactions_per_s.is_some()) {
            Figure::LatencyP50
        } else {
            Figure::Throughput
        }
    }

    pub fn value(self, cell: &MeshCell) -> Option<f64> {
        let v = match self {
            Figure::Throughput => cell.throughput_bps,
            Figure::LatencyP50 => cell.latency_p50_us,
        }?;
        v.is_finite().then_some(v)
    }

    /// 3 significant digits and the unit: `9.41 Gbit/s`, `512 Mbit/s`, `48.2 µs`.
    pub fn format(self, v: f64) -> String {
        match self {
            Figure::Throughput if v.abs() >= 1e9 => format!("{} Gbit/s", sig3(v / 1e9)),
            Figure::Throughput => format!("{} Mbit/s", sig3(v / 1e6)),
            Figure::LatencyP50 => format!("{} µs", sig3(v)),
        }
    }

    /// The exact figure, for a hover title or CSV.
    pub fn exact(self, v: f64) -> String {
        match self {
            Figure::Throughput => format!("{v} bit/s"),
            Figure::LatencyP50 => format!("{v} µs"),
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Figure::Throughput => "throughput (payload bits/s over each test's measured window)",
            Figure::LatencyP50 => "median latency (p50 round trip over each test's measured window)",
        }
    }

    /// Whether a higher figure is the better one.
    pub fn higher_is_better(self) -> bool {
        self == Figure::Throughput
    }
}

/// `v` with 3 significant digits (no exponent): 9.41, 94.1, 941, 9410, 0.00941.
pub fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let s = format!("{v:.decimals$}");
    // Rounding may carry into another digit (9.996 → 10.00): one decimal fewer then.
    let rounded: f64 = s.parse().unwrap_or(v);
    if decimals > 0 && rounded.abs().log10().floor() as i32 > magnitude {
        format!("{v:.prec$}", prec = decimals - 1)
    } else {
        s
    }
}

/// The hosts' names as the matrix heads them: the label (an agent's `--name`) or the name,
/// without the domain all of them share (`agent-0.agents.netrig.svc.cluster.local` →
/// `agent-0`), at most 24 characters.
pub fn short_names(doc: &MeshDocument) -> Vec<String> {
    let full: Vec<&str> = doc
        .hosts
        .iter()
        .map(|h| h.label.as_deref().unwrap_or(&h.name))
        .collect();
    // The longest `.suffix` all names share (labels are the agents' own, taken as they are),
    // when stripping it leaves each a name of its own.
    let unlabelled: Vec<&str> = doc
        .hosts
        .iter()
        .filter(|h| h.label.is_none())
        .map(|h| h.name.as_str())
        .collect();
    let mut suffix: Option<&str> = None;
    if unlabelled.len() > 1 {
        let first = unlabelled[0];
        for (i, _) in first.match_indices('.') {
            let s = &first[i..];
            let all = unlabelled.iter().all(|n| n.len() > s.len() && n.ends_with(s));
            // Not an IPv4 address's last octets.
            if all && s.chars().any(|c| c.is_ascii_alphabetic()) {
                suffix = Some(s);
                break;
            }
        }
    }
    let mut short: Vec<String> = full
        .iter()
        .zip(&doc.hosts)
        .map(|(n, h)| {
            let n = match suffix {
                Some(s) if h.label.is_none() => &n[..n.len() - s.len()],
                _ => n,
            };
            if n.chars().count() > 24 {
                let head: String = n.chars().take(23).collect();
                format!("{head}…")
            } else {
                n.to_string()
            }
        })
        .collect();
    // Names that came out the same are told apart by their index.
    let dup: Vec<bool> = short
        .iter()
        .map(|s| short.iter().filter(|t| *t == s).count() > 1)
        .collect();
    for (i, s) in short.iter_mut().enumerate() {
        if dup[i] {
            *s = format!("{s} #{i}");
        }
    }
    short
}

/// The cell shown for each ordered pair: `grid[client * n + server]`, an index into
/// `doc.cells` (the last test of the pair that ran, else its last test).
struct Grid {
    n: usize,
    at: Vec<Option<usize>>,
    /// Pairs with more than one test.
    repeated: usize,
    /// Cells naming a host the document does not have.
    stray: usize,
}

impl Grid {
    fn of(doc: &MeshDocument) -> Grid {
        let n = doc.hosts.len();
        let mut at: Vec<Option<usize>> = vec![None; n * n];
        let mut count = vec![0u32; n * n];
        let mut stray = 0;
        for (i, c) in doc.cells.iter().enumerate() {
            if c.client >= n || c.server >= n {
                stray += 1;
                continue;
            }
            let k = c.client * n + c.server;
            count[k] += 1;
            let replace = match at[k] {
                None => true,
                Some(prev) => c.error.is_none() || doc.cells[prev].error.is_some(),
            };
            if replace {
                at[k] = Some(i);
            }
        }
        Grid {
            n,
            at,
            repeated: count.iter().filter(|&&c| c > 1).count(),
            stray,
        }
    }

    fn get<'d>(&self, doc: &'d MeshDocument, client: usize, server: usize) -> Option<&'d MeshCell> {
        self.at[client * self.n + server].map(|i| &doc.cells[i])
    }
}

fn pattern_words(doc: &MeshDocument) -> String {
    let p = match doc.pattern {
        Pattern::Full => "full mesh",
        Pattern::Pairs => "pairs",
        Pattern::Star => "star",
    };
    match doc.concurrency {
        Some(c) => format!("{p}, at most {c} at once"),
        None => p.to_string(),
    }
}

/// A figure and its cell.
type Extreme<'d> = (f64, &'d MeshCell);

/// The lowest and highest figure among the cells that ran, and their cells.
fn extremes(doc: &MeshDocument, fig: Figure) -> Option<(Extreme<'_>, Extreme<'_>)> {
    let mut vals = doc
        .cells
        .iter()
        .filter(|c| c.error.is_none())
        .filter_map(|c| fig.value(c).map(|v| (v, c)));
    let first = vals.next()?;
    Some(vals.fold((first, first), |(lo, hi), x| {
        (if x.0 < lo.0 { x } else { lo }, if x.0 > hi.0 { x } else { hi })
    }))
}

fn host_name(names: &[String], i: usize) -> &str {
    names.get(i).map_or("?", String::as_str)
}

/// Lays out rows of cells in columns, the first `left` left-aligned, the others right-aligned.
fn columns(rows: &[Vec<String>], left: usize) -> String {
    let width = |s: &str| s.chars().count();
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncol)
        .map(|j| {
            rows.iter()
                .filter_map(|r| r.get(j))
                .map(|s| width(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (j, s) in r.iter().enumerate() {
            let pad = widths[j] - width(s);
            if j > 0 {
                line.push_str("  ");
            }
            if j < left {
                line.push_str(s);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(s);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One matrix as text: `show(cell)` for a cell that ran.
fn matrix_text(
    doc: &MeshDocument,
    grid: &Grid,
    names: &[String],
    show: impl Fn(&MeshCell) -> String,
) -> String {
    let mut rows = vec![std::iter::once("client \\ server".to_string())
        .chain(names.iter().cloned())
        .collect::<Vec<_>>()];
    for (i, name) in names.iter().enumerate() {
        let mut row = vec![name.clone()];
        for j in 0..names.len() {
            row.push(if i == j {
                "—".into()
            } else {
                match grid.get(doc, i, j) {
                    None => "·".into(),
                    Some(c) if c.error.is_some() => "×".into(),
                    Some(c) => show(c),
                }
            });
        }
        rows.push(row);
    }
    columns(&rows, 1)
}

fn any_retransmits(doc: &MeshDocument) -> bool {
    doc.cells.iter().any(|c| c.retransmits.is_some_and(|r| r > 0))
}

/// How many of a round's tests failed.
fn failed_in(doc: &MeshDocument, round: &crate::matrix::MeshRound) -> usize {
    round
        .cells
        .iter()
        .filter(|&&i| doc.cells.get(i).is_some_and(|c| c.error.is_some()))
        .count()
}

/// The matrix as a text table, then the retransmits' matrix (when any test had some), the
/// errors, the hosts (full names and addresses), a line per round with its skew, and a summary.
pub fn table(doc: &MeshDocument) -> String {
    let fig = Figure::of(doc);
    let names = short_names(doc);
    let grid = Grid::of(doc);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}, {}, {} hosts: {} (rows: client, columns: server)",
        doc.test_line(),
        pattern_words(doc),
        doc.hosts.len(),
        fig.title()
    );
    out.push_str(&matrix_text(doc, &grid, &names, |c| {
        fig.value(c).map_or("?".into(), |v| fig.format(v))
    }));
    if any_retransmits(doc) {
        out.push_str("\nretransmits (segments)\n");
        out.push_str(&matrix_text(doc, &grid, &names, |c| {
            c.retransmits.map_or("?".into(), |r| r.to_string())
        }));
    }
    let failed: Vec<&MeshCell> = doc.cells.iter().filter(|c| c.error.is_some()).collect();
    if !failed.is_empty() {
        out.push_str("\nfailed\n");
        for c in &failed {
            let _ = writeln!(
                out,
                "× {} → {} (round {}): {}",
                host_name(&names, c.client),
                host_name(&names, c.server),
                c.round + 1,
                c.error.as_deref().unwrap_or("")
            );
        }
    }
    out.push_str("\nhosts\n");
    let host_rows: Vec<Vec<String>> = doc
        .hosts
        .iter()
        .zip(&names)
        .map(|(h, short)| {
            let mut full = h.name.clone();
            if let Some(l) = &h.label {
                full = format!("{l} ({full})");
            }
            vec![short.clone(), full, h.address.clone()]
        })
        .collect();
    out.push_str(&columns(&host_rows, 3));
    out.push_str("\nrounds\n");
    for r in &doc.rounds {
        let tests = r.cells.len();
        let skew = r.skew_ms.map_or("—".to_string(), |s| format!("{} ms", sig3(s)));
        let failed = failed_in(doc, r);
        let _ = writeln!(
            out,
            "round {}: {tests} test{}{}, start skew {skew}",
            r.index + 1,
            if tests == 1 { "" } else { "s" },
            if failed > 0 {
                format!(" ({failed} failed)")
            } else {
                String::new()
            }
        );
    }
    for w in &doc.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if grid.repeated > 0 {
        let _ = writeln!(
            out,
            "note: {} pairs were tested more than once; the matrix shows each one's last",
            grid.repeated
        );
    }
    if grid.stray > 0 {
        let _ = writeln!(
            out,
            "note: {} tests name a host the document does not list",
            grid.stray
        );
    }
    out.push('\n');
    out.push_str(&summary(doc, fig, &names));
    out.push('\n');
    out
}

fn summary(doc: &MeshDocument, fig: Figure, names: &[String]) -> String {
    let failed = doc.cells.iter().filter(|c| c.error.is_some()).count();
    let mut s = format!(
        "{} test{}{} in {} round{}, {} s",
        doc.cells.len(),
        if doc.cells.len() == 1 { "" } else { "s" },
        if failed > 0 {
            format!(" ({failed} failed)")
        } else {
            String::new()
        },
        doc.rounds.len(),
        if doc.rounds.len() == 1 { "" } else { "s" },
        sig3(doc.wall_s)
    );
    if let Some(((lo, lc), (hi, hc))) = extremes(doc, fig) {
        let pair = |c: &MeshCell| format!("{} → {}", host_name(names, c.client), host_name(names, c.server));
        let _ = write!(
            s,
            "; lowest {} ({}), highest {} ({})",
            fig.format(lo),
            pair(lc),
            fig.format(hi),
            pair(hc)
        );
    }
    s
}

/// One row per test: the test, the hosts, the round, every figure, the warnings and the error.
pub fn csv(doc: &MeshDocument) -> String {
    csv_of(std::slice::from_ref(doc))
}

/// The rows of several meshes (a plan's tests) under one header.
pub fn csv_of(docs: &[MeshDocument]) -> String {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record([
        "test",
        "client",
        "server",
        "client_address",
        "server_address",
        "client_label",
        "server_label",
        "round",
        "throughput_bps",
        "transactions_per_s",
        "latency_p50_us",
        "latency_p99_us",
        "retransmits",
        "start_offset_ms",
        "clock_offset_ms",
        "clock_bound_ms",
        "warnings",
        "error",
    ])
    .expect("writing to memory");
    // Names, labels, warnings and errors come from the command line, DNS and the agents: each
    // passes the spreadsheet guard (netrig_document::cell).
    let text = |s: &str| netrig_document::cell::text(s).into_owned();
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for doc in docs {
        csv_rows(&mut w, doc, &text, &opt);
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("the CSV of strings is UTF-8")
}

fn csv_rows(
    w: &mut ::csv::Writer<Vec<u8>>,
    doc: &MeshDocument,
    text: &dyn Fn(&str) -> String,
    opt: &dyn Fn(Option<f64>) -> String,
) {
    let host = |i: usize| doc.hosts.get(i);
    let test = text(&doc.test_line());
    for c in &doc.cells {
        let (cl, sv) = (host(c.client), host(c.server));
        w.write_record([
            test.clone(),
            cl.map_or_else(|| c.client.to_string(), |h| text(&h.name)),
            sv.map_or_else(|| c.server.to_string(), |h| text(&h.name)),
            cl.map_or(String::new(), |h| text(&h.address)),
            sv.map_or(String::new(), |h| text(&h.address)),
            cl.and_then(|h| h.label.as_deref()).map(text).unwrap_or_default(),
            sv.and_then(|h| h.label.as_deref()).map(text).unwrap_or_default(),
            c.round.to_string(),
            opt(c.throughput_bps),
            opt(c.transactions_per_s),
            opt(c.latency_p50_us),
            opt(c.latency_p99_us),
            c.retransmits.map_or(String::new(), |r| r.to_string()),
            opt(c.start_offset_ms),
            opt(c.clock_offset_ms),
            opt(c.clock_bound_ms),
            text(&c.warnings.join("; ")),
            c.error.as_deref().map(text).unwrap_or_default(),
        ])
        .expect("writing to memory");
    }
}

/// `s` safe in HTML text and in a quoted attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Viridis at 9 stops, a sequential scale that reads in grey and to the colour-blind.
const VIRIDIS: [(u8, u8, u8); 9] = [
    (68, 1, 84),
    (71, 44, 122),
    (59, 81, 139),
    (44, 113, 142),
    (33, 144, 141),
    (39, 173, 129),
    (92, 200, 99),
    (170, 220, 50),
    (253, 231, 37),
];

/// The colour of `t` in 0..=1 on the scale, and whether text on it should be dark.
pub fn colour(t: f64) -> (String, bool) {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let (r, g, bl) = (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2));
    let luminance = 0.2126 * f64::from(r) + 0.7152 * f64::from(g) + 0.0722 * f64::from(bl);
    (format!("#{r:02x}{g:02x}{bl:02x}"), luminance > 140.0)
}

/// The colour of value `v` between `lo` and `hi`, better figures brighter.
fn scaled(v: f64, lo: f64, hi: f64, higher_is_better: bool) -> (String, bool) {
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
    colour(if higher_is_better { t } else { 1.0 - t })
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:.35em .6em;text-align:right;font-variant-numeric:tabular-nums}\
th{background:#f4f4f4}th.row{text-align:left}\
td.diag,td.none{color:#999;text-align:center}td.fail{background:#fff;color:#c00;text-align:center;font-weight:bold}\
.legend{display:flex;align-items:center;gap:.5em;margin:.5em 0}\
.bar{width:16em;height:1em;border:1px solid #ccc}\
code{background:#f4f4f4;padding:0 .2em}";

/// A matrix as an HTML table, coloured by `value` between its lowest and highest.
fn matrix_html(
    doc: &MeshDocument,
    grid: &Grid,
    names: &[String],
    value: &dyn Fn(&MeshCell) -> Option<f64>,
    show: &dyn Fn(f64) -> String,
    exact: &dyn Fn(f64) -> String,
    higher_is_better: bool,
) -> (String, Option<(f64, f64)>) {
    let vals: Vec<f64> = doc
        .cells
        .iter()
        .filter(|c| c.error.is_none())
        .filter_map(value)
        .collect();
    let range = vals.iter().copied().fold(None, |acc: Option<(f64, f64)>, v| {
        Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    });
    let mut h = String::from("<table class=\"matrix\">\n<tr><th class=\"row\">client \\ server</th>");
    for (j, name) in names.iter().enumerate() {
        let _ = write!(
            h,
            "<th title=\"{}\">{}</th>",
            escape(&doc.hosts[j].address),
            escape(name)
        );
    }
    h.push_str("</tr>\n");
    for (i, name) in names.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><th class=\"row\" title=\"{}\">{}</th>",
            escape(&doc.hosts[i].address),
            escape(name)
        );
        for (j, server) in names.iter().enumerate() {
            let pair = format!("{name} → {server}");
            if i == j {
                h.push_str("<td class=\"diag\">—</td>");
                continue;
            }
            match grid.get(doc, i, j) {
                None => {
                    let _ = write!(
                        h,
                        "<td class=\"none\" title=\"{} not tested\">·</td>",
                        escape(&pair)
                    );
                }
                Some(c) if c.error.is_some() => {
                    let _ = write!(
                        h,
                        "<td class=\"fail\" title=\"{} (round {}) failed: {}\">×</td>",
                        escape(&pair),
                        c.round + 1,
                        escape(c.error.as_deref().unwrap_or(""))
                    );
                }
                Some(c) => match (value(c), range) {
                    (Some(v), Some((lo, hi))) => {
                        let (bg, dark) = scaled(v, lo, hi, higher_is_better);
                        let _ = write!(
                            h,
                            "<td style=\"background:{bg};color:{}\" title=\"{} (round {}): {}\">{}</td>",
                            if dark { "#111" } else { "#fff" },
                            escape(&pair),
                            c.round + 1,
                            escape(&exact(v)),
                            escape(&show(v))
                        );
                    }
                    _ => {
                        let _ = write!(
                            h,
                            "<td class=\"none\" title=\"{}: no figure\">?</td>",
                            escape(&pair)
                        );
                    }
                },
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    (h, range)
}

fn legend(range: Option<(f64, f64)>, show: &dyn Fn(f64) -> String, higher_is_better: bool) -> String {
    let Some((lo, hi)) = range else {
        return String::new();
    };
    let stops: Vec<String> = (0..=8).map(|k| colour(f64::from(k) / 8.0).0).collect();
    let (left, right) = if higher_is_better { (lo, hi) } else { (hi, lo) };
    format!(
        "<div class=\"legend\"><span>{}</span><div class=\"bar\" style=\"background:linear-gradient(to right,{})\"></div><span>{}</span><span>(brighter is better)</span></div>\n",
        escape(&show(left)),
        stops.join(","),
        escape(&show(right))
    )
}

/// A self-contained page (no external links, fonts or scripts): the heat map with its legend
/// and hover titles, the retransmits' matrix, the rounds and their skews, the errors and the
/// hosts. Every string from the document is escaped (host names come from DNS).
pub fn html(doc: &MeshDocument) -> String {
    page(&title(doc), &section(doc))
}

/// A plan's page: a section per test (its mesh), each as [`html`] draws one, under the plan's
/// name.
pub fn html_of(name: Option<&str>, docs: &[MeshDocument]) -> String {
    let mut body = String::new();
    for d in docs {
        let _ = writeln!(body, "<section>\n<h2>{}</h2>", escape(&title(d)));
        // The section's own headings one level down (escaped text holds no tag).
        body.push_str(&section(d).replace("<h2>", "<h3>").replace("</h2>", "</h3>"));
        body.push_str("</section>\n");
    }
    let title = format!(
        "netrig mesh plan{}: {} tests",
        name.map_or(String::new(), |n| format!(" {n}")),
        docs.len()
    );
    page(&title, &body)
}

fn title(doc: &MeshDocument) -> String {
    format!(
        "netrig mesh: {}, {}, {} hosts",
        doc.test_line(),
        pattern_words(doc),
        doc.hosts.len()
    )
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n{body}</body>\n</html>\n",
        escape(title),
        escape(title)
    )
}

/// One mesh's part of a page: all but the page's head and title.
fn section(doc: &MeshDocument) -> String {
    let fig = Figure::of(doc);
    let names = short_names(doc);
    let grid = Grid::of(doc);
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<p>netrig {}; each test {} s; {}.</p>",
        escape(&doc.netrig_version),
        sig3(doc.length_s),
        escape(&summary(doc, fig, &names))
    );
    let _ = writeln!(
        h,
        "<h2>{} (rows: client, columns: server)</h2>",
        escape(fig.title())
    );
    let show = move |v: f64| fig.format(v);
    let exact = move |v: f64| fig.exact(v);
    let (m, range) = matrix_html(
        doc,
        &grid,
        &names,
        &|c| fig.value(c),
        &show,
        &exact,
        fig.higher_is_better(),
    );
    h.push_str(&legend(range, &show, fig.higher_is_better()));
    h.push_str(&m);
    if any_retransmits(doc) {
        h.push_str("<h2>retransmits (segments)</h2>\n");
        let count = |v: f64| format!("{v}");
        let (m, range) = matrix_html(
            doc,
            &grid,
            &names,
            &|c| c.retransmits.map(|r| r as f64),
            &count,
            &count,
            false,
        );
        h.push_str(&legend(range, &count, false));
        h.push_str(&m);
    }
    let failed: Vec<&MeshCell> = doc.cells.iter().filter(|c| c.error.is_some()).collect();
    if !failed.is_empty() {
        h.push_str("<h2>failed</h2>\n<ul>\n");
        for c in failed {
            let _ = writeln!(
                h,
                "<li>{} → {} (round {}): {}</li>",
                escape(host_name(&names, c.client)),
                escape(host_name(&names, c.server)),
                c.round + 1,
                escape(c.error.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</ul>\n");
    }
    h.push_str(
        "<h2>rounds</h2>\n<table>\n<tr><th>round</th><th>tests</th><th>failed</th><th>start skew</th></tr>\n",
    );
    for r in &doc.rounds {
        let failed = failed_in(doc, r);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{failed}</td><td>{}</td></tr>",
            r.index + 1,
            r.cells.len(),
            r.skew_ms.map_or("—".into(), |s| format!("{} ms", sig3(s)))
        );
    }
    h.push_str("</table>\n<h2>hosts</h2>\n<table>\n<tr><th class=\"row\">host</th><th class=\"row\">name</th><th class=\"row\">label</th><th class=\"row\">address</th></tr>\n");
    for (host, short) in doc.hosts.iter().zip(&names) {
        let _ = writeln!(
            h,
            "<tr><th class=\"row\">{}</th><td style=\"text-align:left\">{}</td><td style=\"text-align:left\">{}</td><td style=\"text-align:left\"><code>{}</code></td></tr>",
            escape(short),
            escape(&host.name),
            escape(host.label.as_deref().unwrap_or("")),
            escape(&host.address)
        );
    }
    h.push_str("</table>\n");
    if !doc.warnings.is_empty() {
        h.push_str("<h2>warnings</h2>\n<ul>\n");
        for w in &doc.warnings {
            let _ = writeln!(h, "<li>{}</li>", escape(w));
        }
        h.push_str("</ul>\n");
    }
    h
}

#[cfg(test)]
mod tests;
