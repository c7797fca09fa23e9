//! Snapshot tests of the kinds' tables, from results of real runs kept in
//! netrig-report's tests/fixtures/ (loopback, this project's development
//! VM), each laid out as its kind picks; and the TCP streams' lines from
//! figures at their limits. A change to what a table prints shows here as a
//! diff to review: run `INSTA_UPDATE=always cargo test -p netrig-kinds
//! --test tables` (or `cargo insta review`) to accept it.

use netrig_export::table::TableExporter;
use netrig_export::Exporter;
use netrig_report::TestResult;

const FIXTURES: &[&str] = &["tcp-stream", "udp-stream", "tcp-rr", "tcp-crr"];

fn fixture(name: &str) -> TestResult {
    let path = format!(
        "{}/../netrig-report/tests/fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What the table exporter prints of a run, laid out as its kind picks
/// (the registry's): the interim rows, then the result's table.
fn table_of(r: &TestResult) -> String {
    let layout = netrig_kinds::by_name(&r.test)
        .unwrap_or_else(|| panic!("no kind {}", r.test))
        .table();
    let mut e = TableExporter::new(layout, r.flows.len());
    let mut out = Vec::new();
    r.intervals
        .iter()
        .try_for_each(|iv| e.interval(&mut out, iv))
        .and_then(|()| e.result(&mut out, r))
        .expect("written to memory");
    String::from_utf8(out).expect("a table is text")
}

#[test]
fn table() {
    for name in FIXTURES {
        insta::assert_snapshot!(format!("table-{name}"), table_of(&fixture(name)));
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
    let text = table_of(&r);
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
        let text = table_of(&r);
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
        let text = table_of(&r);
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
