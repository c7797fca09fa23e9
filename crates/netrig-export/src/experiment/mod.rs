//! The experiment as a person reads it (a table per test, a row per point
//! and arm) and as a spreadsheet reads it (CSV, a row per point and arm).

use netrig_document::analysis::{self, Comparison, Estimate};
use netrig_document::experiment::{ArmOutcome, Experiment, PointOutcome, TestOutcome};
use netrig_document::metric;
use netrig_document::result::TestResult;
use std::fmt::Write;

mod group;
mod lab;
pub mod profile;
mod study;

fn cell(e: Option<&Estimate>, prec: usize) -> String {
    match e {
        Some(e) => match e.half_width_pct {
            Some(h) => format!("{:.prec$} ±{h:.1}%", e.mean),
            None => format!("{:.prec$}", e.mean),
        },
        None => "-".into(),
    }
}

fn delta(c: Option<&Comparison>) -> String {
    let Some(c) = c else { return String::new() };
    let verdict = analysis::verdict_text(c);
    match (c.diff_pct, c.ci_low_pct, c.ci_high_pct) {
        (Some(d), Some(lo), Some(hi)) => format!("{d:+.1}% [{lo:+.1}, {hi:+.1}] {verdict}"),
        (Some(d), _, _) => format!("{d:+.1}% {verdict}"),
        _ => verdict,
    }
}

/// The first run of an arm, for the figures every run shares (sizes).
fn first(a: &ArmOutcome) -> Option<&TestResult> {
    a.runs.first()
}

/// The experiment's tables, a title line each.
/// With a `[lab]`: the lab built and where each arm's runs went.
fn lab_lines(e: &Experiment) -> String {
    let mut out = String::new();
    let Some(lab) = &e.lab else {
        return out;
    };
    let _ = writeln!(
        out,
        "lab {} ({}), built for this plan and removed after it",
        lab["name"].as_str().unwrap_or("?"),
        lab["id"].as_str().unwrap_or("?")
    );
    for w in lab["witness"].as_array().into_iter().flatten() {
        let mbit = |k: &str| {
            w[k].as_f64()
                .map_or("not measured".to_string(), |b| format!("{:.2} Mbit/s", b / 1e6))
        };
        // A direction without a rate (only a delay, say) has no rate to check: said so, rather
        // than "not measured configured".
        let rate = if w["configured_rate_bps"].is_number() {
            format!(
                "{} configured (TCP payload at most {}), {} measured over {} s",
                mbit("configured_rate_bps"),
                mbit("expected_goodput_bps"),
                mbit("measured_goodput_bps"),
                w["stream_s"].as_f64().unwrap_or(0.0)
            )
        } else {
            "no rate configured (none measured)".to_string()
        };
        let _ = writeln!(
            out,
            "  witness {} → {} ({}, {}): {rate}{}{}",
            w["from"].as_str().unwrap_or("?"),
            w["to"].as_str().unwrap_or("?"),
            w["link"].as_str().unwrap_or("?"),
            w["mechanism"].as_str().unwrap_or("?"),
            lab::witness_delay_and_loss(w),
            w["warning"]
                .as_str()
                .or(w["error"].as_str())
                .map(|m| format!("; {m}"))
                .unwrap_or_default()
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in e.tests.iter().flat_map(|t| &t.points).flat_map(|p| &p.arms) {
        if let Some(l) = &a.lab {
            if seen.insert(a.arm.clone()) {
                let _ = writeln!(
                    out,
                    "  arm {}: client in {}, agent in {} at {} ({}{})",
                    a.arm,
                    if l.clients.is_empty() {
                        l.client.clone()
                    } else {
                        format!("each of {} at once", l.clients.join(", "))
                    },
                    l.server,
                    l.address,
                    l.path,
                    l.segment.as_deref().map(|s| format!(" {s}")).unwrap_or_default()
                );
                for c in &l.shape {
                    let mut set = Vec::new();
                    if let Some(r) = c.rate_bps {
                        set.push(format!("rate {:.2} Mbit/s", r as f64 / 1e6));
                    }
                    if let Some(p) = c.limit_packets {
                        set.push(format!("queue {p} packets"));
                    }
                    if let Some(b) = c.limit_bytes {
                        set.push(format!("queue {b} bytes"));
                    }
                    let mut lab_own = c.lab_mechanism.clone();
                    if let Some(e) = &c.element {
                        set.push(format!(
                            "the path element's {}",
                            netrig_lab::arm_path::describe(&e.props)
                        ));
                        lab_own = format!(
                            "{lab_own}, element's {}",
                            netrig_lab::arm_path::describe(&e.lab_props)
                        );
                    } else if set.is_empty() {
                        set.extend(c.apply.iter().map(|a| format!("`{a}`")));
                    }
                    let _ = writeln!(
                        out,
                        "    shaped {} → {} on {}: {} for its runs (the lab's {} put back after each)",
                        c.from,
                        c.to,
                        c.link,
                        set.join(", "),
                        lab_own
                    );
                }
            }
        }
    }
    out
}

/// With several client hosts at once: each arm's clients, each one's part (its mean over the
/// runs), the sum, the start skew and the window the sum holds over.
fn clients_lines(t: &TestOutcome) -> String {
    let mut out = String::new();
    let mut withheld: Vec<&String> = Vec::new();
    for p in &t.points {
        for a in p.arms.iter().filter(|a| !a.clients.is_empty()) {
            let runs = a.clients.len() as f64;
            let mean = |f: &dyn Fn(&netrig_document::experiment::clients::ClientsRun) -> Option<f64>| -> Option<f64> {
                a.clients.iter().map(f).sum::<Option<f64>>().map(|s| s / runs)
            };
            let skews: Vec<f64> = a.clients.iter().filter_map(|c| c.start_skew_s).collect();
            let skew = match skews.iter().copied().reduce(f64::max) {
                Some(max) if skews.len() > 1 => format!(
                    "start skew {:.2} ms (mean {:.2} ms over {} runs)",
                    max * 1e3,
                    skews.iter().sum::<f64>() / skews.len() as f64 * 1e3,
                    skews.len()
                ),
                Some(max) => format!("start skew {:.2} ms", max * 1e3),
                None => "start skew not measured (a client's result has no start time)".into(),
            };
            let window = match (
                mean(&|c| c.overlap.as_ref().map(|o| o.length_s)),
                mean(&|c| c.clients.iter().map(|p| p.elapsed_s).reduce(f64::min)),
            ) {
                (Some(o), Some(w)) => format!(", the sum holds over their common {o:.3} s of {w:.3} s"),
                _ => String::new(),
            };
            let point = match p.point.values.is_empty() {
                true => String::new(),
                false => format!(" at {}", p.point),
            };
            let n = a.clients[0].clients.len();
            let _ = writeln!(out, "arm {}{point}: {n} clients at once, {skew}{window}", a.arm);
            let transactions = a.clients[0].clients[0].transactions_per_s.is_some();
            for k in 0..n {
                let part = |f: &dyn Fn(&netrig_document::experiment::clients::ClientPart) -> f64| {
                    mean(&|c| c.clients.get(k).map(f))
                };
                let host = &a.clients[0].clients[k].host;
                let figure = if transactions {
                    part(&|c| c.transactions_per_s.unwrap_or(0.0)).map(|v| format!("{v:.1} trans/s"))
                } else {
                    part(&|c| c.throughput_bps).map(|v| format!("{:.2} Mbit/s", v / 1e6))
                };
                let offset = part(&|c| c.start_offset_s.unwrap_or(f64::NAN))
                    .filter(|v| v.is_finite())
                    .map(|v| format!(", began +{:.2} ms", v * 1e3))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {host:<10} {}{offset}",
                    figure.unwrap_or_else(|| "-".into())
                );
            }
            for w in a.clients.iter().flat_map(|c| &c.withheld) {
                if !withheld.contains(&w) {
                    withheld.push(w);
                }
            }
        }
    }
    for w in withheld {
        let _ = writeln!(out, "withheld for several clients at once: {w}");
    }
    out
}

pub fn render(e: &Experiment) -> String {
    let mut out = String::new();
    let it = &e.plan.iterations;
    let arms = e.plan.arms();
    let base = &arms[e.plan.baseline()].name;
    let _ = writeln!(
        out,
        "netrig experiment {:?}{}",
        e.plan.name,
        if e.complete { "" } else { " (INCOMPLETE)" }
    );
    if it.max > 1 {
        let _ = writeln!(
            out,
            "each point {}..{} runs, until the {}% interval of the mean is at most {}% of it wide (±{}%); \
             ± is its half-width",
            it.min,
            it.max,
            it.level,
            it.width,
            it.width / 2.0
        );
    }
    if arms.len() > 1 {
        let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        let _ = writeln!(
            out,
            "arms {} ({}); Δ: difference from {base} with its {level}% interval: better or worse when it \
             excludes 0 (significant at {level}%), equal when it lies within ±{width}%, else undetermined",
            names.join(", "),
            match e.plan.order {
                netrig_document::plan::Order::Interleaved => "interleaved round by round",
                netrig_document::plan::Order::Randomised => "in a random order each round",
            },
            level = it.level,
            width = it.width,
        );
        for a in arms.iter().filter(|a| a.baseline.is_some()) {
            let _ = writeln!(
                out,
                "  arm {}: Δ against {} (its own baseline)",
                a.name,
                a.baseline.as_deref().unwrap_or_default()
            );
        }
    }
    out.push_str(&lab_lines(e));
    for t in &e.tests {
        let _ = writeln!(out);
        if streams(t) {
            render_streams(&mut out, t, arms.len() > 1);
        } else {
            render_transactions(&mut out, t, arms.len() > 1);
        }
        out.push_str(&clients_lines(t));
        out.push_str(&profile::table_lines(t));
    }
    for g in &e.groups {
        let _ = writeln!(out);
        out.push_str(&group::render(g));
    }
    out.push_str(&lab::table_lines(e));
    if let Some(a) = &e.answer {
        out.push_str(&study::render(a));
    }
    if !e.warnings.is_empty() {
        let _ = writeln!(out);
        for w in &e.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
    if let Some(s) = &e.stopped {
        let _ = writeln!(out, "\nstopped early: {s}");
    }
    out.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

fn point_cells(p: &PointOutcome) -> String {
    p.point.values.iter().map(|(_, v)| format!("{v:>8} ")).collect()
}

fn point_header(t: &TestOutcome) -> String {
    t.points
        .first()
        .map(|p| p.point.values.iter().map(|(o, _)| format!("{o:>8} ")).collect())
        .unwrap_or_default()
}

/// Whether `t` is a stream test (netperf's STREAM columns) rather than a
/// request/response one: from its runs, or, before any run completed, from
/// its kind (a stream test that failed first had request/response
/// headings).
fn streams(t: &TestOutcome) -> bool {
    match t.points.iter().flat_map(|p| &p.arms).filter_map(first).next() {
        Some(r) => r.summary.transactions_per_s.is_none(),
        None => matches!(t.kind.as_str(), "tcp-stream" | "tcp-maerts" | "udp-stream"),
    }
}

/// One socket size over an arm's runs: each run's size when its window
/// closed (with -s/-S the size the kernel granted, which then stays; without,
/// where autotuning took it), as the single run's table shows it; a range
/// when the runs differ. (The first run's initial size made two identical
/// arms read 69120 and 2080512.)
fn socket_size(a: &ArmOutcome, receive: bool) -> String {
    let sizes: Vec<u32> = a
        .runs
        .iter()
        .filter_map(|r| {
            let f = r.flows.first()?;
            let (rx, tx) = match f.direction {
                netrig_proto::Direction::Tx => (&f.remote, &f.local),
                netrig_proto::Direction::Rx => (&f.local, &f.remote),
            };
            if receive {
                rx.socket_buffers.final_.rcv
            } else {
                tx.socket_buffers.final_.snd
            }
        })
        .collect();
    match (sizes.iter().min(), sizes.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
        _ => "-".into(),
    }
}

/// Stream tests: netperf's TCP_STREAM columns, a row per point and arm;
/// UDP adds the loss and jitter columns.
fn render_streams(out: &mut String, t: &TestOutcome, compare: bool) {
    let _ = writeln!(
        out,
        "{} {}",
        t.kind.to_uppercase().replace('-', " "),
        t.args.join(" ")
    );
    let sd_unit = t
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .filter_map(first)
        .next()
        .map_or("us/KB".to_string(), |r| r.summary.service_demand.unit.clone());
    let lead = point_header(t);
    let pad = " ".repeat(lead.len());
    // UDP: the kind's key figures beside the throughput.
    let udp = t
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .any(|a| a.estimate("loss").is_some())
        || (t.kind == "udp-stream" && t.points.iter().flat_map(|p| &p.arms).all(|a| a.runs.is_empty()));
    let udp_cells = |a: &str, b: &str| match udp {
        true => format!("{a:<14} {b:<16} "),
        false => String::new(),
    };
    // Widths: sizes 8, elapsed 8, throughput 22, runs 4, CPU 14 each, SD 16 each.
    let _ = writeln!(
        out,
        "{pad}{:<8} {:<8} {:<8} {:<8} {:<22} {}{:>4}  {:<29} {:<33}",
        "Recv",
        "Send",
        "Send",
        "",
        "",
        udp_cells("", ""),
        "",
        "Utilization",
        "Service Demand"
    );
    let _ = writeln!(
        out,
        "{pad}{:<8} {:<8} {:<8} {:<8} {:<22} {}{:>4}  {:<14} {:<14} {:<16} {:<16}",
        "Socket",
        "Socket",
        "Message",
        "Elapsed",
        "",
        udp_cells("", ""),
        "",
        "local",
        "remote",
        "local",
        "remote"
    );
    let _ = writeln!(
        out,
        "{lead}{:<8} {:<8} {:<8} {:<8} {:<22} {}{:>4}  {:<14} {:<14} {:<16} {:<16} Arm{}",
        "Size",
        "Size",
        "Size",
        "Time",
        "Throughput",
        udp_cells("Loss", "Jitter"),
        "Runs",
        "%",
        "%",
        sd_unit,
        sd_unit,
        if compare { "          Δ throughput" } else { "" }
    );
    let _ = writeln!(
        out,
        "{pad}{:<8} {:<8} {:<8} {:<8} {:<22} {}",
        "bytes",
        "bytes",
        "bytes",
        "secs.",
        "10^6bits/s",
        udp_cells("%", "us")
    );
    for p in &t.points {
        for a in &p.arms {
            let Some(r) = first(a) else { continue };
            let elapsed = a.runs.iter().map(|r| r.summary.elapsed_s).sum::<f64>() / a.runs.len() as f64;
            let c = p
                .comparisons
                .iter()
                .find(|c| c.arm == a.arm && c.metric == "throughput");
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {:<22} {}{:>4}  {:<14} {:<14} {:<16} {:<16} {:<12} {}",
                point_cells(p),
                socket_size(a, true),
                socket_size(a, false),
                r.config.message_size,
                elapsed,
                cell(a.estimate("throughput"), 2),
                udp_cells(&cell(a.estimate("loss"), 3), &cell(a.estimate("jitter"), 1)),
                a.runs.len(),
                cell(a.estimate("cpu_local"), 2),
                cell(a.estimate("cpu_remote"), 2),
                cell(a.estimate("sd_local"), 3),
                cell(a.estimate("sd_remote"), 3),
                a.arm,
                delta(c)
            );
        }
    }
    if compare {
        render_stream_changes(out, t);
    }
}

/// A stream test's changes against each arm's baseline beyond throughput — local CPU, local
/// service demand and service demand per packet, each with its interval — and the service
/// demand per packet of every arm (the IPQoS study's table: it multiplied µs/KB by 1.46).
fn render_stream_changes(out: &mut String, t: &TestOutcome) {
    let per_packet = t
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .any(|a| a.estimate("sd_local_packet").is_some());
    let _ = writeln!(
        out,
        "Changes against each arm's baseline (Δ with its interval){}",
        if per_packet {
            "; SD/packet: local CPU µs per TCP segment the local kernel sent (Tcp.OutSegs over the window)"
        } else {
            ""
        }
    );
    let lead = point_header(t);
    let _ = writeln!(
        out,
        "{lead}{:<18} {:<18} {:<24} {:<24} {:<24} {:<16} Δ SD/packet",
        "Arm", "Baseline", "Δ CPU local", "Δ SD local", "Δ throughput", "SD/packet us"
    );
    // The change and its interval only: the verdicts are the main table's.
    let change = |c: Option<&Comparison>| match c.map(|c| (c.diff_pct, c.ci_low_pct, c.ci_high_pct)) {
        Some((Some(d), Some(lo), Some(hi))) => format!("{d:+.1}% [{lo:+.1}, {hi:+.1}]"),
        Some((Some(d), _, _)) => format!("{d:+.1}% (no interval)"),
        _ => "-".into(),
    };
    for p in &t.points {
        for a in &p.arms {
            if a.runs.is_empty() {
                continue;
            }
            let c = |m: &str| p.comparisons.iter().find(|c| c.arm == a.arm && c.metric == m);
            let base = c("throughput")
                .or_else(|| p.comparisons.iter().find(|c| c.arm == a.arm))
                .map_or("-", |c| c.baseline.as_str());
            let _ = writeln!(
                out,
                "{}{:<18} {:<18} {:<24} {:<24} {:<24} {:<16} {}",
                point_cells(p),
                a.arm,
                base,
                change(c("cpu_local")),
                change(c("sd_local")),
                change(c("throughput")),
                cell(a.estimate("sd_local_packet"), 3),
                change(c("sd_local_packet"))
            );
        }
    }
}

/// Request/response tests: transactions/s and latency, a row per point and arm.
fn render_transactions(out: &mut String, t: &TestOutcome, compare: bool) {
    let _ = writeln!(
        out,
        "{} {}",
        t.kind.to_uppercase().replace('-', " "),
        t.args.join(" ")
    );
    let lead = point_header(t);
    // Open loop: what was offered beside what was done, and the failures.
    let open = t
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .any(|a| a.estimate("offered_per_s").is_some());
    let (open_head, errors_head) = match open {
        true => (format!("{:<20} ", "Offered/s"), format!("{:<10} ", "Errors %")),
        false => (String::new(), String::new()),
    };
    let _ = writeln!(
        out,
        "{lead}{open_head}{:<20} {:>4}  {errors_head}{:<16} {:<16} {:<12} {:<12} {:<12} Arm{}",
        "Trans/s",
        "Runs",
        "p50 us",
        "p99 us",
        "CPU local %",
        "CPU remote %",
        "SD us/tran",
        if compare { "          Δ trans/s" } else { "" }
    );
    for p in &t.points {
        for a in &p.arms {
            if a.runs.is_empty() {
                continue;
            }
            let c = p
                .comparisons
                .iter()
                .find(|c| c.arm == a.arm && c.metric == "transactions_per_s");
            let (offered, errors) = match open {
                true => (
                    format!("{:<20} ", cell(a.estimate("offered_per_s"), 0)),
                    format!("{:<10} ", cell(a.estimate("errors_pct"), 2)),
                ),
                false => (String::new(), String::new()),
            };
            let index = t.points.iter().position(|q| std::ptr::eq(q, p));
            let knee = t
                .saturation
                .iter()
                .any(|s| s.arm == a.arm && Some(s.point) == index);
            let _ = writeln!(
                out,
                "{}{offered}{:<20} {:>4}  {errors}{:<16} {:<16} {:<12} {:<12} {:<12} {:<12} {}{}",
                point_cells(p),
                cell(a.estimate("transactions_per_s"), 0),
                a.runs.len(),
                cell(a.estimate("latency_p50"), 1),
                cell(a.estimate("latency_p99"), 1),
                cell(a.estimate("cpu_local"), 1),
                // A kind with one end: the server's host, when an agent watched it.
                cell(a.estimate("cpu_remote").or(a.estimate("cpu_server")), 1),
                cell(a.estimate("sd_local"), 2),
                a.arm,
                delta(c),
                if knee { "  <- saturated" } else { "" }
            );
        }
    }
    let arms = t.points.iter().map(|p| p.arms.len()).max().unwrap_or(0);
    for s in &t.saturation {
        let _ = writeln!(out, "{}", netrig_document::saturation::describe(s, arms));
    }
}

/// One CSV row per test, point and arm: the swept values, the arm, its runs
/// and confidence, each metric's mean and interval, and each comparison
/// with the baseline.
pub fn csv(e: &Experiment) -> Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let swept: Vec<String> = {
        let mut s: Vec<String> = Vec::new();
        for t in &e.tests {
            for (o, _) in t
                .points
                .first()
                .map(|p| p.point.values.clone())
                .unwrap_or_default()
            {
                if !s.contains(&o) {
                    s.push(o);
                }
            }
        }
        s
    };
    // The kind, the swept values and the arms' names are the plan's text (a plan, or a saved
    // experiment, may come from someone else): each passes the spreadsheet guard
    // (netrig_document::cell). A swept option's column keeps its name where it is one (`-m`,
    // `--rate`: scripts look columns up by it, and such a name can compute nothing).
    let text = |s: &str| netrig_document::cell::text(s).into_owned();
    let option_name = |s: &str| {
        let name = s.strip_prefix("--").or_else(|| s.strip_prefix('-'));
        name.is_some_and(|n| {
            n.starts_with(|c: char| c.is_ascii_alphanumeric())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    };
    let mut header = vec!["test".to_string()];
    header.extend(
        swept
            .iter()
            .map(|s| if option_name(s) { s.clone() } else { text(s) }),
    );
    header.extend(["arm", "runs", "confident"].map(String::from));
    for m in metric::METRICS {
        for f in ["mean", "ci_low", "ci_high"] {
            header.push(format!("{}_{f}", m.name));
        }
        for f in ["diff_pct", "diff_ci_low_pct", "diff_ci_high_pct", "verdict"] {
            header.push(format!("{}_{f}", m.name));
        }
    }
    w.write_record(&header).map_err(|e| e.to_string())?;
    let num = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for t in &e.tests {
        for p in &t.points {
            for a in &p.arms {
                let mut row = vec![text(&t.kind)];
                for o in &swept {
                    row.push(
                        p.point
                            .values
                            .iter()
                            .find(|(k, _)| k == o)
                            .map_or(String::new(), |(_, v)| text(v)),
                    );
                }
                row.push(text(&a.arm));
                row.push(a.runs.len().to_string());
                row.push(a.confident.map_or(String::new(), |c| c.to_string()));
                for m in metric::METRICS {
                    let est = a.estimate(m.name);
                    row.push(num(est.map(|e| e.mean)));
                    row.push(num(est.and_then(|e| e.ci_low)));
                    row.push(num(est.and_then(|e| e.ci_high)));
                    let c = p
                        .comparisons
                        .iter()
                        .find(|c| c.arm == a.arm && c.metric == m.name);
                    row.push(num(c.and_then(|c| c.diff_pct)));
                    row.push(num(c.and_then(|c| c.ci_low_pct)));
                    row.push(num(c.and_then(|c| c.ci_high_pct)));
                    row.push(c.map_or(String::new(), |c| format!("{:?}", c.verdict).to_lowercase()));
                }
                w.write_record(&row).map_err(|e| e.to_string())?;
            }
        }
    }
    String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

#[cfg(test)]
mod lab_tests {
    use super::*;

    /// Issue #38: with a lab, the table says which lab, its witness, and where each arm ran.
    #[test]
    fn the_table_names_the_lab_and_where_each_arm_ran() {
        let place = |client: &str, path: &str, address: &str| {
            serde_json::json!({"client": client, "client_ns": format!("nrabc123-{client}"),
                "server": "s1", "path": path, "address": address})
        };
        let arm = |name: &str, lab: serde_json::Value| serde_json::json!({"arm": name, "runs": [], "estimates": [], "confident": null, "lab": lab});
        let e: Experiment = serde_json::from_value(serde_json::json!({
            "format": netrig_document::experiment::FORMAT, "netrig_version": "0", "started_unix_s": 0.0,
            "finished_unix_s": 1.0, "complete": true, "seed": 1, "warnings": [], "commands": [],
            "plan": {"name": "p", "test": [{"kind": "tcp-stream", "args": []}],
                     "arm": [{"name": "veth"}, {"name": "lo", "path": "loopback"}]},
            "lab": {"name": "p-1", "id": "abc123", "witness": [{"from": "c1", "to": "s1",
                "link": "c1-s1", "mechanism": "htb", "configured_rate_bps": 50e6,
                "expected_goodput_bps": 47.82e6, "measured_goodput_bps": 47.7e6, "stream_s": 2.0}]},
            "tests": [{"kind": "tcp-stream", "args": [], "points": [{"point": {"values": []},
                "comparisons": [], "arms": [
                    arm("veth", place("c1", "link", "198.18.0.2:6387")),
                    arm("lo", place("s1", "loopback", "127.0.0.1:6387"))]}]}]
        }))
        .unwrap();
        let t = lab_lines(&e);
        for needle in [
            "lab p-1 (abc123)",
            "witness c1 → s1 (c1-s1, htb): 50.00 Mbit/s configured",
            "47.70 Mbit/s measured over 2 s",
            "arm veth: client in c1, agent in s1 at 198.18.0.2:6387 (link)",
            "arm lo: client in s1, agent in s1 at 127.0.0.1:6387 (loopback)",
        ] {
            assert!(t.contains(needle), "{needle:?} in\n{t}");
        }
        let mut without = e.clone();
        without.lab = None;
        assert_eq!(lab_lines(&without), "");
    }
}

#[cfg(test)]
mod stream_change_tests {
    use super::*;

    /// Issue #39 (IPQoS): a stream experiment with arms shows, beside the throughput table, each
    /// arm's change in local CPU and service demand against its baseline with the interval, and
    /// the service demand per packet.
    #[test]
    fn the_stream_table_shows_cpu_and_service_demand_changes_and_per_packet() {
        let e = netrig_document::fixtures::experiment(
            "tcp-stream",
            "-m",
            &["32", "2920"],
            &["no-qos", "dscp"],
            |_, a, r, run| {
                let f = if a == 1 { 1.2 } else { 1.0 };
                run.summary.service_demand.local = Some(2.0 * f * (1.0 + 0.001 * r as f64));
                run.summary.cpu.local_pct = Some(50.0 * f * (1.0 + 0.001 * r as f64));
            },
        );
        let mut e = e;
        e.plan = netrig_document::plan::Plan::from_toml(
            "name = \"t\"\n[[test]]\nkind = \"tcp-stream\"\n[[arm]]\nname = \"no-qos\"\n[[arm]]\nname = \"dscp\"\n",
        )
        .unwrap();
        let table = render(&e);
        assert!(table.contains("Changes against each arm's baseline"), "{table}");
        assert!(
            table.contains("SD/packet: local CPU µs per TCP segment"),
            "{table}"
        );
        let row = table
            .lines()
            .rev()
            .find(|l| l.contains("dscp") && l.contains("no-qos"))
            .unwrap_or_else(|| panic!("no dscp row against no-qos: {table}"));
        assert!(
            row.contains("+20.0% ["),
            "the CPU and SD changes with intervals: {row}"
        );
    }
}

#[cfg(test)]
mod csv_tests {
    use super::*;

    /// A plan's text reaches the CSV as text: an arm named like a formula gets a `'` before it, a
    /// negative swept value stays a number.
    #[test]
    fn an_arm_named_like_a_formula_is_written_as_text() {
        let e = netrig_document::fixtures::experiment(
            "tcp-stream",
            "-m",
            &["-1", "=1+1"],
            &["plain", "=HYPERLINK(\"http://x\",\"y\")"],
            |_, _, _, _| {},
        );
        let text = csv(&e).unwrap();
        let mut r = ::csv::Reader::from_reader(text.as_bytes());
        let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        let col = |n: &str| head.iter().position(|h| h == n).unwrap();
        let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let arms: Vec<&str> = rows.iter().map(|r| &r[col("arm")]).collect();
        assert!(arms.contains(&"plain"), "{text}");
        assert!(arms.contains(&"'=HYPERLINK(\"http://x\",\"y\")"), "{text}");
        assert!(!arms.iter().any(|a| a.starts_with('=')), "{text}");
        let values: Vec<&str> = rows.iter().map(|r| &r[col("-m")]).collect();
        assert!(values.contains(&"-1") && values.contains(&"'=1+1"), "{values:?}");
        // A swept option's column is named as the option; a saved document's odd name is not.
        let mut odd = e.clone();
        for t in &mut odd.tests {
            for p in &mut t.points {
                p.point.values[0].0 = "=A1".into();
            }
        }
        let head = csv(&odd).unwrap();
        let head = head.lines().next().unwrap();
        assert!(head.starts_with("test,'=A1,arm,"), "{head}");
    }
}
