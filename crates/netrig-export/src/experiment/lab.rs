//! A lab's lines in the experiment's table: the witness's delay and loss of each row, and
//! each run's path element counts.

/// The witness's delay check and loss probe of one row (a state file's `witness[]`), as the
/// table's words: empty where neither was configured.
pub fn witness_delay_and_loss(w: &serde_json::Value) -> String {
    let mut out = String::new();
    if let Some(c) = w["configured_rtt_us"].as_f64() {
        out.push_str(&match w["rtt_p50_us"].as_f64() {
            Some(m) => format!(
                "; round trip {:.2} ms measured ({}) against {:.2} ms the configured delays make",
                m / 1e3,
                w["rtt_by"].as_str().unwrap_or("tcp-rr median"),
                c / 1e3
            ),
            None => format!("; round trip not measured ({:.2} ms configured)", c / 1e3),
        });
    }
    if let Some(c) = w["configured_loss_pct"].as_f64() {
        let p = &w["loss_probe"];
        out.push_str(&match (p["measured_pct"].as_f64(), p["sent"].as_u64()) {
            (Some(m), Some(n)) => format!(
                "; loss {m:.2} % measured of {n} UDP datagrams{} against {c} % configured (bound {:.2}–{:.2} %)",
                p["receiver_dropped"]
                    .as_u64()
                    .filter(|r| *r > 0)
                    .map(|r| format!(" ({r} the receiving host dropped for a full socket buffer left out)"))
                    .unwrap_or_default(),
                p["bound_low_pct"].as_f64().unwrap_or(0.0),
                p["bound_high_pct"].as_f64().unwrap_or(0.0)
            ),
            _ => format!("; loss not measured ({c} % configured)"),
        });
    }
    out
}

/// The table's lines: each run's element counts, by test, point and arm.
pub fn table_lines(e: &netrig_document::experiment::Experiment) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for t in &e.tests {
        for p in &t.points {
            for a in &p.arms {
                let at = if p.point.values.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", p.point)
                };
                for (i, r) in a.runs.iter().enumerate() {
                    for c in &r.path_elements {
                        if out.is_empty() {
                            let _ = writeln!(out, "\nThe lab's path elements, per run:");
                        }
                        let _ = writeln!(out, "  {}{at} arm {} run {}: {}", t.kind, a.arm, i + 1, c.line());
                    }
                }
            }
        }
    }
    // A group's members share one window (the group run): its counts once per group run.
    for g in &e.groups {
        for a in &g.arms {
            for (i, r) in a.runs.iter().enumerate() {
                let Some(res) = r.members.iter().find_map(|m| m.result.as_ref()) else {
                    continue;
                };
                for c in &res.path_elements {
                    if out.is_empty() {
                        let _ = writeln!(out, "\nThe lab's path elements, per run:");
                    }
                    let _ = writeln!(
                        out,
                        "  group {} arm {} run {} (one window for all its tests): {}",
                        g.name,
                        a.arm,
                        i + 1,
                        c.line()
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_witness_delay_and_loss_read_as_words() {
        let w = serde_json::json!({"configured_rtt_us": 10000.0, "rtt_p50_us": 10387.0,
            "configured_loss_pct": 10.0, "loss_probe": {"sent": 4901, "measured_pct": 9.06,
            "bound_low_pct": 8.22, "bound_high_pct": 11.78}});
        assert_eq!(
            witness_delay_and_loss(&w),
            "; round trip 10.39 ms measured (tcp-rr median) against 10.00 ms the configured delays make; \
             loss 9.06 % measured of 4901 UDP datagrams against 10 % configured (bound 8.22–11.78 %)"
        );
        assert_eq!(
            witness_delay_and_loss(&serde_json::json!({"rtt_p50_us": 15.0})),
            ""
        );
        // The receiving host's own drops, left out of the figure, are said.
        let w = serde_json::json!({"configured_loss_pct": 10.0, "loss_probe": {"sent": 4904,
            "lost": 2223, "receiver_dropped": 1728, "measured_pct": 10.09,
            "bound_low_pct": 8.23, "bound_high_pct": 11.77}});
        assert_eq!(
            witness_delay_and_loss(&w),
            "; loss 10.09 % measured of 4904 UDP datagrams (1728 the receiving host dropped for a \
             full socket buffer left out) against 10 % configured (bound 8.23–11.77 %)"
        );
        // Measured by udp-rr (the path has loss): the row says so.
        let by = "udp-rr median of the answered requests, --timeout 0.25 s, as the path has loss";
        let w = serde_json::json!({"configured_rtt_us": 10000.0, "rtt_p50_us": 10387.0,
            "rtt_by": by});
        assert_eq!(
            witness_delay_and_loss(&w),
            format!("; round trip 10.39 ms measured ({by}) against 10.00 ms the configured delays make")
        );
    }
}
