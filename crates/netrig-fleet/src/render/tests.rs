use super::*;
use crate::matrix::{MeshHost, MeshRound};

fn host(i: usize) -> MeshHost {
    MeshHost {
        name: format!("agent-{i}.agents.netrig.svc.cluster.local"),
        address: format!("10.0.0.{}:6387", i + 1),
        label: None,
    }
}

fn cell(client: usize, server: usize, round: usize) -> MeshCell {
    MeshCell::new(client, server, round)
}

/// A full mesh of 3 hosts, one test a round: 0 → 1 at 9.412 Gbit/s with 3 retransmits,
/// 2 → 0 at 512.3 Mbit/s, 1 → 2 failed.
fn doc() -> MeshDocument {
    let mut c0 = cell(0, 1, 0);
    c0.throughput_bps = Some(9.412e9);
    c0.retransmits = Some(3);
    c0.start_offset_ms = Some(0.4);
    let mut c1 = cell(2, 0, 1);
    c1.throughput_bps = Some(512.3e6);
    c1.retransmits = Some(0);
    c1.warnings = vec!["the witness, \"quoted\"".into()];
    let mut c2 = cell(1, 2, 2);
    c2.error = Some("connect to 10.0.0.3:6387: refused, <b>\"no\"</b> & more".into());
    MeshDocument {
        netrig_version: "0.1.0".into(),
        test: "tcp-stream".into(),
        args: vec!["-l".into(), "10".into()],
        pattern: Pattern::Full,
        concurrency: None,
        length_s: 10.0,
        hosts: (0..3).map(host).collect(),
        rounds: (0..3)
            .map(|i| MeshRound {
                index: i,
                start_unix_s: Some(1.7e9 + 11.0 * i as f64),
                cells: vec![i],
                skew_ms: (i == 0).then_some(1.234),
            })
            .collect(),
        cells: vec![c0, c1, c2],
        wall_s: 33.27,
        warnings: vec![],
    }
}

/// The words of the matrix row headed `name` (cells split on runs of 2+ spaces).
fn row<'t>(table: &'t str, name: &str) -> Vec<&'t str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(name) && !l.contains(':'))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    line.split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[test]
fn sig3_three_significant_digits() {
    assert_eq!(sig3(9.412), "9.41");
    assert_eq!(sig3(94.12), "94.1");
    assert_eq!(sig3(941.2), "941");
    assert_eq!(sig3(9412.0), "9412");
    assert_eq!(sig3(0.009412), "0.00941");
    assert_eq!(sig3(9.996), "10.0");
    assert_eq!(sig3(99.96), "100");
    assert_eq!(sig3(0.0), "0");
    assert_eq!(Figure::Throughput.format(9.412e9), "9.41 Gbit/s");
    assert_eq!(Figure::Throughput.format(512.3e6), "512 Mbit/s");
    assert_eq!(Figure::Throughput.format(1.5e6), "1.50 Mbit/s");
    assert_eq!(Figure::LatencyP50.format(48.23), "48.2 µs");
}

#[test]
fn short_names_drop_the_shared_domain() {
    let d = doc();
    assert_eq!(short_names(&d), ["agent-0", "agent-1", "agent-2"]);
    let mut d2 = doc();
    d2.hosts[1].label = Some("node-b".into());
    // A label is the agent's own name: used as it is; the others' shared domain still goes.
    assert_eq!(short_names(&d2), ["agent-0", "node-b", "agent-2"]);
    d2.hosts[0].name = "a-very-long-name-of-a-host-0.example".into();
    assert_eq!(
        short_names(&d2),
        ["a-very-long-name-of-a-h…", "node-b", "agent-2.agents.netrig.s…"]
    );
    d2.hosts = ["10.0.1.5", "10.0.2.5", "x", "x"]
        .iter()
        .map(|n| MeshHost {
            name: n.to_string(),
            address: format!("{n}:6387"),
            label: None,
        })
        .collect();
    assert_eq!(short_names(&d2), ["10.0.1.5", "10.0.2.5", "x #2", "x #3"]);
}

#[test]
fn table_shows_the_matrix_failures_rounds_and_summary() {
    let t = table(&doc());
    assert!(
        t.starts_with("tcp-stream -l 10, full mesh, 3 hosts: throughput (payload bits/s over each test's measured window) (rows: client, columns: server)\n"),
        "{t}"
    );
    // The first matrix's rows (the retransmits' matrix repeats the heads later).
    let first = &t[..t.find("\nretransmits").expect("a retransmits matrix")];
    assert_eq!(row(first, "agent-0"), ["agent-0", "—", "9.41 Gbit/s", "·"]);
    assert_eq!(row(first, "agent-1"), ["agent-1", "·", "—", "×"]);
    assert_eq!(row(first, "agent-2"), ["agent-2", "512 Mbit/s", "·", "—"]);
    let retrans = &t[t.find("\nretransmits").unwrap()..t.find("\nfailed").unwrap()];
    assert_eq!(row(retrans, "agent-0"), ["agent-0", "—", "3", "·"]);
    assert_eq!(row(retrans, "agent-2"), ["agent-2", "0", "·", "—"]);
    assert!(
        t.contains("× agent-1 → agent-2 (round 3): connect to 10.0.0.3:6387: refused"),
        "{t}"
    );
    assert!(t.contains("round 1: 1 test, start skew 1.23 ms\n"), "{t}");
    assert!(t.contains("round 3: 1 test (1 failed), start skew —\n"), "{t}");
    assert!(
        t.contains("agent-0  agent-0.agents.netrig.svc.cluster.local  10.0.0.1:6387"),
        "{t}"
    );
    assert!(
        t.trim_end().ends_with(
            "3 tests (1 failed) in 3 rounds, 33.3 s; lowest 512 Mbit/s (agent-2 → agent-0), \
             highest 9.41 Gbit/s (agent-0 → agent-1)"
        ),
        "{t}"
    );
    // The columns line up.
    let col = |line: &str, s: &str| line[..line.find(s).unwrap()].chars().count() + s.chars().count();
    let lines: Vec<&str> = first.lines().collect();
    // The right edge of column agent-1 (right-aligned): the head and the 9.41 cell end together.
    assert_eq!(col(lines[1], "agent-1"), col(lines[2], "9.41 Gbit/s"));
}

#[test]
fn table_of_a_request_response_mesh_shows_latency_and_no_retransmits() {
    let mut d = doc();
    d.test = "tcp-rr".into();
    for (c, p50) in d.cells.iter_mut().zip([48.23, 1234.6]) {
        c.throughput_bps = Some(1e6);
        c.transactions_per_s = Some(20_000.0);
        c.latency_p50_us = Some(p50);
        c.retransmits = Some(0);
    }
    let t = table(&d);
    assert!(t.contains("median latency (p50 round trip"), "{t}");
    assert_eq!(row(&t, "agent-0"), ["agent-0", "—", "48.2 µs", "·"]);
    assert_eq!(row(&t, "agent-2"), ["agent-2", "1235 µs", "·", "—"]);
    assert!(!t.contains("retransmits"), "{t}");
    assert!(
        t.contains("lowest 48.2 µs (agent-0 → agent-1), highest 1235 µs (agent-2 → agent-0)"),
        "{t}"
    );
}

#[test]
fn a_pair_tested_twice_shows_its_last_that_ran() {
    let mut d = doc();
    d.pattern = Pattern::Pairs;
    let mut again = cell(0, 1, 3);
    again.throughput_bps = Some(2e9);
    let mut failed = cell(0, 1, 4);
    failed.error = Some("timed out".into());
    d.cells.push(again);
    d.cells.push(failed);
    let t = table(&d);
    assert_eq!(row(&t, "agent-0"), ["agent-0", "—", "2.00 Gbit/s", "·"]);
    assert!(t.contains("note: 1 pairs were tested more than once"), "{t}");
}

#[test]
fn csv_one_row_per_test_quoted() {
    let text = csv(&doc());
    let mut r = ::csv::Reader::from_reader(text.as_bytes());
    let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(head.len(), 18);
    assert_eq!(&head[..4], ["test", "client", "server", "client_address"]);
    assert_eq!(head.last().unwrap(), "error");
    let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3);
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    assert_eq!(&rows[0][col("client")], "agent-0.agents.netrig.svc.cluster.local");
    assert_eq!(&rows[0][col("server_address")], "10.0.0.2:6387");
    assert_eq!(&rows[0][col("throughput_bps")], "9412000000");
    assert_eq!(&rows[0][col("retransmits")], "3");
    assert_eq!(&rows[0][col("start_offset_ms")], "0.4");
    assert_eq!(&rows[0][col("error")], "");
    assert_eq!(&rows[1][col("round")], "1");
    assert_eq!(&rows[1][col("warnings")], "the witness, \"quoted\"");
    assert_eq!(
        &rows[2][col("error")],
        "connect to 10.0.0.3:6387: refused, <b>\"no\"</b> & more"
    );
    assert_eq!(&rows[2][col("throughput_bps")], "");
    // Quoted as RFC 4180 wants: the comma and the quotes inside one field.
    assert!(text.contains("\"the witness, \"\"quoted\"\"\""), "{text}");
}

#[test]
fn html_is_self_contained_escaped_and_coloured() {
    let mut d = doc();
    d.hosts[2].name = "<i onclick=alert(1)>.agents.netrig.svc.cluster.local".into();
    d.hosts[2].address = "\"><script>alert(2)</script>".into();
    d.warnings = vec!["a <warning> & more".into()];
    let h = html(&d);
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(h.trim_end().ends_with("</html>"));
    for bad in [
        "<script", "<img", "<i ", "http://", "https://", "<link", "src=\"", "href=", "url(",
    ] {
        assert!(!h.contains(bad), "{bad} in\n{h}");
    }
    assert!(h.contains(">&lt;i onclick=alert(1)&gt;</th>"), "{h}");
    assert!(
        h.contains("&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"),
        "{h}"
    );
    assert!(h.contains("a &lt;warning&gt; &amp; more"), "{h}");
    assert!(
        h.contains("refused, &lt;b&gt;&quot;no&quot;&lt;/b&gt; &amp; more"),
        "{h}"
    );
    // The heat map: the highest figure at the bright end, the lowest at the dark end, each
    // with its exact figure in the hover title.
    let (bright, _) = colour(1.0);
    let (dark, _) = colour(0.0);
    assert_eq!((bright.as_str(), dark.as_str()), ("#fde725", "#440154"));
    assert!(
        h.contains(&format!(
            "<td style=\"background:{bright};color:#111\" title=\"agent-0 → agent-1 (round 1): 9412000000 bit/s\">9.41 Gbit/s</td>"
        )),
        "{h}"
    );
    assert!(
        h.contains(&format!("background:{dark};color:#fff\" title=\"")),
        "{h}"
    );
    assert!(h.contains("512300000 bit/s\">512 Mbit/s</td>"), "{h}");
    assert!(h.contains("class=\"legend\""));
    assert!(h.contains("<td class=\"fail\" title=\"agent-1 → "), "{h}");
    assert!(h.contains("<h2>retransmits (segments)</h2>"));
    assert!(
        h.contains("<tr><td>1</td><td>1</td><td>0</td><td>1.23 ms</td></tr>"),
        "{h}"
    );
    assert!(
        h.contains("<tr><td>3</td><td>1</td><td>1</td><td>—</td></tr>"),
        "{h}"
    );
    assert!(h.contains("<h2>failed</h2>"));
}

#[test]
fn latency_scale_is_reversed_lower_is_brighter() {
    let mut d = doc();
    for (c, p50) in d.cells.iter_mut().zip([48.0, 1000.0]) {
        c.transactions_per_s = Some(1.0);
        c.latency_p50_us = Some(p50);
    }
    let h = html(&d);
    let (bright, _) = colour(1.0);
    assert!(
        h.contains(&format!(
            "background:{bright};color:#111\" title=\"agent-0 → agent-1 (round 1): 48 µs\""
        )),
        "{h}"
    );
}

#[test]
fn colour_scale_is_sequential() {
    // Luminance rises along the scale (a sequential map), and out-of-range values are clamped.
    let lum = |t: f64| {
        let (c, _) = colour(t);
        let v = |i: usize| f64::from(u8::from_str_radix(&c[i..i + 2], 16).unwrap());
        0.2126 * v(1) + 0.7152 * v(3) + 0.0722 * v(5)
    };
    let l: Vec<f64> = (0..=20).map(|k| lum(f64::from(k) / 20.0)).collect();
    assert!(l.windows(2).all(|w| w[1] > w[0]), "{l:?}");
    assert_eq!(colour(-1.0), colour(0.0));
    assert_eq!(colour(2.0), colour(1.0));
    assert_eq!(colour(f64::NAN), colour(0.0));
}

/// What DNS and the agents named (a host, an agent's `--name`, a refusal's words) reaches the CSV
/// as text: a cell a spreadsheet would run as a formula gets a `'` before it.
#[test]
fn csv_cells_from_peers_cannot_be_formulas() {
    let mut d = doc();
    d.hosts[0].name = "=cmd|' /C calc'!A0".into();
    d.hosts[1].label = Some("@SUM(1+1)".into());
    d.cells[2].error = Some("-2+3 refused".into());
    d.cells[1].warnings = vec!["+x".into()];
    let text = csv(&d);
    let mut r = ::csv::Reader::from_reader(text.as_bytes());
    let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(&rows[0][col("client")], "'=cmd|' /C calc'!A0");
    assert_eq!(&rows[0][col("server_label")], "'@SUM(1+1)");
    assert_eq!(&rows[2][col("error")], "'-2+3 refused");
    assert_eq!(&rows[1][col("warnings")], "'+x");
    assert_eq!(&rows[0][col("start_offset_ms")], "0.4");
}

/// A plan's meshes: one CSV header, every mesh's rows, each naming its test; one page with a
/// section per mesh.
#[test]
fn a_plans_meshes_share_one_csv_and_one_page() {
    let a = doc();
    let mut b = doc();
    b.test = "tcp-rr".into();
    b.args = vec!["-l".into(), "5".into()];
    let text = csv_of(&[a.clone(), b.clone()]);
    let mut r = ::csv::Reader::from_reader(text.as_bytes());
    assert_eq!(&r.headers().unwrap()[0], "test");
    let tests: Vec<String> = r.records().map(|r| r.unwrap()[0].to_string()).collect();
    assert_eq!(
        tests,
        [
            "tcp-stream -l 10",
            "tcp-stream -l 10",
            "tcp-stream -l 10",
            "tcp-rr -l 5",
            "tcp-rr -l 5",
            "tcp-rr -l 5"
        ]
    );
    assert_eq!(text.matches("client,server").count(), 1, "{text}");
    let page = html_of(Some("nightly <x>"), &[a, b]);
    assert!(
        page.contains("<h1>netrig mesh plan nightly &lt;x&gt;: 2 tests</h1>"),
        "{page}"
    );
    assert_eq!(page.matches("<section>").count(), 2);
    assert!(page.contains("<h2>netrig mesh: tcp-rr -l 5, full mesh"), "{page}");
    assert!(!page.contains("<h2>rounds</h2>") && page.contains("<h3>rounds</h3>"));
    assert_eq!(page.matches("</html>").count(), 1);
}

#[test]
fn stray_cells_and_an_empty_mesh_do_not_panic() {
    let mut d = doc();
    d.cells.push(cell(7, 0, 0));
    d.rounds[0].cells.push(99);
    let t = table(&d);
    assert!(
        t.contains("note: 1 tests name a host the document does not list"),
        "{t}"
    );
    let _ = html(&d);
    let _ = csv(&d);
    let mut empty = doc();
    empty.cells.clear();
    empty.rounds.clear();
    assert!(table(&empty).contains("0 tests in 0 rounds"));
    let _ = html(&empty);
}
