//! An experiment's profiles, from its runs' (crate::experiment::profile): each arm's folded
//! stacks merged over its runs, and an arm against its baseline per end, per subsystem group
//! and per function, each figure's difference with its interval over the runs (Welch's t from
//! netrig-stats, as the arms' comparisons: docs/STATISTICS.md). Pure functions.
//!
//! A function's demand is its inclusive CPU time over the window per unit of work, in the unit
//! of the groups' `demand`: its inclusive samples × the run's mean sampling period (the groups'
//! CPU time over their samples), over the run's units of work (read back from a group's own
//! `cpu_ms` and `demand`, which the client made from the same units).

use crate::experiment::profile::{
    ArmEndProfile, ArmProfile, Difference, FunctionDifference, GroupDifference, ProfileDifference, ENDS,
    MAX_ARM_FOLDED,
};
use crate::experiment::ArmOutcome;
use crate::result::profile::{EndProfile, FoldedStack, Profiled};
use crate::result::TestResult;
use netrig_stats::{ConfidenceLevel, Direction};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The functions of each arm a difference lists: the heaviest by inclusive samples summed over
/// the arm's runs (both arms' together, without repeats).
pub const FUNCTIONS_PER_ARM: usize = 30;

fn end_of<'a>(r: &'a TestResult, end: &str) -> Option<&'a EndProfile> {
    let p = r.profile.as_ref()?;
    Some(if end == "remote" { &p.remote } else { &p.local })
}

fn end_of_mut<'a>(r: &'a mut TestResult, end: &str) -> Option<&'a mut EndProfile> {
    let p = r.profile.as_mut()?;
    Some(if end == "remote" {
        &mut p.remote
    } else {
        &mut p.local
    })
}

/// Gathers `arm`'s profiles: per end, the runs profiled and why the others were not, and the
/// runs' folded stacks merged into the arm's (each run's `folded` is emptied, its
/// `folded_total` kept). Idempotent: a run whose stacks were merged already adds nothing again.
/// Nothing for an arm none of whose runs was asked for a profile.
pub fn gather(arm: &mut ArmOutcome) {
    if arm.runs.iter().all(|r| r.profile.is_none()) {
        return;
    }
    let mut profile = arm.profile.take().unwrap_or(ArmProfile {
        local: ArmEndProfile::default(),
        remote: ArmEndProfile::default(),
    });
    for end in ENDS {
        let into = if end == "remote" {
            &mut profile.remote
        } else {
            &mut profile.local
        };
        into.runs = arm.runs.len();
        into.profiled_runs = 0;
        into.samples = 0;
        into.withheld.clear();
        let mut merged: HashMap<String, u64> = into.folded.drain(..).map(|f| (f.stack, f.samples)).collect();
        for r in &mut arm.runs {
            match end_of_mut(r, end) {
                Some(EndProfile::Profiled(p)) => {
                    into.profiled_runs += 1;
                    into.samples += p.samples;
                    for f in p.folded.drain(..) {
                        *merged.entry(f.stack).or_default() += f.samples;
                    }
                }
                Some(EndProfile::Withheld { withheld }) => {
                    if !into.withheld.contains(withheld) {
                        into.withheld.push(withheld.clone());
                    }
                }
                None => {
                    let why = "the run was not profiled".to_string();
                    if !into.withheld.contains(&why) {
                        into.withheld.push(why);
                    }
                }
            }
        }
        into.folded_total = into.folded_total.max(merged.len() as u64);
        let mut folded: Vec<FoldedStack> = merged
            .into_iter()
            .map(|(stack, samples)| FoldedStack { stack, samples })
            .collect();
        folded.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.stack.cmp(&b.stack)));
        folded.truncate(MAX_ARM_FOLDED);
        into.folded = folded;
    }
    arm.profile = Some(profile);
}

/// One run's profile at one end, with what turns its samples into demand.
struct Run<'a> {
    p: &'a Profiled,
    /// The window's units of work (KB or transactions), where it moved any.
    units: Option<f64>,
    /// The mean sampling period, ns.
    period_ns: f64,
}

impl<'a> Run<'a> {
    fn new(p: &'a Profiled) -> Run<'a> {
        let (ms, samples) = p
            .groups
            .iter()
            .fold((0.0, 0u64), |(ms, n), g| (ms + g.cpu_ms, n + g.samples));
        let units = p
            .groups
            .iter()
            .filter_map(|g| Some((g.cpu_ms, g.demand?)))
            .filter(|(ms, d)| *ms > 0.0 && *d > 0.0)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(ms, d)| ms * 1e3 / d);
        Run {
            p,
            units,
            period_ns: if samples > 0 {
                ms * 1e6 / samples as f64
            } else {
                0.0
            },
        }
    }

    fn share(&self, group: &str) -> Option<f64> {
        let s = self
            .p
            .groups
            .iter()
            .find(|g| g.group == group)
            .map_or(0, |g| g.samples);
        (self.p.busy_samples > 0).then(|| s as f64 * 100.0 / self.p.busy_samples as f64)
    }

    fn group_demand(&self, group: &str) -> Option<f64> {
        let ms = self
            .p
            .groups
            .iter()
            .find(|g| g.group == group)
            .map_or(0.0, |g| g.cpu_ms);
        self.units.map(|u| ms * 1e3 / u)
    }

    /// The function's demand, and whether the run's top functions listed it.
    fn function_demand(&self, name: &str) -> Option<(f64, bool)> {
        let f = self.p.top_functions.iter().find(|f| f.name == name);
        let samples = f.map_or(0, |f| f.inclusive_samples);
        self.units
            .map(|u| (samples as f64 * self.period_ns / 1e3 / u, f.is_some()))
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len().max(1) as f64
}

/// `arm`'s samples against `base`'s: the means, the difference and Welch's interval of it.
pub fn difference(base: &[f64], arm: &[f64], level_pct: f64) -> Difference {
    let level = ConfidenceLevel::from_percent(level_pct)
        .unwrap_or_else(|_| ConfidenceLevel::from_percent(95.0).expect("95 % is a level"));
    let (bm, am) = (mean(base), mean(arm));
    let mut d = Difference {
        baseline_mean: bm,
        arm_mean: am,
        difference: am - bm,
        ci_low: None,
        ci_high: None,
        p_value: None,
        excludes_zero: false,
        method: String::new(),
    };
    match netrig_stats::compare(base, arm, Direction::LowerIsBetter, level) {
        Ok(c) => {
            d.ci_low = Some(c.test.difference_ci.low);
            d.ci_high = Some(c.test.difference_ci.high);
            d.p_value = Some(c.test.p_value);
            d.excludes_zero = c.test.significant;
            d.method = "welch".into();
        }
        Err(e) => d.method = format!("no interval: {e}"),
    }
    d
}

/// Why `a`'s runs have no profile at `end`, if none has.
fn none_at(a: &ArmOutcome, end: &str) -> Option<String> {
    if a.runs
        .iter()
        .any(|r| matches!(end_of(r, end), Some(EndProfile::Profiled(_))))
    {
        return None;
    }
    let mut why: Vec<&str> = Vec::new();
    for r in &a.runs {
        let w = match end_of(r, end) {
            Some(EndProfile::Withheld { withheld }) => withheld.as_str(),
            _ => "the run was not profiled",
        };
        if !why.contains(&w) {
            why.push(w);
        }
    }
    if why.is_empty() {
        why.push("it has no runs");
    }
    Some(format!(
        "arm {} has no profile at this end: {}",
        a.arm,
        why.join("; ")
    ))
}

fn runs_at<'a>(a: &'a ArmOutcome, end: &str) -> Vec<Run<'a>> {
    a.runs
        .iter()
        .filter_map(|r| end_of(r, end).and_then(|e| e.profiled()))
        .map(Run::new)
        .collect()
}

/// `arm` against `base` at each end where either was profiled; nothing where neither arm's
/// runs were asked for a profile.
pub fn differences(base: &ArmOutcome, arm: &ArmOutcome, level_pct: f64) -> Vec<ProfileDifference> {
    let asked = |a: &ArmOutcome| a.runs.iter().any(|r| r.profile.is_some());
    if !asked(base) && !asked(arm) {
        return Vec::new();
    }
    ENDS.iter()
        .map(|end| {
            let (b, a) = (runs_at(base, end), runs_at(arm, end));
            let mut d = ProfileDifference {
                arm: arm.arm.clone(),
                baseline: base.arm.clone(),
                end: end.to_string(),
                level: level_pct,
                withheld: None,
                baseline_runs: b.len(),
                arm_runs: a.len(),
                demand_unit: None,
                groups: Vec::new(),
                functions: Vec::new(),
            };
            d.withheld = none_at(base, end).or_else(|| none_at(arm, end)).or_else(|| {
                let units: BTreeSet<&str> = b.iter().chain(&a).map(|r| r.p.demand_unit.as_str()).collect();
                (units.len() > 1).then(|| {
                    format!(
                        "the runs' demand is in different units ({})",
                        units.into_iter().collect::<Vec<_>>().join(", ")
                    )
                })
            });
            if d.withheld.is_none() {
                d.demand_unit = b.first().map(|r| r.p.demand_unit.clone());
                d.groups = groups(&b, &a, level_pct);
                d.functions = functions(&b, &a, level_pct);
            }
            d
        })
        .collect()
}

/// Every group but idle either side sampled, most CPU time first.
fn groups(b: &[Run], a: &[Run], level_pct: f64) -> Vec<GroupDifference> {
    let mut ms: BTreeMap<&str, f64> = BTreeMap::new();
    for r in b.iter().chain(a) {
        for g in r.p.groups.iter().filter(|g| g.group != "idle") {
            *ms.entry(g.group.as_str()).or_default() += g.cpu_ms;
        }
    }
    // A group neither side sampled says nothing.
    let mut names: Vec<(&str, f64)> = ms.into_iter().filter(|(_, ms)| *ms > 0.0).collect();
    names.sort_by(|x, y| y.1.total_cmp(&x.1));
    names
        .into_iter()
        .map(|(g, _)| {
            let of =
                |runs: &[Run], f: &dyn Fn(&Run) -> Option<f64>| runs.iter().filter_map(f).collect::<Vec<_>>();
            let (bs, as_) = (of(b, &|r| r.share(g)), of(a, &|r| r.share(g)));
            let (bd, ad) = (of(b, &|r| r.group_demand(g)), of(a, &|r| r.group_demand(g)));
            GroupDifference {
                group: g.to_string(),
                share_of_busy_pct: difference(&bs, &as_, level_pct),
                demand: (!bd.is_empty() && !ad.is_empty()).then(|| difference(&bd, &ad, level_pct)),
            }
        })
        .collect()
}

/// The heaviest functions of each side, the largest rise in demand first.
fn functions(b: &[Run], a: &[Run], level_pct: f64) -> Vec<FunctionDifference> {
    fn heaviest<'a>(runs: &[Run<'a>]) -> Vec<&'a str> {
        let mut sum: HashMap<&'a str, u64> = HashMap::new();
        for r in runs {
            for f in &r.p.top_functions {
                *sum.entry(f.name.as_str()).or_default() += f.inclusive_samples;
            }
        }
        let mut v: Vec<(&str, u64)> = sum.into_iter().collect();
        v.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(y.0)));
        v.into_iter().take(FUNCTIONS_PER_ARM).map(|(n, _)| n).collect()
    }
    let mut names = heaviest(b);
    for n in heaviest(a) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut out: Vec<FunctionDifference> = names
        .into_iter()
        .filter_map(|name| {
            let of = |runs: &[Run]| -> (Vec<f64>, usize) {
                let v: Vec<(f64, bool)> = runs.iter().filter_map(|r| r.function_demand(name)).collect();
                (v.iter().map(|x| x.0).collect(), v.iter().filter(|x| !x.1).count())
            };
            let ((bd, b_absent), (ad, a_absent)) = (of(b), of(a));
            (!bd.is_empty() && !ad.is_empty()).then(|| FunctionDifference {
                name: name.to_string(),
                demand: difference(&bd, &ad, level_pct),
                baseline_runs_absent: b_absent,
                arm_runs_absent: a_absent,
            })
        })
        .collect();
    out.sort_by(|x, y| y.demand.difference.total_cmp(&x.demand.difference));
    out
}

/// `x` signed, to about 3 significant digits (service demands run from 0.001 us/KB to
/// hundreds of us/tran).
pub fn signed(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let decimals = if x == 0.0 {
        1
    } else {
        (2 - x.abs().log10().floor() as i32).clamp(0, 4) as usize
    };
    format!("{x:+.decimals$}")
}

/// "+4.1 us/KB [+3.6, +4.7]": the difference, its unit and its interval ("no interval: ..."
/// without one).
pub fn difference_text(d: &Difference, unit: &str) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    match (d.ci_low, d.ci_high) {
        (Some(l), Some(h)) => format!("{}{unit} [{}, {}]", signed(d.difference), signed(l), signed(h)),
        _ => format!("{}{unit} ({})", signed(d.difference), d.method),
    }
}

/// Which host an end is.
pub fn end_name(end: &str) -> &'static str {
    if end == "remote" {
        "the agent's host (remote)"
    } else {
        "the client's host (local)"
    }
}

/// The groups and functions whose interval excludes 0, in words: "netfilter +12.3 points of busy
/// CPU [+10.1, +14.5], +0.041 us/KB [+0.030, +0.052]; functions: nft_do_chain +0.040 us/KB
/// [...]", the largest changes first (at most `most` functions); or why it is withheld.
pub fn words(d: &ProfileDifference, most: usize) -> String {
    let head = format!("{} against {} at {}", d.arm, d.baseline, end_name(&d.end));
    if let Some(w) = &d.withheld {
        return format!("{head}: the profile difference is withheld ({w})");
    }
    let unit = d.demand_unit.as_deref().unwrap_or_default();
    let groups: Vec<String> = d
        .groups
        .iter()
        .filter(|g| g.share_of_busy_pct.excludes_zero || g.demand.as_ref().is_some_and(|x| x.excludes_zero))
        .map(|g| {
            let mut s = format!(
                "{} {} points of busy CPU",
                g.group,
                difference_text(&g.share_of_busy_pct, "")
            );
            if let Some(x) = &g.demand {
                s.push_str(&format!(", {}", difference_text(x, unit)));
            }
            s
        })
        .collect();
    let mut fs: Vec<&FunctionDifference> = d.functions.iter().filter(|f| f.demand.excludes_zero).collect();
    fs.sort_by(|x, y| y.demand.difference.abs().total_cmp(&x.demand.difference.abs()));
    let fs: Vec<String> = fs
        .iter()
        .take(most)
        .map(|f| format!("{} {}", f.name, difference_text(&f.demand, unit)))
        .collect();
    let runs = format!(
        "{} runs against {}, {}% intervals",
        d.arm_runs, d.baseline_runs, d.level
    );
    let parts: Vec<String> = [("groups", groups.join("; ")), ("functions", fs.join(", "))]
        .into_iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(what, list)| format!("{what} {list}"))
        .collect();
    if parts.is_empty() {
        return format!("{head}: no group or function differs by an interval that excludes 0 ({runs})");
    }
    format!("{head} ({runs}): {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{experiment, profile};

    /// Two arms of three runs: B's netfilter work is 100 more samples per run (each 1 ms, over
    /// 1,000 KB: +100 us/KB), in nft_do_chain; everything else the same.
    fn two_arms() -> crate::experiment::PointOutcome {
        let e = experiment("tcp-stream", "", &[], &["none", "rules"], |_, a, r, run| {
            let jitter = r as u64 * 3;
            let nf = if a == 1 { 100 + jitter } else { jitter };
            run.profile = Some(profile(
                &[("tcp", 300 + jitter), ("netfilter", nf), ("idle", 500)],
                &[
                    ("tcp_sendmsg", 300 + jitter),
                    ("nft_do_chain", nf),
                    ("idle_loop", 500),
                ],
                1000.0,
            ));
        });
        let mut p = e.tests[0].points[0].clone();
        for a in &mut p.arms {
            gather(a);
        }
        p
    }

    #[test]
    fn an_arm_s_stacks_are_merged_once_and_its_runs_keep_their_figures() {
        let mut p = two_arms();
        let a = &p.arms[1];
        let local = &a.profile.as_ref().unwrap().local;
        assert_eq!((local.profiled_runs, local.runs), (3, 3));
        let samples: u64 = a
            .runs
            .iter()
            .map(|r| r.profile.as_ref().unwrap().local.profiled().unwrap().samples)
            .sum();
        assert_eq!(local.samples, samples);
        let nft = local
            .folded
            .iter()
            .find(|f| f.stack == "netrig;nft_do_chain")
            .unwrap();
        assert_eq!(nft.samples, 100 + 103 + 106, "summed over the runs");
        assert!(a.runs.iter().all(|r| r
            .profile
            .as_ref()
            .unwrap()
            .local
            .profiled()
            .unwrap()
            .folded
            .is_empty()));
        let remote = &a.profile.as_ref().unwrap().remote;
        assert_eq!(remote.profiled_runs, 0);
        assert_eq!(remote.withheld, ["the agent's end is not profiled (test)"]);
        // Again: nothing is added twice.
        let before = p.arms[1].profile.clone();
        gather(&mut p.arms[1]);
        assert_eq!(p.arms[1].profile, before);
    }

    #[test]
    fn the_difference_names_the_group_and_function_that_rose_with_intervals() {
        let p = two_arms();
        let ds = differences(&p.arms[0], &p.arms[1], 95.0);
        assert_eq!(ds.len(), 2);
        let local = &ds[0];
        assert_eq!((local.end.as_str(), local.withheld.as_deref()), ("local", None));
        assert_eq!(local.demand_unit.as_deref(), Some("us/KB"));
        let nf = local.groups.iter().find(|g| g.group == "netfilter").unwrap();
        let d = nf.demand.as_ref().unwrap();
        assert!((d.difference - 100.0).abs() < 1e-9, "{d:?}");
        assert!(
            d.excludes_zero && d.ci_low.unwrap() > 0.0 && d.ci_high.unwrap() > 100.0,
            "{d:?}"
        );
        assert!(nf.share_of_busy_pct.difference > 20.0 && nf.share_of_busy_pct.excludes_zero);
        assert!(local.groups.iter().all(|g| g.group != "idle"), "idle is not busy");
        let tcp = local.groups.iter().find(|g| g.group == "tcp").unwrap();
        assert!(
            !tcp.demand.as_ref().unwrap().excludes_zero,
            "tcp's demand did not change"
        );
        assert!(tcp.share_of_busy_pct.excludes_zero && tcp.share_of_busy_pct.difference < 0.0);
        let f = &local.functions[0];
        assert_eq!(f.name, "nft_do_chain", "the largest rise first");
        assert!((f.demand.difference - 100.0).abs() < 1e-9 && f.demand.excludes_zero);
        let text = words(local, 5);
        assert!(
            text.contains("netfilter +") && text.contains("nft_do_chain +100 us/KB ["),
            "{text}"
        );
        let remote = &ds[1];
        assert!(remote.groups.is_empty());
        assert_eq!(
            remote.withheld.as_deref(),
            Some("arm none has no profile at this end: the agent's end is not profiled (test)")
        );
        assert!(words(remote, 5).contains("withheld"));
    }

    #[test]
    fn an_arm_without_profiles_withholds_and_unprofiled_runs_give_nothing() {
        let mut p = two_arms();
        for r in &mut p.arms[0].runs {
            r.profile = None;
        }
        let ds = differences(&p.arms[0], &p.arms[1], 95.0);
        assert_eq!(
            ds[0].withheld.as_deref(),
            Some("arm none has no profile at this end: the run was not profiled")
        );
        for r in &mut p.arms[1].runs {
            r.profile = None;
        }
        assert!(differences(&p.arms[0], &p.arms[1], 95.0).is_empty());
        let mut one = two_arms();
        one.arms[1].runs.truncate(1);
        let ds = differences(&one.arms[0], &one.arms[1], 95.0);
        let nf = ds[0].groups.iter().find(|g| g.group == "netfilter").unwrap();
        assert!(nf.share_of_busy_pct.ci_low.is_none() && !nf.share_of_busy_pct.excludes_zero);
        assert!(
            nf.share_of_busy_pct.method.starts_with("no interval: "),
            "{:?}",
            nf.share_of_busy_pct
        );
    }

    #[test]
    fn signed_keeps_about_three_digits() {
        assert_eq!(signed(4.123), "+4.12");
        assert_eq!(signed(-0.01234), "-0.0123");
        assert_eq!(signed(123.4), "+123");
        assert_eq!(signed(0.0), "+0.0");
    }
}
