//! An experiment's profiles, as its table and HTML report show them: per point, each arm
//! against its baseline per end (the groups, and the functions whose interval excludes 0, the
//! largest change first), or why the difference is withheld; and how many runs of each arm
//! were profiled. The whole of it is in the document (`profile_differences`, an arm's `profile`).

use netrig_document::experiment::profile::{FunctionDifference, ProfileDifference};
use netrig_document::experiment::{PointOutcome, TestOutcome};
use netrig_document::profile_analysis::{difference_text, end_name, signed};
use std::fmt::Write;

/// The functions the table lists per difference.
const TOP: usize = 10;

/// The functions of `d` whose interval excludes 0, the largest change first.
fn changed(d: &ProfileDifference) -> Vec<&FunctionDifference> {
    let mut fs: Vec<&FunctionDifference> = d.functions.iter().filter(|f| f.demand.excludes_zero).collect();
    fs.sort_by(|x, y| y.demand.difference.abs().total_cmp(&x.demand.difference.abs()));
    fs
}

/// The table's section for test `t`: empty where no run was profiled.
pub fn table_lines(t: &TestOutcome) -> String {
    let mut out = String::new();
    for p in &t.points {
        point_lines(&mut out, p);
    }
    out
}

fn point_lines(out: &mut String, p: &PointOutcome) {
    let profiled: Vec<String> = p
        .arms
        .iter()
        .filter_map(|a| {
            let pr = a.profile.as_ref()?;
            Some(format!(
                "{} {}/{} local, {}/{} remote",
                a.arm, pr.local.profiled_runs, pr.local.runs, pr.remote.profiled_runs, pr.remote.runs
            ))
        })
        .collect();
    if profiled.is_empty() {
        return;
    }
    let point: Vec<String> = p.point.values.iter().map(|(o, v)| format!("{o} {v}")).collect();
    let _ = writeln!(
        out,
        "\nProfile{}: runs profiled per arm: {}",
        if point.is_empty() {
            String::new()
        } else {
            format!(" at {}", point.join(" "))
        },
        profiled.join("; ")
    );
    for d in &p.profile_differences {
        difference_lines(out, d);
    }
}

fn difference_lines(out: &mut String, d: &ProfileDifference) {
    let head = format!("  {} against {}, {}", d.arm, d.baseline, end_name(&d.end));
    if let Some(w) = &d.withheld {
        let _ = writeln!(out, "{head}: difference withheld: {w}");
        return;
    }
    let unit = d.demand_unit.as_deref().unwrap_or_default();
    let _ = writeln!(
        out,
        "{head}: {} runs against {}, the difference with its {}% interval (* excludes 0)",
        d.arm_runs, d.baseline_runs, d.level
    );
    let _ = writeln!(out, "    {:<12} {:<34} {unit}", "group", "% of busy (points)");
    for g in &d.groups {
        let star = |x: bool| if x { "*" } else { " " };
        let share = format!(
            "{}{}",
            star(g.share_of_busy_pct.excludes_zero),
            difference_text(&g.share_of_busy_pct, "")
        );
        let demand = g.demand.as_ref().map_or_else(
            || "-".into(),
            |x| format!("{}{}", star(x.excludes_zero), difference_text(x, "")),
        );
        let _ = writeln!(out, "    {:<12} {share:<34} {demand}", g.group);
    }
    let fs = changed(d);
    if fs.is_empty() {
        let _ = writeln!(
            out,
            "    functions: none of the heaviest differs by an interval that excludes 0"
        );
    } else {
        let _ = writeln!(
            out,
            "    functions whose interval excludes 0 (inclusive CPU time per unit), the largest first:"
        );
    }
    for f in fs.iter().take(TOP) {
        let _ = writeln!(out, "      {} {}", f.name, difference_text(&f.demand, unit));
    }
    if fs.len() > TOP {
        let _ = writeln!(out, "    ... {} more in the document", fs.len() - TOP);
    }
}

/// The HTML report's section: a table per difference; empty where no run was profiled.
pub fn html(tests: &[TestOutcome], esc: fn(&str) -> String) -> String {
    let mut b = String::new();
    for t in tests {
        for p in &t.points {
            for d in &p.profile_differences {
                let point: Vec<String> = p.point.values.iter().map(|(o, v)| format!("{o} {v}")).collect();
                let _ = writeln!(
                    b,
                    "<h3>{}: {} against {}, {}</h3>",
                    esc(&[t.kind.clone()]
                        .into_iter()
                        .chain(point)
                        .collect::<Vec<_>>()
                        .join(" ")),
                    esc(&d.arm),
                    esc(&d.baseline),
                    esc(end_name(&d.end))
                );
                if let Some(w) = &d.withheld {
                    let _ = writeln!(b, "<p>Withheld: {}</p>", esc(w));
                    continue;
                }
                html_table(&mut b, d, esc);
            }
        }
    }
    if b.is_empty() {
        return b;
    }
    format!(
        "<h2>Profile: the difference between arms</h2>\n<p class=\"muted\">Each figure's mean per arm over its profiled runs, and arm − baseline with its interval (Welch's t); bold: the interval excludes 0.</p>\n{b}"
    )
}

/// A mean, to about 3 significant digits, unsigned.
fn plain(x: f64) -> String {
    let s = signed(x);
    s.strip_prefix('+').map_or(s.clone(), str::to_string)
}

fn html_table(b: &mut String, d: &ProfileDifference, esc: fn(&str) -> String) {
    let unit = esc(d.demand_unit.as_deref().unwrap_or_default());
    let cell = |x: &netrig_document::experiment::profile::Difference, unit: &str| {
        let t = esc(&difference_text(x, unit));
        if x.excludes_zero {
            format!("<strong>{t}</strong>")
        } else {
            t
        }
    };
    let _ = writeln!(
        b,
        "<table><tr><th>group or function</th><th>% of busy: {base}, {arm}, difference (points)</th><th>{unit}: {base}, {arm}, difference</th></tr>",
        base = esc(&d.baseline),
        arm = esc(&d.arm),
    );
    for g in &d.groups {
        let s = &g.share_of_busy_pct;
        let demand = g.demand.as_ref().map_or_else(
            || "-".into(),
            |x| {
                format!(
                    "{}, {}, {}",
                    plain(x.baseline_mean),
                    plain(x.arm_mean),
                    cell(x, "")
                )
            },
        );
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td>{:.1}, {:.1}, {}</td><td>{demand}</td></tr>",
            esc(&g.group),
            s.baseline_mean,
            s.arm_mean,
            cell(s, "")
        );
    }
    for f in changed(d) {
        let x = &f.demand;
        let _ = writeln!(
            b,
            "<tr><td><code>{}</code></td><td></td><td>{}, {}, {}</td></tr>",
            esc(&f.name),
            plain(x.baseline_mean),
            plain(x.arm_mean),
            cell(x, "")
        );
    }
    let _ = writeln!(b, "</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::profile_analysis::{differences, gather};

    fn esc(s: &str) -> String {
        s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    }

    /// Two arms, three runs each; the rules arm spends 100 more samples (1 ms each, over
    /// 1,000 KB) in netfilter's nft_do_chain.
    fn experiment() -> netrig_document::experiment::Experiment {
        let mut e = netrig_document::fixtures::experiment(
            "tcp-stream",
            "",
            &[],
            &["none", "rules"],
            |_, a, r, run| {
                let j = r as u64 * 3;
                let nf = if a == 1 { 100 + j } else { j };
                run.profile = Some(netrig_document::fixtures::profile(
                    &[("tcp", 300 + j), ("netfilter", nf)],
                    &[("tcp_sendmsg", 300 + j), ("nft_do_chain", nf)],
                    1000.0,
                ));
            },
        );
        let p = &mut e.tests[0].points[0];
        p.arms.iter_mut().for_each(gather);
        p.profile_differences = differences(&p.arms[0], &p.arms[1], 95.0);
        e
    }

    #[test]
    fn the_table_and_the_report_hold_the_difference() {
        let e = experiment();
        let table = table_lines(&e.tests[0]);
        assert!(
            table.contains("runs profiled per arm: none 3/3 local, 0/3 remote"),
            "{table}"
        );
        let nf = table
            .lines()
            .find(|l| l.trim_start().starts_with("netfilter"))
            .unwrap_or_else(|| panic!("{table}"));
        assert_eq!(nf.matches("*+").count(), 2, "{nf}");
        assert!(table.contains("      nft_do_chain +100 us/KB ["), "{table}");
        assert!(
            table.contains(
                "the agent's host (remote): difference withheld: arm none has no profile at this end"
            ),
            "{table}"
        );
        let html = html(&e.tests, esc);
        assert!(
            html.contains("<h2>Profile: the difference between arms</h2>"),
            "{html}"
        );
        assert!(
            html.contains("<code>nft_do_chain</code>") && html.contains("<strong>+100 ["),
            "{html}"
        );
        assert!(html.contains("Withheld: arm none has no profile"), "{html}");
        // The whole experiment's table has the section after the test's own block.
        assert!(crate::experiment::render(&e).contains("\nProfile: runs profiled per arm"));
    }

    #[test]
    fn without_profiles_there_is_no_section() {
        let e = netrig_document::fixtures::experiment("tcp-stream", "", &[], &["a", "b"], |_, _, _, _| {});
        assert!(table_lines(&e.tests[0]).is_empty());
        assert!(html(&e.tests, esc).is_empty());
    }
}
