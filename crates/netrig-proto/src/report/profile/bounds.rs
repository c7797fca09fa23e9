//! What an agent's profile may hold on the wire: the agent cuts its own to these bounds before
//! it sends it ([`fit`]), and the client checks every one of them, and that the numbers agree
//! with one another, before it puts the agent's profile in its result ([`check`]). A profile
//! comes from a peer: a hostile or broken agent must not make the client hold or print without
//! bound, nor print counts that cannot be.
//!
//! The bounds keep the profile's JSON under about 1.1 MB (the folded stacks' text at most
//! [`MAX_FOLDED_BYTES`], a hundred functions of at most 256 bytes, a dozen groups), well inside
//! the 64 MiB the client takes of an agent's frame, beside the reports of thousands of flows.

use super::{EndProfile, KernelCount, Profiled};

/// The most folded stacks an agent sends: its heaviest. A loopback stream's profile over a few
/// seconds has a few thousand distinct stacks, most of them seen once or twice; the heaviest 500
/// hold nearly all of its samples, and are as many as a flame graph can show apart (the
/// client keeps 2,000 of its own, which cost nothing to send). `folded_total` still counts them all.
pub const MAX_FOLDED: usize = 500;
/// The most bytes of folded-stack text (the `stack` strings together) an agent sends.
pub const MAX_FOLDED_BYTES: usize = 1 << 20;
/// The most top functions an agent sends (the result's own count).
pub const MAX_TOP_FUNCTIONS: usize = 100;
/// The most groups (netrig-profile has twelve).
pub const MAX_GROUPS: usize = 32;
/// The longest name (a function, a process, a group, a frame of a folded stack), in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The most frames of one folded stack (the sampler's own cap on a call chain), beside its
/// process name.
pub const MAX_STACK_FRAMES: usize = 64;
/// The longest reason for a withheld profile, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// The most CPUs a profile may say it sampled, and its highest frequency per CPU.
const MAX_CPUS: u32 = 65_536;
const MAX_FREQUENCY_HZ: u64 = 100_000;

/// Cuts `name` to [`MAX_NAME_BYTES`] at a character boundary, marking the cut.
fn cut_name(name: &mut String) {
    if name.len() > MAX_NAME_BYTES {
        let mut end = MAX_NAME_BYTES - 3;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        name.push_str("...");
    }
}

/// The agent's profile cut to what the wire takes: the heaviest [`MAX_FOLDED`] stacks within
/// [`MAX_FOLDED_BYTES`], each of at most [`MAX_STACK_FRAMES`] frames (the leaf's side kept, as
/// the sampler keeps it), every name at most [`MAX_NAME_BYTES`].
pub fn fit(p: &mut Profiled) {
    p.top_functions.truncate(MAX_TOP_FUNCTIONS);
    for f in &mut p.top_functions {
        cut_name(&mut f.name);
    }
    p.groups.truncate(MAX_GROUPS);
    for g in &mut p.groups {
        cut_name(&mut g.group);
    }
    let mut bytes = 0;
    let mut kept = Vec::with_capacity(p.folded.len().min(MAX_FOLDED));
    for mut s in std::mem::take(&mut p.folded).into_iter().take(MAX_FOLDED) {
        let mut parts: Vec<String> = s.stack.split(';').map(str::to_string).collect();
        if parts.len() > MAX_STACK_FRAMES + 1 {
            // The process name, then the frames nearest the leaf.
            parts.drain(1..parts.len() - MAX_STACK_FRAMES);
        }
        parts.iter_mut().for_each(cut_name);
        s.stack = parts.join(";");
        bytes += s.stack.len();
        if bytes > MAX_FOLDED_BYTES {
            break;
        }
        kept.push(s);
    }
    p.folded = kept;
}

/// A bound the agent's profile broke, in words the result can carry as its reason.
fn broke(field: &str, what: impl std::fmt::Display) -> String {
    format!(
        "profile withheld: the agent's profile is past a bound the client holds it to: {field} {what} \
         (netrig's bound on what an agent sends, docs/PROFILE.md)"
    )
}

fn name(field: &str, n: &str) -> Result<(), String> {
    if n.len() > MAX_NAME_BYTES {
        return Err(broke(
            field,
            format!("has a name of {} bytes, over the {MAX_NAME_BYTES}", n.len()),
        ));
    }
    Ok(())
}

fn count(field: &str, n: usize, max: usize) -> Result<(), String> {
    if n > max {
        return Err(broke(field, format!("has {n}, over the {max} an agent sends")));
    }
    Ok(())
}

fn at_most(field: &str, v: u64, what: &str, max: u64) -> Result<(), String> {
    if v > max {
        return Err(broke(field, format!("is {v}, more than {what} ({max})")));
    }
    Ok(())
}

/// A figure that is a count of time or a share: finite and not negative.
fn figure(field: &str, v: f64) -> Result<(), String> {
    if !v.is_finite() || v < 0.0 {
        return Err(broke(field, format!("is {v}, not a finite figure of 0 or more")));
    }
    Ok(())
}

/// Why the agent's end has no profile when its report carries none, though the test asked.
pub const REMOTE_MISSING: &str =
    "profile withheld: the agent's report has no profile, though the test asked for one";

/// The agent's end as the client's result holds it: the profile (or reason) its report
/// carried if it keeps every bound, else withheld saying which bound it broke. Withheld rather
/// than failing the test: the test's own figures do not depend on it.
pub fn admit(remote: Option<EndProfile>) -> EndProfile {
    let withheld = |withheld: String| EndProfile::Withheld { withheld };
    match remote {
        None => withheld(REMOTE_MISSING.into()),
        Some(r) => match check(&r) {
            Ok(()) => r,
            Err(why) => withheld(why),
        },
    }
}

/// Whether the agent's end, as it came in its report, keeps every bound and its numbers agree.
pub fn check(end: &EndProfile) -> Result<(), String> {
    match end {
        EndProfile::Withheld { withheld } => {
            if withheld.len() > MAX_REASON_BYTES {
                return Err(broke(
                    "withheld",
                    format!(
                        "is a reason of {} bytes, over the {MAX_REASON_BYTES}",
                        withheld.len()
                    ),
                ));
            }
            Ok(())
        }
        EndProfile::Profiled(p) => check_profiled(p),
    }
}

fn check_profiled(p: &Profiled) -> Result<(), String> {
    count("folded", p.folded.len(), MAX_FOLDED)?;
    count("top_functions", p.top_functions.len(), MAX_TOP_FUNCTIONS)?;
    count("groups", p.groups.len(), MAX_GROUPS)?;
    name("demand_unit", &p.demand_unit)?;
    if p.cpus == 0 || p.cpus > MAX_CPUS {
        return Err(broke("cpus", format!("is {}, not 1 to {MAX_CPUS}", p.cpus)));
    }
    at_most(
        "frequency_hz",
        p.frequency_hz,
        "the highest rate",
        MAX_FREQUENCY_HZ,
    )?;
    figure("window_s", p.window_s)?;
    at_most("busy_samples", p.busy_samples, "samples", p.samples)?;
    at_most("dropped_samples", p.dropped_samples, "samples", p.samples)?;
    at_most("folded", p.folded.len() as u64, "folded_total", p.folded_total)?;
    let split = [
        p.split.this_test_process,
        p.split.this_test_softirq,
        p.split.rest_process,
        p.split.rest_softirq,
    ];
    let split_samples = split.iter().fold(0u64, |a, c| a.saturating_add(c.samples));
    at_most("split (its samples summed)", split_samples, "samples", p.samples)?;
    for c in &split {
        figure("split's cpu_ms", c.cpu_ms)?;
    }
    let mut group_samples = 0u64;
    for g in &p.groups {
        name("groups' group", &g.group)?;
        group_samples = group_samples.saturating_add(g.samples);
        figure("groups' cpu_ms", g.cpu_ms)?;
        if let Some(s) = g.share_of_busy_pct {
            figure("groups' share_of_busy_pct", s)?;
            if s > 100.0 + 1e-6 {
                return Err(broke("groups' share_of_busy_pct", format!("is {s}, over 100")));
            }
        }
        if let Some(d) = g.demand {
            figure("groups' demand", d)?;
        }
    }
    at_most(
        "groups (their samples summed)",
        group_samples,
        "samples",
        p.samples,
    )?;
    for f in &p.top_functions {
        name("top_functions' name", &f.name)?;
        at_most(
            "top_functions' inclusive_samples",
            f.inclusive_samples,
            "samples",
            p.samples,
        )?;
        at_most(
            "top_functions' self_samples",
            f.self_samples,
            "its inclusive_samples",
            f.inclusive_samples,
        )?;
    }
    check_folded(p)?;
    if let Some(w) = &p.witness {
        figure("witness's sampled_busy_ms", w.sampled_busy_ms)?;
        figure("witness's stat_busy_ms", w.stat_busy_ms)?;
        figure("witness's stat_steal_ms", w.stat_steal_ms)?;
        for (field, v) in [
            ("witness's ratio", w.ratio),
            ("witness's resolution_pct", w.resolution_pct),
            ("witness's band_pct", w.band_pct),
        ] {
            if let Some(v) = v {
                figure(field, v)?;
            }
        }
        if let Some(v) = &w.verdict {
            name("witness's verdict", v)?;
        }
        if let Some(why) = &w.why {
            if why.len() > MAX_REASON_BYTES {
                return Err(broke(
                    "witness's why",
                    format!("is {} bytes, over the {MAX_REASON_BYTES}", why.len()),
                ));
            }
        }
    }
    check_kernel_counts(p)
}

/// The kernel's softirq counts: a CPU list no longer than a host's CPUs may be (the files list
/// possible CPUs, offline ones too, so not `cpus`), a reason no longer than a reason may be.
fn check_kernel_counts(p: &Profiled) -> Result<(), String> {
    let cpus = MAX_CPUS as usize;
    let reason = |field: &str, why: &str| -> Result<(), String> {
        if why.len() > MAX_REASON_BYTES {
            return Err(broke(
                field,
                format!("is a reason of {} bytes, over the {MAX_REASON_BYTES}", why.len()),
            ));
        }
        Ok(())
    };
    match &p.softirqs {
        KernelCount::Counted(c) => count("softirqs' per_cpu", c.per_cpu.len(), cpus)?,
        KernelCount::Withheld { withheld } => reason("softirqs' withheld", withheld)?,
    }
    match &p.softnet {
        KernelCount::Counted(c) => count("softnet's per_cpu", c.per_cpu.len(), cpus)?,
        KernelCount::Withheld { withheld } => reason("softnet's withheld", withheld)?,
    }
    Ok(())
}

fn check_folded(p: &Profiled) -> Result<(), String> {
    let (mut bytes, mut samples) = (0usize, 0u64);
    for s in &p.folded {
        bytes += s.stack.len();
        samples = samples.saturating_add(s.samples);
        let frames = s.stack.split(';').count();
        if frames > MAX_STACK_FRAMES + 1 {
            return Err(broke(
                "folded's stack",
                format!(
                    "has {} frames, over the {MAX_STACK_FRAMES} an agent sends (and its process name)",
                    frames - 1
                ),
            ));
        }
        for f in s.stack.split(';') {
            name("folded's stack", f)?;
        }
    }
    if bytes > MAX_FOLDED_BYTES {
        return Err(broke(
            "folded",
            format!("holds {bytes} bytes of stacks, over the {MAX_FOLDED_BYTES} an agent sends"),
        ));
    }
    at_most("folded (their samples summed)", samples, "samples", p.samples)
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn profiled() -> Profiled {
        Profiled {
            window_s: 2.0,
            cpus: 2,
            frequency_hz: 999,
            samples: 1000,
            busy_samples: 800,
            lost_samples: 0,
            dropped_samples: 0,
            split: ProfileSplit::default(),
            demand_unit: "us/KB".into(),
            groups: vec![ProfileGroup {
                group: "tcp".into(),
                samples: 300,
                cpu_ms: 300.0,
                share_of_busy_pct: Some(37.5),
                demand: Some(0.2),
            }],
            top_functions: vec![ProfileFunction {
                name: "tcp_recvmsg".into(),
                self_samples: 10,
                inclusive_samples: 200,
            }],
            folded: (0..800)
                .map(|i| FoldedStack {
                    stack: format!("netrig;{};tcp_recvmsg", "f".repeat(i % 300 + 1)),
                    samples: 1,
                })
                .collect(),
            folded_total: 5000,
            witness: None,
            throttles: 0,
            softirqs: KernelCount::Counted(SoftirqCounts {
                net_rx: 10,
                net_tx: 1,
                per_cpu: vec![SoftirqCpuCount::default(); 2],
            }),
            softnet: KernelCount::Withheld {
                withheld: "reading /proc/net/softnet_stat: No such file or directory".into(),
            },
        }
    }

    #[test]
    fn a_fitted_profile_keeps_every_bound() {
        let mut p = profiled();
        p.folded[0].stack = format!("netrig;{}", vec!["x"; 100].join(";"));
        p.top_functions[0].name = "é".repeat(200);
        fit(&mut p);
        assert_eq!(p.folded.len(), MAX_FOLDED);
        assert_eq!(p.folded[0].stack.split(';').count(), MAX_STACK_FRAMES + 1);
        assert!(p.top_functions[0].name.len() <= MAX_NAME_BYTES);
        assert!(p.top_functions[0].name.ends_with("..."));
        assert_eq!(check(&EndProfile::Profiled(Box::new(p))), Ok(()));
    }

    /// What breaks a good profile.
    type Breaks = Box<dyn Fn(&mut Profiled)>;

    #[test]
    fn each_bound_and_each_sum_is_named_when_broken() {
        let cases: Vec<(&str, Breaks)> = vec![
            ("folded has 501", Box::new(|p| p.folded.push(p.folded[0].clone()))),
            (
                "busy_samples is 1001, more than samples (1000)",
                Box::new(|p| p.busy_samples = 1001),
            ),
            (
                "top_functions' name has a name of 257 bytes",
                Box::new(|p| p.top_functions[0].name = "a".repeat(257)),
            ),
            (
                "folded's stack has 65 frames",
                Box::new(|p| {
                    p.folded.truncate(1);
                    p.folded[0].stack = format!("netrig;{}", vec!["x"; 65].join(";"));
                }),
            ),
            (
                "top_functions' self_samples",
                Box::new(|p| p.top_functions[0].self_samples = 201),
            ),
            (
                "groups' share_of_busy_pct is NaN",
                Box::new(|p| p.groups[0].share_of_busy_pct = Some(f64::NAN)),
            ),
            (
                "folded (their samples summed)",
                Box::new(|p| {
                    p.folded.truncate(2);
                    p.folded[0].samples = u64::MAX;
                }),
            ),
            ("cpus is 0", Box::new(|p| p.cpus = 0)),
            (
                "softnet's per_cpu has 65537",
                Box::new(|p| {
                    // Past the stacks' checks, which come first.
                    p.folded.truncate(1);
                    p.softnet = KernelCount::Counted(SoftnetCounts {
                        total: Default::default(),
                        per_cpu: vec![Default::default(); 65_537],
                    })
                }),
            ),
            (
                "softirqs' withheld is a reason of 1025 bytes",
                Box::new(|p| {
                    // Past the stacks' checks, which come first.
                    p.folded.truncate(1);
                    p.softirqs = KernelCount::Withheld {
                        withheld: "x".repeat(1025),
                    }
                }),
            ),
            (
                "witness's why is 1025 bytes",
                Box::new(|p| {
                    // Past the stacks' checks, which come first.
                    p.folded.truncate(1);
                    p.witness = Some(ProfileWitness {
                        sampled_busy_ms: 1.0,
                        stat_busy_ms: 1.0,
                        ratio: Some(1.0),
                        stat_steal_ms: 0.0,
                        resolution_pct: Some(2.0),
                        band_pct: Some(5.0),
                        verdict: Some("disagrees".into()),
                        why: Some("y".repeat(1025)),
                    })
                }),
            ),
        ];
        for (want, breaks) in cases {
            let mut p = profiled();
            p.folded.truncate(MAX_FOLDED);
            breaks(&mut p);
            let err = check(&EndProfile::Profiled(Box::new(p))).unwrap_err();
            assert!(err.contains(want) && err.contains("agent"), "{want}: {err}");
        }
        let long = EndProfile::Withheld {
            withheld: "x".repeat(MAX_REASON_BYTES + 1),
        };
        assert!(check(&long)
            .unwrap_err()
            .contains("withheld is a reason of 1025 bytes"));
    }
}
