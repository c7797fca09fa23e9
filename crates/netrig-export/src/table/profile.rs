//! The table's profile section (`--profile`): per end, its groups (share of busy samples and
//! service demand) and its top functions, or why its profile is withheld.

use netrig_document::result::profile::{EndProfile, ProfileResult, Profiled};
use std::fmt::Write;

/// The functions the table lists per end (the result keeps more).
const TOP: usize = 10;

/// The section, after the CPU block; empty without a profile.
pub(crate) fn lines(out: &mut String, p: Option<&ProfileResult>) {
    let Some(p) = p else { return };
    let _ = writeln!(
        out,
        "\nProfile: where each host's busy CPU went over the measured window (perf cpu-clock samples, every CPU)"
    );
    for (end, e) in [("local", &p.local), ("remote", &p.remote)] {
        match e {
            EndProfile::Withheld { withheld } => {
                let _ = writeln!(out, "  {end:<7} withheld: {withheld}");
            }
            EndProfile::Profiled(p) => profiled(out, end, p),
        }
    }
}

fn profiled(out: &mut String, end: &str, p: &Profiled) {
    let witness = p.witness.and_then(|w| w.ratio).map_or_else(
        || "witness withheld".into(),
        |r| format!("sampled/proc/stat busy {r:.2}"),
    );
    let _ = writeln!(
        out,
        "  {end:<7} {} samples over {:.2} s on {} CPUs, {} busy; lost {}, dropped {}; {witness}",
        p.samples, p.window_s, p.cpus, p.busy_samples, p.lost_samples, p.dropped_samples
    );
    let _ = writeln!(out, "    {:<12} {:>8} {:>10}", "group", "% busy", p.demand_unit);
    for g in p.groups.iter().filter(|g| g.samples > 0) {
        let share = g
            .share_of_busy_pct
            .map_or_else(|| "-".into(), |s| format!("{s:.1}"));
        let demand = g.demand.map_or_else(|| "-".into(), |d| format!("{d:.4}"));
        let _ = writeln!(out, "    {:<12} {share:>8} {demand:>10}", g.group);
    }
    let _ = writeln!(out, "    {:>8} {:>8}  top functions (samples)", "self", "incl");
    for f in p.top_functions.iter().take(TOP) {
        let _ = writeln!(
            out,
            "    {:>8} {:>8}  {}",
            f.self_samples, f.inclusive_samples, f.name
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::result::profile::{ProfileFunction, ProfileGroup, ProfileSplit};

    fn group(name: &str, samples: u64, share: Option<f64>, demand: Option<f64>) -> ProfileGroup {
        ProfileGroup {
            group: name.into(),
            samples,
            cpu_ms: samples as f64,
            share_of_busy_pct: share,
            demand,
        }
    }

    #[test]
    fn the_section_lists_groups_with_samples_the_top_ten_and_the_withheld_end() {
        let p = ProfileResult {
            local: EndProfile::Profiled(Box::new(Profiled {
                window_s: 2.0,
                cpus: 2,
                frequency_hz: 999,
                samples: 4000,
                busy_samples: 3000,
                lost_samples: 0,
                dropped_samples: 0,
                split: ProfileSplit::default(),
                demand_unit: "us/KB".into(),
                groups: vec![
                    group("tcp", 1500, Some(50.0), Some(0.25)),
                    group("idle", 1000, None, None),
                    group("netfilter", 0, Some(0.0), Some(0.0)),
                ],
                top_functions: (0..30)
                    .map(|i| ProfileFunction {
                        name: format!("f{i}"),
                        self_samples: 1,
                        inclusive_samples: 100 - i,
                    })
                    .collect(),
                folded: vec![],
                folded_total: 0,
                witness: None,
            })),
            remote: EndProfile::Withheld {
                withheld: "not profiled".into(),
            },
        };
        let mut out = String::new();
        lines(&mut out, Some(&p));
        assert!(out.contains("tcp              50.0     0.2500"), "{out}");
        assert!(out.contains("idle                -          -"), "{out}");
        assert!(
            !out.contains("netfilter"),
            "a group without samples is left out: {out}"
        );
        assert!(out.contains(" f9\n") && !out.contains(" f10\n"), "{out}");
        assert!(out.contains("remote  withheld: not profiled"), "{out}");
        assert!(out.contains("witness withheld"), "{out}");
        let mut none = String::new();
        lines(&mut none, None);
        assert!(none.is_empty());
    }
}
