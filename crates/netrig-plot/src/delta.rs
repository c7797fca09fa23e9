//! The change each arm makes, with its interval, against the swept value: for an experiment
//! with arms and a sweep, one panel per figure (the headline, the service demand), one line per
//! arm against its own baseline, the interval as a band and error bars, 0 dashed; a change
//! without an interval is left out. The IPQoS
//! study's plot: what a policy costs at each message size.

use crate::chart::{Axis, Chart, Series};
use crate::sweep;
use netrig_document::experiment::TestOutcome;

/// The figures whose change is drawn, in order, when the comparisons hold them: the headline,
/// then service demand per packet (else per unit), then local CPU.
fn metrics(test: &TestOutcome) -> Vec<(&'static str, &'static str)> {
    let has = |m: &str| {
        test.points
            .iter()
            .flat_map(|p| &p.comparisons)
            .any(|c| c.metric == m && c.diff_pct.is_some())
    };
    let mut out = Vec::new();
    if let Some((m, _)) = sweep::headline(test) {
        if has(m) {
            out.push((
                m,
                if m == "throughput" {
                    "throughput"
                } else {
                    "transactions/s"
                },
            ));
        }
    }
    if has("sd_local_packet") {
        out.push(("sd_local_packet", "local service demand per packet"));
    } else if has("sd_local") {
        out.push(("sd_local", "local service demand"));
    }
    out
}

/// The change charts of `test` (none without two or more swept points and a comparison).
pub fn delta_charts(test: &TestOutcome) -> Option<Vec<Chart>> {
    if test.points.len() < 2 {
        return None;
    }
    let (option, x, ticks, log) = sweep::xs(test)?;
    let level = test
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .flat_map(|a| &a.estimates)
        .map(|e| e.level)
        .next()
        .unwrap_or(95.0);
    // An arm that is itself some arm's baseline (no policy on another link) is a place, not a
    // change to draw: its difference from the plan's baseline would set the scale.
    let bases: Vec<&str> = test
        .points
        .iter()
        .flat_map(|p| &p.comparisons)
        .map(|c| c.baseline.as_str())
        .collect();
    let mut charts = Vec::new();
    for (metric, what) in metrics(test) {
        let mut series: Vec<Series> = Vec::new();
        for (p, &px) in test.points.iter().zip(&x) {
            for c in p
                .comparisons
                .iter()
                .filter(|c| c.metric == metric && !bases.contains(&c.arm.as_str()))
            {
                // A change without an interval is withheld here as in the answer (one run, or
                // a baseline not distinguishable from 0): not drawn as if measured.
                let (Some(d), Some(lo), Some(hi)) = (c.diff_pct, c.ci_low_pct, c.ci_high_pct) else {
                    continue;
                };
                let name = format!("{} vs {}", c.arm, c.baseline);
                let i = match series.iter().position(|s| s.label == name) {
                    Some(i) => i,
                    None => {
                        series.push(Series {
                            label: name,
                            colour: series.len(),
                            ..Series::default()
                        });
                        series.len() - 1
                    }
                };
                series[i].points.push((px, d));
                series[i].band.push((px, lo, hi));
            }
        }
        if series.is_empty() {
            continue;
        }
        let (lo, hi) = x.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
        if lo < hi {
            series.push(Series {
                label: "no change".into(),
                colour: series.len(),
                points: vec![(lo, 0.0), (hi, 0.0)],
                dashed: true,
                no_legend: true,
                ..Series::default()
            });
        }
        charts.push(Chart {
            title: format!("Δ {what}, {level} % intervals"),
            x: Axis {
                label: option.clone(),
                log,
                ticks: ticks.clone(),
            },
            y: Axis {
                label: format!("Δ {what} (%)"),
                ..Axis::default()
            },
            series,
            notes: vec![("dashed: no change".into(), false)],
            ..Chart::default()
        });
    }
    (!charts.is_empty()).then_some(charts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{check_svg, experiment, has_text};

    /// An arm costing 10 % more service demand at the smallest size and 1 % at the largest:
    /// one line per arm against its baseline, the change on y, the swept size on x.
    #[test]
    fn the_change_of_each_arm_is_drawn_against_the_swept_value() {
        let e = experiment(
            "tcp-stream",
            "-m",
            &["32", "256", "2920"],
            &["no-qos", "dscp"],
            |p, a, r, run| {
                let cost = if a == 1 { [1.10, 1.05, 1.01][p] } else { 1.0 };
                run.summary.service_demand.local = Some(2.0 * cost * (1.0 + 0.001 * r as f64));
                run.summary.throughput_bps = 1e9 / cost;
            },
        );
        let charts = delta_charts(&e.tests[0]).expect("a sweep with arms");
        assert_eq!(charts.len(), 2, "throughput and service demand");
        let sd = &charts[1];
        assert!(sd.y.label.contains("service demand"), "{}", sd.y.label);
        let line = &sd.series[0];
        assert_eq!(line.label, "dscp vs no-qos");
        let ys: Vec<f64> = line.points.iter().map(|p| p.1).collect();
        assert!((ys[0] - 10.0).abs() < 0.5 && (ys[2] - 1.0).abs() < 0.5, "{ys:?}");
        assert_eq!(line.band.len(), 3, "each change with its interval");
        assert!(sd
            .series
            .iter()
            .any(|s| s.dashed && s.points.iter().all(|p| p.1 == 0.0)));
        let p = crate::plot_grid("delta", "t".into(), &charts, 2).expect("drawn");
        check_svg(&p.svg);
        assert!(has_text(&p.svg, "dscp vs no-qos"));
        // An arm that is another's baseline (a place, not a change) is not drawn.
        let mut placed = e.clone();
        for p in &mut placed.tests[0].points {
            for c in &mut p.comparisons {
                c.baseline = "dscp".into();
            }
        }
        let charts = delta_charts(&placed.tests[0]);
        assert!(charts.is_none(), "{charts:?}");
        // The comparison plot names an arm's own baseline (issue #39).
        let mut own = experiment(
            "tcp-stream",
            "",
            &[],
            &["none", "none-1g", "rule-1g"],
            |_, a, r, run| {
                run.summary.throughput_bps = 1e9 * [1.0, 10.0, 9.0][a] + 1e6 * r as f64;
            },
        );
        let p = &mut own.tests[0].points[0];
        p.comparisons.retain(|c| c.arm != "rule-1g");
        let ext = netrig_document::analysis::compare(&p.arms[1], &p.arms[2], 95.0);
        p.comparisons.extend(ext);
        let c = crate::compare::comparison(&own.tests[0], &own.tests[0].points[0]).expect("a comparison");
        assert!(
            c.marks.iter().any(|m| m.label.contains("vs none-1g")),
            "{:?}",
            c.marks.iter().map(|m| &m.label).collect::<Vec<_>>()
        );
        // One point: nothing to draw against.
        let one = experiment("tcp-stream", "-m", &["32"], &["a", "b"], |_, _, _, _| {});
        assert!(delta_charts(&one.tests[0]).is_none());
        // One arm: no change.
        let alone = experiment("tcp-stream", "-m", &["32", "64"], &["a"], |_, _, _, _| {});
        assert!(delta_charts(&alone.tests[0]).is_none());
    }
}
