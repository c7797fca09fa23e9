//! A group of tests started together, as the experiment's table prints it.

use netrig_document::analysis;
use netrig_document::experiment::estimate::Estimate;
use netrig_document::experiment::group::{GroupOutcome, RpmWindow};

/// A round trip in µs as a person reads it.
fn rtt_text(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

/// An estimate as "mean ±half%" with its unit.
fn estimate_text(e: &Estimate) -> String {
    let (v, unit) = match e.metric.as_str() {
        "throughput" => (format!("{:.2}", e.mean), "Mbit/s".to_string()),
        "transactions_per_s" => (format!("{:.1}", e.mean), "trans/s".to_string()),
        m if m.starts_with("latency_") => (rtt_text(e.mean), m.trim_start_matches("latency_").to_string()),
        _ => (format!("{:.2}", e.mean), format!("{} {}", e.metric, e.unit)),
    };
    match e.half_width_pct {
        Some(h) => format!("{v} ±{h:.1}% {unit}"),
        None => format!("{v} {unit}"),
    }
}

/// A group as the experiment's table prints it: per arm each member's headline figures over
/// its runs, and per run when each member started on the group's clock (measured) and the
/// probes' responsiveness, idle and under load, with their windows.
pub fn render(g: &GroupOutcome) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "GROUP {}: {} tests started together ({}); times are seconds on the group's clock, from its start",
        g.name,
        g.members.len(),
        g.members.join(", ")
    );
    for ga in &g.arms {
        let _ = writeln!(out, "  arm {} ({} run(s))", ga.arm, ga.runs.len());
        for me in &ga.members {
            let shown: Vec<String> = me
                .estimates
                .iter()
                .filter(|e| {
                    matches!(
                        e.metric.as_str(),
                        "throughput" | "transactions_per_s" | "latency_p50" | "latency_p99"
                    )
                })
                .map(estimate_text)
                .collect();
            let _ = writeln!(out, "    {:<16} {}", me.member, shown.join("  "));
        }
        for (i, run) in ga.runs.iter().enumerate() {
            let started: Vec<String> = run
                .members
                .iter()
                .map(|m| match (&m.offset_s, &m.error) {
                    (_, Some(e)) => format!("{} failed ({e})", m.member),
                    (Some(o), None) => format!("{} at {o:.3} (asked {:.3})", m.member, m.start_s),
                    (None, None) => format!("{} not placed", m.member),
                })
                .collect();
            let _ = writeln!(out, "    run {}: started {}", i + 1, started.join(", "));
            for r in &run.responsiveness {
                let w = |w: &Option<RpmWindow>, why: &Option<String>| match (w, why) {
                    (Some(w), _) => format!(
                        "{:.0} RPM (mean round trip {}, {} round trips, {:.2}..{:.2} s)",
                        w.rpm,
                        rtt_text(w.mean_rtt_us),
                        w.transactions,
                        w.start_s,
                        w.end_s
                    ),
                    (None, Some(why)) => format!("withheld: {why}"),
                    (None, None) => "withheld".into(),
                };
                let _ = writeln!(
                    out,
                    "      responsiveness of {}: idle {}; under load {}",
                    r.member,
                    w(&r.idle, &r.idle_withheld),
                    w(&r.working, &r.working_withheld)
                );
            }
        }
    }
    for mc in &g.comparisons {
        for c in mc.comparisons.iter().filter(|c| {
            matches!(
                c.metric.as_str(),
                "throughput" | "transactions_per_s" | "latency_p50"
            )
        }) {
            let d = match (c.diff_pct, c.ci_low_pct, c.ci_high_pct) {
                (Some(d), Some(lo), Some(hi)) => format!("{d:+.1}% [{lo:+.1}, {hi:+.1}]"),
                (Some(d), _, _) => format!("{d:+.1}%"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "  {} {} arm {} against {}: {d} {}",
                mc.member,
                c.metric,
                c.arm,
                c.baseline,
                analysis::verdict_text(c)
            );
        }
    }
    out
}
