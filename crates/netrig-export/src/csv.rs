//! `--csv` for one run: a header row, then a row per flow of each interval
//! as it closes and its sum per direction, then a row per flow over the
//! window and the test's sum. The `record` column says which; numbers are
//! the JSON's (bits/s, bytes, µs), empty where the JSON has null.
//! docs/RESULTS.md lists the columns.

use super::Exporter;
use netrig_document::result::{Counts, IntervalResult, TestResult, FAILURES};
use std::io::{self, Write};

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "record",
    "interval",
    "start_s",
    "end_s",
    "flow",
    "direction",
    "bytes",
    "throughput_bps",
    "retransmits",
    "transactions",
    "transactions_per_s",
    "failed_transactions",
    "received_datagrams",
    "lost_datagrams",
    "loss_pct",
    "jitter_us",
    "latency_p50_us",
    "latency_p99_us",
    "snd_cwnd_bytes",
    "rtt_us",
];

#[derive(Debug, Default)]
pub struct CsvExporter {
    header: bool,
}

fn num<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn write_row(out: &mut dyn Write, cells: &[String]) -> io::Result<()> {
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    w.write_record(cells).map_err(io::Error::other)?;
    out.write_all(&w.into_inner().map_err(|e| io::Error::other(e.to_string()))?)
}

/// One row's cells, by column.
#[derive(Default)]
struct Row {
    record: &'static str,
    interval: Option<u32>,
    start_s: Option<f64>,
    end_s: Option<f64>,
    flow: String,
    direction: String,
    bytes: Option<u64>,
    throughput_bps: Option<f64>,
    retransmits: Option<u64>,
    transactions: Option<u64>,
    transactions_per_s: Option<f64>,
    failed: Option<u64>,
    received: Option<u64>,
    lost: Option<u64>,
    loss_pct: Option<f64>,
    jitter_us: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    cwnd: Option<u64>,
    rtt: Option<u32>,
}

/// The datagram figures a row shows, of an interval's or the window's accounting.
trait Datagrams {
    fn figures(&self) -> (u64, u64, f64, Option<f64>);
}

impl Datagrams for netrig_document::result::IntervalUdp {
    fn figures(&self) -> (u64, u64, f64, Option<f64>) {
        (
            self.received_datagrams,
            self.lost_datagrams,
            self.loss_pct,
            self.jitter_us,
        )
    }
}

impl Datagrams for netrig_document::result::UdpSummary {
    fn figures(&self) -> (u64, u64, f64, Option<f64>) {
        (
            self.received_datagrams,
            self.lost_datagrams,
            self.loss_pct,
            self.jitter_us,
        )
    }
}

impl Row {
    /// With the datagram figures of `u`, if any.
    fn udp(mut self, u: Option<&impl Datagrams>) -> Row {
        if let Some((received, lost, pct, jitter)) = u.map(Datagrams::figures) {
            (self.received, self.lost, self.loss_pct, self.jitter_us) =
                (Some(received), Some(lost), Some(pct), jitter);
        }
        self
    }

    /// With a flow's cwnd (bytes) and RTT from its TCP_INFO, if any.
    fn tcp(mut self, t: Option<&netrig_document::result::measure::TcpInfo>) -> Row {
        self.cwnd = t.map(|t| u64::from(t.snd_cwnd) * u64::from(t.snd_mss));
        self.rtt = t.map(|t| t.rtt_us);
        self
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.record.to_string(),
            num(self.interval),
            num(self.start_s),
            num(self.end_s),
            self.flow.clone(),
            self.direction.clone(),
            num(self.bytes),
            num(self.throughput_bps),
            num(self.retransmits),
            num(self.transactions),
            num(self.transactions_per_s),
            num(self.failed),
            num(self.received),
            num(self.lost),
            num(self.loss_pct),
            num(self.jitter_us),
            num(self.p50),
            num(self.p99),
            num(self.cwnd),
            num(self.rtt),
        ]
    }
}

impl CsvExporter {
    fn header(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if !self.header {
            self.header = true;
            write_row(out, &COLUMNS.iter().map(|c| c.to_string()).collect::<Vec<_>>())?;
        }
        Ok(())
    }
}

impl Exporter for CsvExporter {
    fn interval(&mut self, out: &mut dyn Write, i: &IntervalResult) -> io::Result<()> {
        self.header(out)?;
        let span = |r: Row| Row {
            interval: Some(i.index),
            start_s: Some(i.start_s),
            end_s: Some(i.end_s),
            ..r
        };
        for f in &i.flows {
            let row = span(
                Row {
                    record: "interval_flow",
                    flow: f.id.to_string(),
                    direction: f.direction.name().into(),
                    bytes: Some(f.bytes),
                    throughput_bps: Some(f.throughput_bps),
                    retransmits: f.retransmits,
                    transactions: f.transactions,
                    failed: f.failed_transactions,
                    ..Row::default()
                }
                .udp(f.udp.as_ref())
                .tcp(f.tcp_info.as_ref()),
            );
            write_row(out, &row.cells())?;
        }
        let sum = span(
            Row {
                record: "interval_sum",
                bytes: Some(i.bytes),
                throughput_bps: Some(i.throughput_bps),
                retransmits: i.retransmits,
                transactions: i.flows.iter().map(|f| f.transactions).sum(),
                transactions_per_s: i.transactions_per_s,
                failed: i.failed_transactions,
                p50: i.latency_us.as_ref().map(|l| l.p50),
                p99: i.latency_us.as_ref().map(|l| l.p99),
                ..Row::default()
            }
            .udp(i.udp.as_ref()),
        );
        write_row(out, &sum.cells())
    }

    fn result(&mut self, out: &mut dyn Write, r: &TestResult) -> io::Result<()> {
        self.header(out)?;
        for f in &r.flows {
            let row = Row {
                record: "flow",
                end_s: Some(f.elapsed_s),
                flow: f.id.to_string(),
                direction: f.direction.name().into(),
                bytes: Some(f.bytes),
                throughput_bps: Some(f.throughput_bps),
                transactions: f.transactions,
                transactions_per_s: f.transactions_per_s,
                failed: f.counts.group(FAILURES).map(Counts::total),
                ..Row::default()
            }
            .udp(f.udp.as_ref())
            .tcp(f.tcp_info.as_ref());
            write_row(out, &row.cells())?;
        }
        let s = &r.summary;
        let sum = Row {
            record: "sum",
            end_s: Some(s.elapsed_s),
            bytes: Some(s.bytes),
            throughput_bps: Some(s.throughput_bps),
            transactions: s.transactions,
            transactions_per_s: s.transactions_per_s,
            failed: s.counts.group(FAILURES).map(Counts::total),
            p50: s.latency_us.as_ref().map(|l| l.p50),
            p99: s.latency_us.as_ref().map(|l| l.p99),
            ..Row::default()
        }
        .udp(s.udp.as_ref());
        write_row(out, &sum.cells())
    }
}
