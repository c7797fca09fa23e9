//! Snapshot tests of the HTML report's output, from real runs kept in
//! netrig-report's fixtures: a change to the page shows as a diff to
//! review (`INSTA_UPDATE=always cargo test -p netrig-export --test snapshots`).

use netrig_export::html::HtmlExporter;
use netrig_export::Exporter;
use netrig_report::TestResult;

fn fixture(name: &str) -> TestResult {
    let path = format!(
        "{}/../netrig-report/tests/fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn report_pages() {
    for name in ["tcp-stream", "tcp-rr"] {
        let r = fixture(name);
        let layout = netrig_kinds::by_name(name).expect("a kind").table();
        let mut e = HtmlExporter::new(format!("netrig {name} -i 1"), layout, r.flows.len());
        let mut out = Vec::new();
        for i in &r.intervals {
            e.interval(&mut out, i).unwrap();
        }
        e.result(&mut out, &r).unwrap();
        insta::assert_snapshot!(format!("html-{name}"), String::from_utf8(out).unwrap());
    }
}
