//! Snapshot tests of every exporter's output, from results of real runs kept
//! in tests/fixtures/ (loopback, this project's development VM). A change to
//! what a format prints shows here as a diff to review: run
//! `INSTA_UPDATE=always cargo test -p netrig-report --test exporters` (or
//! `cargo insta review`) to accept it. The table's are with the kinds'
//! layouts (crates/netrig-kinds/tests/tables.rs).

use netrig_export::csv::CsvExporter;
use netrig_export::json::JsonExporter;
use netrig_export::json_stream::JsonStreamExporter;
use netrig_export::Exporter;
use netrig_report::TestResult;

const FIXTURES: &[&str] = &["tcp-stream", "udp-stream", "tcp-rr", "tcp-crr"];

fn fixture(name: &str) -> TestResult {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
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
