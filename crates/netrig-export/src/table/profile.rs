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
