//! netrig's text output (a run's or an experiment's table, as printed) as
//! HTML that fits the page: each run of aligned lines becomes an HTML
//! table whose cells may wrap, every other line a paragraph that wraps.
//! The columns are where the text has them (a gap of spaces in every line
//! of the run), so the HTML shows what the terminal shows, column for
//! column, whatever the table's kind.

use super::esc;
use std::fmt::Write;

/// A line is part of a table when it has a gap of two or more spaces
/// between words (aligned columns); prose has single spaces.
fn aligned(line: &[char]) -> bool {
    let s: String = line.iter().collect();
    let t = s.trim();
    t.contains("  ")
}

/// The columns' starts of `lines` (char indices): where every line has a
/// space (or has ended) just before, and some line starts a word after two
/// or more spaces (or at the margin). A space inside a cell ("97.11
/// ±1.2%", "+3.1% [+1.0, +5.2] better") is never a start: no line has a
/// wide gap there.
pub fn columns(lines: &[Vec<char>]) -> Vec<usize> {
    let width = lines.iter().map(Vec::len).max().unwrap_or(0);
    let at = |l: &Vec<char>, i: usize| l.get(i).copied().unwrap_or(' ');
    let mut starts = Vec::new();
    for p in 0..width {
        let clear = p == 0 || lines.iter().all(|l| at(l, p - 1) == ' ');
        let opens = lines
            .iter()
            .any(|l| at(l, p) != ' ' && (p < 2 || (at(l, p - 1) == ' ' && at(l, p - 2) == ' ')));
        if clear && opens {
            starts.push(p);
        }
    }
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts
}

/// `line` cut at `starts`, each cell trimmed.
fn cells(line: &[char], starts: &[usize]) -> Vec<String> {
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let e = starts.get(i + 1).copied().unwrap_or(usize::MAX).min(line.len());
            if s >= line.len() {
                String::new()
            } else {
                line[s..e].iter().collect::<String>().trim().to_string()
            }
        })
        .collect()
}

/// A cell that reads as a figure (right-aligned): digits, sign, point,
/// "±x%", "%", "inf", "-".
fn numeric(c: &str) -> bool {
    !c.is_empty()
        && c.chars().any(|ch| ch.is_ascii_digit())
        && c.chars()
            .all(|ch| ch.is_ascii_digit() || " .,+-−±%e".contains(ch))
}

/// A row of figures, not a header: most of its cells hold a digit.
fn data_row(cells: &[String]) -> bool {
    let filled: Vec<&String> = cells.iter().filter(|c| !c.is_empty()).collect();
    let digits = filled
        .iter()
        .filter(|c| c.chars().any(|ch| ch.is_ascii_digit()))
        .count();
    !filled.is_empty() && digits * 2 > filled.len()
}

fn table(out: &mut String, lines: &[Vec<char>]) {
    let starts = columns(lines);
    let rows: Vec<Vec<String>> = lines.iter().map(|l| cells(l, &starts)).collect();
    // A column empty in every line (an indent) is no column.
    let keep: Vec<usize> = (0..starts.len())
        .filter(|&c| rows.iter().any(|r| !r[c].is_empty()))
        .collect();
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| keep.iter().map(|&c| r[c].clone()).collect())
        .collect();
    // Header lines: those before the first row of figures (none when the
    // first line is figures), stacked into one header cell per column.
    let head = rows.iter().position(|r| data_row(r)).unwrap_or(0);
    let _ = writeln!(out, "<div class=\"block\"><table class=\"text\">");
    if head > 0 {
        let _ = write!(out, "<thead><tr>");
        for c in 0..keep.len() {
            let parts: Vec<String> = rows[..head]
                .iter()
                .map(|r| r[c].clone())
                .filter(|p| !p.is_empty())
                .map(|p| esc(&p))
                .collect();
            let _ = write!(out, "<th>{}</th>", parts.join("<br>"));
        }
        let _ = writeln!(out, "</tr></thead>");
    }
    let _ = writeln!(out, "<tbody>");
    for r in &rows[head..] {
        let _ = write!(out, "<tr>");
        for c in r {
            // One word (a size, an arm's name) is never broken; a cell of
            // several ("97.1 ±2.0%") may wrap between them.
            let class = match (numeric(c), c.contains(' ')) {
                (true, false) => " class=\"num word\"",
                (true, true) => " class=\"num\"",
                (false, false) => " class=\"word\"",
                (false, true) => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        let _ = writeln!(out, "</tr>");
    }
    let _ = writeln!(out, "</tbody></table></div>");
}

/// `text` (netrig's table as printed) as HTML: runs of two or more aligned
/// lines as tables, other lines as paragraphs that wrap (their leading
/// spaces kept), a blank line as a gap.
pub fn to_html(text: &str) -> String {
    let mut out = String::new();
    let lines: Vec<Vec<char>> = text.lines().map(|l| l.trim_end().chars().collect()).collect();
    let mut i = 0;
    while i < lines.len() {
        // A run of aligned lines; one blank line inside it (netperf's
        // between its header and its rows) is part of it.
        let mut rows: Vec<Vec<char>> = Vec::new();
        let mut j = i;
        loop {
            if j < lines.len() && !lines[j].is_empty() && aligned(&lines[j]) {
                rows.push(lines[j].clone());
                j += 1;
            } else if !rows.is_empty()
                && j + 1 < lines.len()
                && lines[j].is_empty()
                && !lines[j + 1].is_empty()
                && aligned(&lines[j + 1])
            {
                j += 1;
            } else {
                break;
            }
        }
        if rows.len() >= 2 {
            table(&mut out, &rows);
            i = j;
            continue;
        }
        let l: String = lines[i].iter().collect();
        if l.is_empty() {
            let _ = writeln!(out, "<div class=\"gap\"></div>");
        } else {
            let _ = writeln!(out, "<p class=\"line\">{}</p>", esc(&l));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPERIMENT: &str = "netrig experiment \"ipqos\"
arms no-qos, dscp-rule (interleaved round by round); Δ: difference from no-qos with its 99% interval: better or worse when it excludes 0 (significant at 99%), equal when it lies within ±10%, else undetermined

TCP STREAM -s 32K -S 32K -l 0.2
         Recv     Send     Utilization
      -m Size     Size     local          Throughput             Arm          Δ throughput
         bytes    bytes    %              10^6bits/s
      32 65536    65536    100.00 ±0.0%   97.11 ±174.5%          no-qos
      32 65536    65536    100.00 ±0.0%   108.10 ±101.8%         dscp-rule    +11.3% [-28.7, +97.6] undetermined (interval wider than ±10%)
    2920 65536    65536    100.00 ±0.0%   2620.78 ±72.2%         no-qos
    2920 65536    65536    99.00 ±0.0%    2157.69 ±1218.3%       dscp-rule    -1.7% [-3.1, -0.4] worse
";

    /// The experiment's table: a header cell per column (its header lines
    /// stacked), a cell per figure, "mean ±x%" and "Δ [interval] verdict"
    /// each one cell.
    #[test]
    fn an_experiment_table_becomes_a_table_of_its_columns() {
        let html = to_html(EXPERIMENT);
        assert_eq!(html.matches("<table").count(), 1, "{html}");
        assert!(html.contains("<p class=\"line\">TCP STREAM -s 32K -S 32K -l 0.2</p>"));
        assert!(html.contains("<th>Recv<br>Size<br>bytes</th>"), "{html}");
        assert!(html.contains("<th>Δ throughput</th>"), "{html}");
        assert!(html.contains("<td class=\"num\">97.11 ±174.5%</td>"), "{html}");
        assert!(
            html.contains("<td>+11.3% [-28.7, +97.6] undetermined (interval wider than ±10%)</td>"),
            "{html}"
        );
        assert!(html.contains("<td>-1.7% [-3.1, -0.4] worse</td>"), "{html}");
        assert!(html.contains("<td class=\"word\">dscp-rule</td>"));
        let rows = html.matches("<tr>").count();
        assert_eq!(rows, 5, "a header and four rows: {html}");
        // Seven columns (-m, two sizes, CPU, throughput, arm, Δ), every
        // row as many cells as the header.
        assert_eq!(html.matches("<th>").count(), 7, "{html}");
        assert_eq!(html.matches("<td").count(), 4 * 7, "{html}");
    }

    /// netperf's table: its header, a blank line, its rows: one table.
    #[test]
    fn a_header_and_rows_apart_are_one_table() {
        let text = "          Recv     Send
 Flow Dir bytes    bytes    10^6bits/sec

    0 tx  131072   3939840  9288.46
  sum tx                    16789.13
";
        let html = to_html(text);
        assert_eq!(html.matches("<table").count(), 1, "{html}");
        assert!(html.contains("<th>Recv<br>bytes</th>"), "{html}");
        assert!(html.contains("<td class=\"num word\">16789.13</td>"), "{html}");
    }

    /// Prose lines wrap as paragraphs; a single aligned line is prose too.
    #[test]
    fn prose_is_paragraphs() {
        let html = to_html("warning: one & two\n\nlatency (us): mean 3  p50 2\n");
        assert!(html.contains("<p class=\"line\">warning: one &amp; two</p>"));
        assert!(html.contains("<p class=\"line\">latency (us): mean 3  p50 2</p>"));
        assert!(!html.contains("<table"));
    }

    /// A witness block: its long explanation one cell, which wraps.
    #[test]
    fn witness_lines_are_rows() {
        let text = "Witness: the kernel's own counts over the same window (0.30 s)
  local   TCP payload sent             635037268 =       635037268 bytes (tcpi_bytes_acked + SIOCOUTQ per socket); ratio 1.0000  agrees
  remote  TCP payload received         621616321 =       621616321 bytes (tcpi_bytes_received - SIOCINQ per socket); ratio 1.0000  agrees
";
        let html = to_html(text);
        assert!(
            html.contains("<tr><td class=\"word\">local</td><td>TCP payload sent</td>"),
            "{html}"
        );
        assert!(
            html.contains("bytes (tcpi_bytes_acked + SIOCOUTQ per socket); ratio 1.0000  agrees</td>"),
            "{html}"
        );
    }
}
