//! One test's time series (`-i`): per-flow throughput over time and, in a
//! second panel, each sender's congestion window and RTT from TCP_INFO;
//! a flow's colour is the same in both, named once in the legend.

use crate::chart::{Axis, Chart, Series};
use netrig_document::result::TestResult;

fn flow_name(id: u32, direction: impl std::fmt::Debug) -> String {
    format!("flow {id} {}", format!("{direction:?}").to_lowercase())
}

/// The panels of `r`'s time series: throughput, then cwnd and RTT when any
/// interval has TCP_INFO. None without intervals.
pub fn time_series(r: &TestResult) -> Option<Vec<Chart>> {
    if r.intervals.is_empty() {
        return None;
    }
    let mut tput: Vec<Series> = Vec::new();
    let mut cwnd: Vec<Series> = Vec::new();
    let mut rtt: Vec<Series> = Vec::new();
    for iv in &r.intervals {
        for f in &iv.flows {
            let name = flow_name(f.id, f.direction);
            let i = match tput.iter().position(|s| s.label == name) {
                Some(i) => i,
                None => {
                    let c = tput.len();
                    // One legend entry a flow, its colour in both panels;
                    // the RTT's dashed line named by a note.
                    let mk = |label: String, dashed: bool| Series {
                        label,
                        colour: c,
                        dashed,
                        secondary: dashed,
                        no_legend: dashed,
                        ..Series::default()
                    };
                    tput.push(mk(name.clone(), false));
                    cwnd.push(mk(name.clone(), false));
                    rtt.push(mk(format!("{name}: RTT"), true));
                    c
                }
            };
            tput[i].points.push((iv.end_s, f.throughput_bps / 1e6));
            if let Some(t) = &f.tcp_info {
                cwnd[i]
                    .points
                    .push((iv.end_s, t.snd_cwnd as f64 * t.snd_mss as f64));
                rtt[i].points.push((iv.end_s, t.rtt_us as f64));
            }
        }
    }
    let time = || Axis {
        label: "time (s)".into(),
        ..Axis::default()
    };
    let mut charts = vec![Chart {
        title: format!("{}: throughput per flow over time", r.test),
        x: time(),
        y: Axis {
            label: "Throughput (Mbit/s)".into(),
            ..Axis::default()
        },
        series: tput,
        ..Chart::default()
    }];
    if cwnd.iter().any(|s| !s.points.is_empty()) {
        let series = cwnd
            .into_iter()
            .chain(rtt)
            .filter(|s| !s.points.is_empty())
            .collect();
        charts.push(Chart {
            title: "congestion window and RTT (TCP_INFO of each sender)".into(),
            x: time(),
            y: Axis {
                label: "cwnd (bytes: snd_cwnd × snd_mss)".into(),
                ..Axis::default()
            },
            y2: Some(Axis {
                label: "RTT (µs)".into(),
                ..Axis::default()
            }),
            series,
            notes: vec![
                ("solid: cwnd (left axis)".into(), false),
                ("dashed: smoothed RTT, µs (right axis)".into(), true),
            ],
            ..Chart::default()
        });
    }
    Some(charts)
}
