//! The table's profile section (`--profile`): per end, its witness, softirq's share of the
//! busy samples beside the kernel's counts of network softirq work, its groups (share of busy
//! samples and service demand) and its top functions, or why its profile is withheld.

use netrig_document::result::profile::{EndProfile, KernelCount, ProfileResult, ProfileWitness, Profiled};
use netrig_document::result::server_host::thousands;
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
    let _ = writeln!(
        out,
        "  {end:<7} {} samples over {:.2} s on {} CPUs, {} busy; lost {}, dropped {}, throttled {}",
        p.samples, p.window_s, p.cpus, p.busy_samples, p.lost_samples, p.dropped_samples, p.throttles
    );
    let _ = writeln!(out, "    {}", witness(p.witness.as_ref()));
    let _ = writeln!(out, "    {}", softirq(p));
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

/// The witness in a line: the two busy times, the ratio, the band and the verdict, with the
/// reason where it does not agree.
fn witness(w: Option<&ProfileWitness>) -> String {
    let Some(w) = w else {
        return "witness withheld: /proc/stat was not read at both edges of the window".into();
    };
    let ratio = w.ratio.map_or_else(|| "-".into(), |r| format!("{r:.2}"));
    let head = format!(
        "witness: sampled busy {:.0} ms against /proc/stat's {:.0} ms, {ratio}",
        w.sampled_busy_ms, w.stat_busy_ms
    );
    let resolves = w.resolution_pct.map_or_else(String::new, |r| {
        format!(" (/proc/stat resolves ±{r:.1} % over this window)")
    });
    match (w.verdict.as_deref(), w.band_pct) {
        (Some("agrees"), Some(band)) => format!("{head}: agrees within ±{band:.1} %{resolves}"),
        (Some(v), _) => format!("{head}: {v}: {}", w.why.as_deref().unwrap_or("no reason given")),
        // A result of a build that did not judge it.
        (None, _) => format!("{head} (not judged)"),
    }
}

/// Softirq's share of the busy samples beside the kernel's counts of network softirq work.
fn softirq(p: &Profiled) -> String {
    let sampled = p.split.this_test_softirq.samples + p.split.rest_softirq.samples;
    let share = if p.busy_samples > 0 {
        format!(" ({:.1} %)", sampled as f64 * 100.0 / p.busy_samples as f64)
    } else {
        String::new()
    };
    let n = |v: u64| thousands(i64::try_from(v).unwrap_or(i64::MAX));
    let softirqs = match &p.softirqs {
        KernelCount::Counted(c) => format!("NET_RX {}, NET_TX {} over the window", n(c.net_rx), n(c.net_tx)),
        KernelCount::Withheld { withheld } => format!("NET_RX and NET_TX withheld: {withheld}"),
    };
    let softnet = match &p.softnet {
        KernelCount::Counted(c) => format!(
            "{} processed, {} dropped, {} squeezed",
            n(c.total.processed),
            n(c.total.dropped),
            n(c.total.time_squeeze)
        ),
        KernelCount::Withheld { withheld } => format!("withheld: {withheld}"),
    };
    format!(
        "softirq: {} of {} busy samples{share}; {softirqs}; softnet: {softnet}",
        n(sampled),
        n(p.busy_samples)
    )
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
                throttles: 0,
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
                softirqs: KernelCount::default(),
                softnet: KernelCount::default(),
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
        assert!(
            out.contains("NET_RX and NET_TX withheld: not counted by the build"),
            "{out}"
        );
        let mut none = String::new();
        lines(&mut none, None);
        assert!(none.is_empty());
    }

    fn judged(ratio: f64, verdict: &str, why: Option<&str>) -> ProfileWitness {
        ProfileWitness {
            sampled_busy_ms: 3962.0,
            stat_busy_ms: 3970.0,
            ratio: Some(ratio),
            stat_steal_ms: 0.0,
            resolution_pct: Some(2.25),
            band_pct: Some(5.0),
            verdict: Some(verdict.into()),
            why: why.map(Into::into),
        }
    }

    #[test]
    fn the_witness_says_its_band_and_why_it_does_not_agree() {
        let agrees = witness(Some(&judged(0.998, "agrees", None)));
        assert_eq!(
            agrees,
            "witness: sampled busy 3962 ms against /proc/stat's 3970 ms, 1.00: agrees within ±5.0 % \
             (/proc/stat resolves ±2.2 % over this window)"
        );
        let no = witness(Some(&judged(
            0.8,
            "disagrees",
            Some("fewer samples than busy time"),
        )));
        assert!(
            no.ends_with("0.80: disagrees: fewer samples than busy time"),
            "{no}"
        );
        let old = ProfileWitness {
            verdict: None,
            band_pct: None,
            resolution_pct: None,
            ..judged(0.99, "", None)
        };
        assert!(witness(Some(&old)).ends_with("0.99 (not judged)"));
    }

    #[test]
    fn softirq_share_sits_beside_the_kernels_counts() {
        let mut p: Profiled = serde_json::from_str(
            r#"{"window_s":2,"cpus":2,"frequency_hz":999,"samples":4000,"busy_samples":3000,
            "lost_samples":0,"dropped_samples":0,"split":{
            "this_test_process":{"samples":900,"cpu_ms":900},"this_test_softirq":{"samples":300,"cpu_ms":300},
            "rest_process":{"samples":2600,"cpu_ms":2600},"rest_softirq":{"samples":150,"cpu_ms":150}},
            "demand_unit":"us/tran","groups":[],"top_functions":[],"folded":[],"folded_total":0,"witness":null,
            "softirqs":{"net_rx":12345,"net_tx":67,"per_cpu":[]},
            "softnet":{"total":{"cpu":0,"processed":12000,"dropped":0,"time_squeeze":3,"received_rps":0,
            "flow_limit_count":0},"per_cpu":[]}}"#,
        )
        .unwrap();
        assert_eq!(
            softirq(&p),
            "softirq: 450 of 3,000 busy samples (15.0 %); NET_RX 12,345, NET_TX 67 over the window; \
             softnet: 12,000 processed, 0 dropped, 3 squeezed"
        );
        p.softnet = KernelCount::Withheld {
            withheld: "reading /proc/net/softnet_stat: No such file or directory".into(),
        };
        assert!(softirq(&p)
            .ends_with("softnet: withheld: reading /proc/net/softnet_stat: No such file or directory"));
    }
}
