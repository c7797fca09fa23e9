//! Snapshot tests of every exporter's output, from results of real runs kept
//! in tests/fixtures/ (loopback, this project's development VM). A change to
//! what a format prints shows here as a diff to review: run
//! `INSTA_UPDATE=always cargo test -p netrig-report --test exporters` (or
//! `cargo insta review`) to accept it.

use netrig_export::csv::CsvExporter;
use netrig_export::json::JsonExporter;
use netrig_export::json_stream::JsonStreamExporter;
use netrig_export::table::TableExporter;
use netrig_export::Exporter;
use netrig_report::{table, TableLayout, TestResult};

const FIXTURES: &[&str] = &["tcp-stream", "udp-stream", "tcp-rr", "tcp-crr"];

fn fixture(name: &str) -> TestResult {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The layout each fixture's kind picks (its `KindReport::table`).
fn layout(r: &TestResult) -> &'static dyn TableLayout {
    match r.test.as_str() {
        "tcp-stream" => &table::TCP_STREAM,
        "udp-stream" => &table::UDP_STREAM,
        "tcp-rr" => &table::TRANSACTIONS,
        "tcp-crr" => &table::CONNECT_TRANSACTIONS,
        other => panic!("no layout for {other}"),
    }
}

/// Everything an exporter writes for one run: each interval, then the result.
fn export(e: &mut dyn Exporter, r: &TestResult) -> String {
    let mut out = Vec::new();
    for iv in &r.intervals {
        e.interval(&mut out, iv).unwrap();
    }
    e.result(&mut out, r).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn table() {
    for name in FIXTURES {
        let r = fixture(name);
        let mut e = TableExporter::new(layout(&r), r.flows.len());
        insta::assert_snapshot!(format!("table-{name}"), export(&mut e, &r));
    }
}

#[test]
fn json_is_the_result_document_and_reads_back_equal() {
    for name in FIXTURES {
        let r = fixture(name);
        let text = export(&mut JsonExporter, &r);
        let back: TestResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r, "{name}");
        insta::assert_snapshot!(format!("json-{name}"), text);
    }
}

#[test]
fn json_stream_has_a_line_per_interval_then_the_end() {
    for name in FIXTURES {
        let r = fixture(name);
        let text = export(&mut JsonStreamExporter, &r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), r.intervals.len() + 1, "{name}");
        for (line, iv) in lines.iter().zip(&r.intervals) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["event"], "interval");
            assert_eq!(v["data"], serde_json::to_value(iv).unwrap());
        }
        let end: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(end["event"], "end");
        assert_eq!(end["data"], serde_json::to_value(&r).unwrap());
    }
    let mut out = Vec::new();
    JsonStreamExporter
        .error(&mut out, "the agent sent no results")
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"event\":\"error\",\"data\":\"the agent sent no results\"}\n"
    );
}

/// CSV: a header, a row per flow and a sum per interval, then per flow and
/// the sum over the window; the numbers are the JSON's.
#[test]
fn csv_rows_are_the_jsons_numbers() {
    for name in FIXTURES {
        let r = fixture(name);
        let text = export(&mut CsvExporter::default(), &r);
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(header, netrig_export::csv::COLUMNS);
        let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        let per_interval: usize = r.intervals.iter().map(|i| i.flows.len() + 1).sum();
        assert_eq!(rows.len(), per_interval + r.flows.len() + 1, "{name}");
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        let sum = rows.last().unwrap();
        assert_eq!(&sum[col("record")], "sum");
        assert_eq!(
            sum[col("bytes")].parse::<u64>().unwrap(),
            r.summary.bytes,
            "{name}"
        );
        assert_eq!(
            sum[col("throughput_bps")].parse::<f64>().unwrap(),
            r.summary.throughput_bps,
            "{name}"
        );
        if let Some(t) = r.summary.transactions_per_s {
            assert_eq!(
                sum[col("transactions_per_s")].parse::<f64>().unwrap(),
                t,
                "{name}"
            );
        }
        insta::assert_snapshot!(format!("csv-{name}"), text);
    }
}

/// The receivers' line sums what each end reported of its reads: counts the
/// agent sent, however large, never overflow (a debug build would panic),
/// and a watermark that is not a whole number of KiB is given in bytes.
#[test]
fn the_receivers_line_sums_any_counts_without_overflow() {
    let mut r = fixture("tcp-stream");
    for f in &mut r.flows {
        f.remote.total_bytes = u64::MAX;
        f.remote.reads = Some(netrig_proto::report::ReadReport {
            calls: u64::MAX,
            watermark: Some(100_000),
            watermark_on: u64::MAX,
            watermark_off: 1,
        });
    }
    let mut e = TableExporter::new(layout(&r), r.flows.len());
    let text = export(&mut e, &r);
    let line = text
        .lines()
        .find(|l| l.starts_with("receivers: "))
        .expect("a receivers line");
    assert!(
        line.contains(&format!("{} reads", u64::MAX)) && line.contains("SO_RCVLOWAT 100000 bytes"),
        "{line}"
    );
}

/// The senders' line sums what each end reported of its sends without
/// overflow, and says what bounded their unsent bytes: one
/// TCP_NOTSENT_LOWAT, a range of them, or the send buffer alone.
#[test]
fn the_senders_line_says_what_bounded_the_unsent_bytes() {
    let line = |lowats: &[Option<u32>], calls: u64, bytes: u64| {
        let mut r = fixture("tcp-stream");
        let mut f = r.flows[0].clone();
        r.flows.clear();
        for (i, &l) in lowats.iter().enumerate() {
            f.id = i as u32;
            f.local.total_bytes = bytes;
            f.local.sends = Some(netrig_proto::report::SendReport {
                calls,
                notsent_lowat: l,
            });
            r.flows.push(f.clone());
        }
        let mut e = TableExporter::new(layout(&r), r.flows.len());
        let text = export(&mut e, &r);
        text.lines()
            .find(|l| l.starts_with("senders: "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no senders line in\n{text}"))
    };
    let one = line(&[Some(262_144)], 1000, 128 * 1024 * 1000);
    assert_eq!(
        one,
        "senders: 1000 send calls, 128.0 KiB per call; writes taken while under 256 KiB was unsent (TCP_NOTSENT_LOWAT)"
    );
    let range = line(&[Some(100_000), Some(262_144)], u64::MAX, u64::MAX);
    assert!(
        range.contains(&format!("{} send calls", u64::MAX))
            && range.contains("under 100000 bytes to 256 KiB"),
        "{range}"
    );
    let none = line(&[None, None], 10, 10 * 1024);
    assert!(none.ends_with("bounded by the send buffer only"), "{none}");
    let mixed = line(&[Some(262_144), None], 10, 10 * 1024);
    assert!(mixed.ends_with("by the send buffer only by 1"), "{mixed}");
}

/// The limits line gives, per direction, the senders' busy time and the
/// shares of it the receive window and the send buffer held them, summed
/// without overflow; without the kernel's times it is left out.
#[test]
fn the_limits_line_gives_the_shares_of_the_busy_time() {
    let with = |times: Option<(u64, u64, u64)>| {
        let mut r = fixture("tcp-stream");
        for f in &mut r.flows {
            let t = f.tcp_info.get_or_insert_with(Default::default);
            (t.busy_us, t.rwnd_limited_us, t.sndbuf_limited_us) =
                (times.map(|t| t.0), times.map(|t| t.1), times.map(|t| t.2));
        }
        let mut e = TableExporter::new(layout(&r), r.flows.len());
        let text = export(&mut e, &r);
        text.lines()
            .find(|l| l.contains(" busy ") && l.contains("limited by"))
            .map(str::to_string)
    };
    let line = with(Some((2_000_000, 1_500_000, 100_000))).expect("a limits line");
    assert!(
        // The fixture has two flows: their times summed.
        line.starts_with(
            "tx senders busy 4.00 s: limited by the receive window 75.0 %, by the send buffer 5.0 %"
        ),
        "{line}"
    );
    let huge = with(Some((u64::MAX, u64::MAX, 0))).expect("a limits line");
    assert!(huge.contains("receive window 100.0 %"), "{huge}");
    assert_eq!(with(None), None);
}
