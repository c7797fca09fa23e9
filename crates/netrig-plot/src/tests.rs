//! Plots from the real runs in netrig-report's fixtures and from small
//! experiment documents built of them.

use super::*;

pub use netrig_document::fixtures::{experiment, fixture, two_option_experiment};

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
    // The arms once each; their dashed CPU lines named by one note.
    assert!(!has_text(svg, "base: CPU local"));
    for l in ["base", "tuned", "CPU local, % of the machine (right axis)"] {
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
            // The flow once in the legend, its colour the same in both panels.
            assert_eq!(t.iter().filter(|x| **x == name).count(), 1, "{t:?}");
            assert!(t.iter().any(|x| x.starts_with("dashed: smoothed RTT")));
        }
    }
    assert!(has_text(svg, "RTT (µs)"));
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
    // Each arm named once, under its bar (no legend to repeat them).
    for a in ["fast", "slow"] {
        assert_eq!(t.iter().filter(|x| *x == a).count(), 1, "{a}: {t:?}");
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

/// Every `<text>` of an SVG with its anchor: (x, y, text).
pub fn placed_texts(svg: &str) -> Vec<(f64, f64, String)> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let attr = |name: &str| -> Option<f64> {
                let (_, r) = t.split_once(&format!(" {name}=\""))?;
                r.split_once('"')?.0.parse().ok()
            };
            let body = t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string();
            Some((attr("x")?, attr("y")?, body))
        })
        .collect()
}

/// The plots' legends sit outside the data: below the x axis's tick
/// labels (issue #37: legends over the IPQoS sweep, the rate sweep, the
/// time series).
#[test]
fn legends_sit_below_the_plotting_area() {
    let ipqos = experiment(
        "tcp-stream",
        "-m",
        &["32", "64", "128", "256", "512", "1024", "2920"],
        &["no-qos", "empty-chain", "dscp-rule"],
        |p, a, r, run| {
            run.summary.throughput_bps = 1e8 * (1 + p) as f64 * (1.0 - 0.05 * a as f64) + 1e6 * r as f64;
            run.summary.cpu.local_pct = Some(50.0 + p as f64);
        },
    );
    let rate = experiment(
        "tcp-rr",
        "--rate",
        &["1000", "10000", "100000"],
        &["one-client", "two-clients"],
        |p, _, r, run| {
            let offered = [1000.0, 10000.0, 100000.0][p] * run.config.flows as f64;
            run.summary.transactions_per_s = Some(offered.min(30000.0) - r as f64);
        },
    );
    let mut plots = plots_for_experiment(&ipqos);
    plots.extend(plots_for_experiment(&rate));
    plots.extend(plots_for_result(&fixture("tcp-stream")));
    let mut checked = 0;
    // A comparison names its bars on the x axis: no legend.
    for p in plots.iter().filter(|p| !p.name.starts_with("compare")) {
        let placed = placed_texts(&p.svg);
        for label in [
            "no-qos",
            "dscp-rule",
            "one-client",
            "two-clients",
            "flow 0 tx",
            "y = x",
        ] {
            let Some(l) = placed.iter().find(|t| t.2 == label) else {
                continue;
            };
            // The x axis's tick labels of the panel the entry is in: the
            // texts just above the x axis's title.
            let ticks_bottom = placed
                .iter()
                .filter(|t| {
                    t.1 < l.1
                        && (t.2 == "time (s)"
                            || t.2.starts_with("-m (")
                            || t.2.starts_with("offered")
                            || t.2.starts_with("arm")
                            || t.2.starts_with("percentile"))
                })
                .map(|t| t.1)
                .fold(f64::NAN, f64::max);
            assert!(
                ticks_bottom.is_finite(),
                "{}: the legend entry {label:?} at y {} is not below its panel's x axis title: {placed:?}",
                p.name,
                l.1
            );
            checked += 1;
        }
    }
    assert!(checked >= 6, "{checked} legend entries checked");
}

/// A sweep of message or buffer sizes spanning 16x or more is drawn on a
/// log x axis (the gigabit study's -s 64K..1M*2 is exactly 16x); evenly
/// spaced values stay linear.
#[test]
fn size_sweeps_of_16x_are_logarithmic() {
    let e = two_option_experiment(
        ("-s", &["64K", "128K", "256K", "512K", "1024K"]),
        ("-P", &["1"]),
        &["a"],
    );
    assert!(sweep::xs(&e.tests[0]).unwrap().3, "64K..1M: log");
    let e = two_option_experiment(("-m", &["1K", "4K", "64K", "128K", "1M"]), ("-P", &["1"]), &["a"]);
    assert!(sweep::xs(&e.tests[0]).unwrap().3, "1K..1M: log");
    let e = two_option_experiment(("-P", &["1", "2", "3", "4", "5"]), ("-m", &["1K"]), &["a"]);
    assert!(!sweep::xs(&e.tests[0]).unwrap().3, "1..5: linear");
    let rates: Vec<String> = (1..=20).map(|i| (i * 100).to_string()).collect();
    let rates: Vec<&str> = rates.iter().map(String::as_str).collect();
    let e = two_option_experiment(("-b", &rates), ("-P", &["1"]), &["a"]);
    assert!(
        !sweep::xs(&e.tests[0]).unwrap().3,
        "100..2000:100 evenly spaced: linear"
    );
}

/// The gigabit study's sweep (-s 5 values x -P 5 values x 2 arms): small
/// multiples, one panel per -P, each arm one colour in every panel, no two
/// series of a panel alike, and a legend of a handful of entries.
#[test]
fn a_sweep_of_many_series_is_small_multiples_with_distinct_colours() {
    let e = two_option_experiment(
        ("-s", &["64K", "128K", "256K", "512K", "1024K"]),
        ("-P", &["1", "2", "3", "4", "5"]),
        &["default-max", "raised-max"],
    );
    let charts = sweep::sweep_charts(&e.tests[0]).expect("a sweep");
    assert_eq!(charts.len(), 5, "a panel per -P");
    for c in &charts {
        let solid: Vec<&Series> = c.series.iter().filter(|s| !s.dashed).collect();
        assert_eq!(solid.len(), 2, "{}: an arm each", c.title);
        let colours: std::collections::BTreeSet<_> = solid
            .iter()
            .map(|s| chart::colour(s.colour))
            .map(|c| (c.0, c.1, c.2))
            .collect();
        assert_eq!(colours.len(), solid.len(), "{}: distinct colours", c.title);
        for s in &solid {
            assert_eq!(
                s.colour,
                if s.label.starts_with("default") { 0 } else { 1 },
                "{}: {}",
                c.title,
                s.label
            );
        }
    }
    let plot = plots_for_experiment(&e)
        .into_iter()
        .find(|p| p.name == "sweep")
        .unwrap();
    check_svg(&plot.svg);
    let t = texts(&plot.svg);
    assert_eq!(
        t.iter().filter(|x| *x == "default-max").count(),
        1,
        "one legend for the panels: {t:?}"
    );
    assert!(
        t.iter().any(|x| x == "-P 1") && t.iter().any(|x| x == "-P 5"),
        "panel titles: {t:?}"
    );
}

/// Colours of the palette and past it are all different.
#[test]
fn colours_are_distinct() {
    let c: std::collections::BTreeSet<_> = (0..24).map(chart::colour).map(|c| (c.0, c.1, c.2)).collect();
    assert_eq!(c.len(), 24);
}

/// Dashed lines leave no zero-length dash (resvg: "path stroking
/// failed"): the rate sweep of a real ia64-shaped run, whose y = x ended
/// in one, and the same with other spans.
#[test]
fn dashed_lines_leave_no_zero_length_dash() {
    // (offered, achieved, p99 ms) of one and two clients, as measured.
    let one = [
        (201.4, 198.0, 24.4),
        (801.4, 801.4, 27.9),
        (1369.7, 1353.4, 25.4),
        (2017.7, 1997.6, 20.9),
    ];
    let two = [
        (414.2, 414.2, 29.4),
        (1593.7, 1590.4, 11.4),
        (2901.1, 2776.8, 49.3),
        (3939.8, 2646.2, 69.5),
    ];
    for k in 0..20 {
        let f = 1.0 + k as f64 * 0.037;
        let mut series = Vec::new();
        for (i, arm) in [&one[..], &two[..]].iter().enumerate() {
            series.push(Series {
                label: format!("arm {i}"),
                colour: i,
                points: arm.iter().map(|p| (p.0 * f, p.1 * f)).collect(),
                ..Series::default()
            });
            series.push(Series {
                label: format!("arm {i}: p99 latency"),
                colour: i,
                points: arm.iter().map(|p| (p.0 * f, p.2)).collect(),
                dashed: true,
                secondary: true,
                ..Series::default()
            });
        }
        let c = Chart {
            title: "rate".into(),
            y2: Some(Axis::default()),
            series,
            diagonal: true,
            ..Chart::default()
        };
        check_svg(&plot("rate", &[c]).unwrap().svg);
    }
}
