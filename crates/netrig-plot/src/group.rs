//! A group's members on one time axis (the group's clock): each stream's throughput on the
//! left axis, each request/response member's round trip on the right, so latency is read
//! against load (flent's RRUL plot).

use crate::chart::{Axis, Chart, Series};
use netrig_document::experiment::group::{GroupOutcome, GroupRun};

/// The chart of one run of a group; `None` when no member has a placed series.
pub fn timeline(g: &GroupOutcome, arm: &str, run: &GroupRun) -> Option<Chart> {
    let mut series = Vec::new();
    let mut latency = false;
    for (c, m) in run.members.iter().enumerate() {
        if m.series.is_empty() {
            continue;
        }
        let rr = m.series.iter().any(|p| p.latency_mean_us.is_some());
        let points: Vec<(f64, f64)> = m
            .series
            .iter()
            .filter_map(|p| match rr {
                // A round trip at the middle of the interval that timed it.
                true => Some(((p.start_s + p.end_s) / 2.0, p.latency_mean_us? / 1000.0)),
                false => Some(((p.start_s + p.end_s) / 2.0, p.throughput_bps / 1e6)),
            })
            .collect();
        latency |= rr;
        series.push(Series {
            label: match rr {
                true => format!("{} ({}): mean round trip, ms (right axis)", m.member, m.kind),
                false => format!("{} ({}): Mbit/s", m.member, m.kind),
            },
            colour: c,
            points,
            dashed: rr,
            secondary: rr,
            ..Series::default()
        });
    }
    if series.is_empty() {
        return None;
    }
    let multi = g.arms.len() > 1;
    Some(Chart {
        title: format!(
            "group {}{}: throughput and round trip on the group's clock",
            g.name,
            if multi {
                format!(" (arm {arm})")
            } else {
                String::new()
            }
        ),
        x: Axis {
            label: "time since the group's start (s)".into(),
            ..Axis::default()
        },
        y: Axis {
            label: "Throughput (Mbit/s)".into(),
            ..Axis::default()
        },
        y2: latency.then(|| Axis {
            label: "round trip (ms, mean per interval)".into(),
            ..Axis::default()
        }),
        series,
        ..Chart::default()
    })
}
