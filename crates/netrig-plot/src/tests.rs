//! Plots from the real runs in netrig-report's fixtures and from small
//! experiment documents built of them.

use super::*;
use netrig_experiment::analysis;
use netrig_experiment::document::{ArmOutcome, PointOutcome, TestOutcome, FORMAT};
use netrig_experiment::metric::METRICS;
use netrig_experiment::sweep::Point;

pub fn fixture(name: &str) -> TestResult {
    let path = format!(
        "{}/../netrig-report/tests/fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An experiment of `kind`'s fixture over `option`'s `values` (none: one
/// unswept point) and `arms`, three runs each, `tweak` making each run's figures.
pub fn experiment(
    kind: &str,
    option: &str,
    values: &[&str],
    arms: &[&str],
    tweak: impl Fn(usize, usize, usize, &mut TestResult),
) -> Experiment {
    let base = fixture(kind);
    let points: Vec<Point> = if values.is_empty() {
        vec![Point { values: vec![] }]
    } else {
        values
            .iter()
            .map(|v| Point {
                values: vec![(option.to_string(), v.to_string())],
            })
            .collect()
    };
    let points = points
        .into_iter()
        .enumerate()
        .map(|(p, point)| {
            let arms: Vec<ArmOutcome> = arms
                .iter()
                .enumerate()
                .map(|(a, name)| {
                    let runs: Vec<TestResult> = (0..3)
                        .map(|r| {
                            let mut run = base.clone();
                            tweak(p, a, r, &mut run);
                            run
                        })
                        .collect();
                    let present = netrig_experiment::metric::present(&runs.iter().collect::<Vec<_>>());
                    let estimates = METRICS
                        .iter()
                        .filter(|m| present.iter().any(|q| q.name == m.name))
                        .map(|m| analysis::estimate(m, &runs, 95.0))
                        .collect();
                    ArmOutcome {
                        arm: name.to_string(),
                        runs,
                        estimates,
                        confident: None,
                    }
                })
                .collect();
            let comparisons = arms[1..]
                .iter()
                .flat_map(|a| analysis::compare(&arms[0], a, 95.0))
                .collect();
            PointOutcome {
                point,
                arms,
                comparisons,
            }
        })
        .collect();
    let plan = serde_json::from_value(serde_json::json!({
        "name": "t", "test": [{"kind": kind, "args": []}]
    }))
    .expect("plan");
    Experiment {
        format: FORMAT.into(),
        netrig_version: "test".into(),
        plan,
        started_unix_s: 0.0,
        finished_unix_s: 1.0,
        complete: true,
        stopped: None,
        seed: 1,
        warnings: vec![],
        commands: vec![],
        tests: vec![TestOutcome {
            kind: kind.into(),
            args: vec![],
            points,
            saturation: vec![],
        }],
    }
}

/// The SVG is an SVG document: opens with <svg, closes, tags balanced
/// enough (as many `<text` as `</text>`), no font files referenced.
pub fn check_svg(svg: &str) {
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    assert!(!svg.contains("url("), "no external fonts or images");
    assert!(!svg.contains("fill=\"#FFFFFF\""), "transparent background");
    // A line whose points are all one point draws nothing, in the SVG or
    // the PNG (whose renderer warns "path stroking failed" on stderr).
    for line in svg.split("<polyline").skip(1) {
        let points = line
            .split_once("points=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|p| p.0);
        let mut points = points.expect("a polyline has points").split_whitespace();
        let first = points.next();
        assert!(
            points.any(|p| Some(p) != first),
            "a zero-length line: <polyline{}",
            &line[..line.len().min(160)]
        );
    }
}

pub fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

pub fn has_text(svg: &str, s: &str) -> bool {
    let s = s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    texts(svg).iter().any(|t| t.contains(&s))
}

#[test]
fn sweep_of_two_arms_with_intervals_and_cpu() {
    let e = experiment(
        "tcp-stream",
        "-m",
        &["1K", "8K", "64K"],
        &["base", "tuned"],
        |p, a, r, run| {
            run.summary.throughput_bps = 1e9 * (1 + p) as f64 * (1.0 + 0.2 * a as f64) + 1e7 * r as f64;
            run.summary.cpu.local_pct = Some(10.0 + 5.0 * p as f64 + r as f64);
        },
    );
    let plots = plots_for_experiment(&e);
    let sweep = plots.iter().find(|p| p.name == "sweep").expect("a sweep plot");
    let svg = &sweep.svg;
    check_svg(svg);
    assert!(has_text(svg, "Throughput (Mbit/s)"), "{:?}", texts(svg));
    assert!(has_text(svg, "-m (message size, bytes)"));
    assert!(has_text(svg, "CPU local (% of the machine)"));
    for l in ["base", "tuned", "base: CPU local", "tuned: CPU local"] {
        assert!(texts(svg).iter().any(|t| t == l), "legend {l}: {:?}", texts(svg));
    }
    // 1K..64K spans 64x: a log axis, ticked at the swept values as written.
    for t in ["1K", "8K", "64K"] {
        assert!(texts(svg).iter().any(|x| x == t), "tick {t}");
    }
    // Two arms' lines (plus legend samples), two bands, error bars.
    assert!(svg.matches("<polyline").count() >= 2);
    assert_eq!(svg.matches("<polygon").count(), 2);
    // Palette colours, mid grey ink, nothing black.
    assert!(svg.contains("#4285F4") && svg.contains("#F28E2B"));
    assert!(svg.contains("#888888"));
    assert!(!svg.contains("#000000"));
}

#[test]
fn unswept_experiment_has_no_sweep() {
    let e = experiment("tcp-stream", "", &[], &["default"], |_, _, _, _| {});
    assert!(plots_for_experiment(&e).iter().all(|p| p.name != "sweep"));
}

#[test]
fn sweep_of_transactions_per_s() {
    let e = experiment("tcp-rr", "-P", &["1", "2", "4"], &["default"], |p, _, r, run| {
        run.summary.transactions_per_s = Some(20000.0 * (1 + p) as f64 + r as f64 * 100.0);
    });
    let svg = &plots_for_experiment(&e)[0].svg;
    check_svg(svg);
    assert!(has_text(svg, "Transactions/s"));
    assert!(has_text(svg, "-P (flows)"));
}

#[test]
fn time_series_of_two_flows_with_tcp_info() {
    let r = fixture("tcp-stream");
    let plots = plots_for_result(&r);
    assert_eq!(plots.len(), 1, "a stream has no latency spectrum");
    let svg = &plots[0].svg;
    check_svg(svg);
    assert_eq!(plots[0].name, "timeseries");
    assert!(has_text(svg, "Throughput (Mbit/s)"));
    assert!(has_text(svg, "time (s)"));
    let t = texts(svg);
    for f in &r.flows {
        let name = format!("flow {} {}", f.id, format!("{:?}", f.direction).to_lowercase());
        assert!(t.contains(&name), "{name} in {t:?}");
        if r.intervals
            .iter()
            .any(|i| i.flows.iter().any(|g| g.id == f.id && g.tcp_info.is_some()))
        {
            assert!(t.iter().any(|x| *x == format!("{name}: cwnd")));
            assert!(t.iter().any(|x| *x == format!("{name}: RTT")));
        }
    }
    assert!(has_text(svg, "RTT (µs), dashed"));
    assert!(has_text(svg, "cwnd (bytes: snd_cwnd × snd_mss)"));
}

/// A run of one interval: each series one point, drawn as its marker
/// with its legend, and no line of zero length.
#[test]
fn time_series_of_one_interval_draws_points_not_lines() {
    let mut r = fixture("tcp-stream");
    r.intervals.truncate(1);
    let plots = plots_for_result(&r);
    let svg = &plots[0].svg;
    check_svg(svg);
    let t = texts(svg);
    for f in &r.flows {
        let name = format!("flow {} {}", f.id, format!("{:?}", f.direction).to_lowercase());
        assert!(t.contains(&name), "{name} in {t:?}");
    }
    assert!(svg.contains("<circle"), "the points' markers");
}

#[test]
fn latency_spectrum_of_a_result() {
    for kind in ["tcp-rr", "tcp-crr"] {
        let r = fixture(kind);
        let plots = plots_for_result(&r);
        let l = plots.iter().find(|p| p.name == "latency").expect("spectrum");
        check_svg(&l.svg);
        assert!(has_text(&l.svg, "latency (µs)"));
        for tick in ["p50", "p90", "p99"] {
            assert!(texts(&l.svg).iter().any(|t| t == tick), "{tick}");
        }
        assert!(has_text(&l.svg, "transactions)"));
    }
    assert!(plots_for_result(&fixture("udp-stream"))
        .iter()
        .all(|p| p.name != "latency"));
}

#[test]
fn latency_spectrum_of_arms_merges_their_runs() {
    let e = experiment("tcp-rr", "", &[], &["a", "b"], |_, _, _, _| {});
    let plots = plots_for_experiment(&e);
    let l = plots.iter().find(|p| p.name == "latency").expect("spectrum");
    check_svg(&l.svg);
    assert!(has_text(&l.svg, "a (3 runs merged)"));
    assert!(has_text(&l.svg, "b (3 runs merged)"));
    // The merged curve's last point is the count of all three runs.
    let h = latency::merged(&e.tests[0].points[0].arms[0].runs.iter().collect::<Vec<_>>()).unwrap();
    let one = fixture("tcp-rr").summary.latency_us.unwrap().count;
    assert_eq!(h.len(), 3 * one);
}

#[test]
fn comparison_of_three_arms() {
    let e = experiment(
        "tcp-stream",
        "",
        &[],
        &["base", "fast", "slow"],
        |_, a, r, run| {
            let f = [1.0, 1.3, 0.8][a];
            run.summary.throughput_bps = 1e9 * f + 2e7 * r as f64;
        },
    );
    let plots = plots_for_experiment(&e);
    let c = plots.iter().find(|p| p.name == "compare").expect("a comparison");
    check_svg(&c.svg);
    let t = texts(&c.svg);
    assert!(t.iter().any(|x| x == "base (baseline)"), "{t:?}");
    assert!(t.iter().any(|x| x == "baseline"));
    assert!(t.iter().any(|x| x.starts_with("+") && x.contains("% [")), "{t:?}");
    assert!(
        t.iter().any(|x| x.starts_with("\u{2212}") && x.contains("% [")),
        "{t:?}"
    );
    for a in ["base", "fast", "slow"] {
        assert!(t.iter().any(|x| x == a), "legend {a}");
    }
    assert!(has_text(&c.svg, "Throughput (Mbit/s)"));
    assert!(c.svg.matches("<rect").count() >= 3);
}

#[test]
fn rate_sweep_marks_saturation() {
    // Offered 1K, 10K, 100K per flow; achieved saturates at 30K.
    let e = experiment(
        "tcp-rr",
        "--rate",
        &["1000", "10000", "100000"],
        &["default"],
        |p, _, r, run| {
            let offered = [1000.0, 10000.0, 100000.0][p] * run.config.flows as f64;
            run.summary.transactions_per_s = Some(offered.min(30000.0) - r as f64);
        },
    );
    let plots = plots_for_experiment(&e);
    assert!(
        plots.iter().all(|p| p.name != "sweep"),
        "the rate sweep stands for it"
    );
    let r = plots.iter().find(|p| p.name == "rate").expect("a rate sweep");
    check_svg(&r.svg);
    assert!(has_text(&r.svg, "offered (transactions/s: --rate × flows)"));
    assert!(has_text(&r.svg, "achieved (transactions/s)"));
    assert!(has_text(&r.svg, "y = x"));
    assert!(
        has_text(&r.svg, "saturated at 100K offered"),
        "{:?}",
        texts(&r.svg)
    );
}
