//! Saved experiments: one JSON document per experiment in a directory,
//! listed and compared; the comparison is the regression gate.

use crate::analysis::{self, Regression};
use crate::document::Experiment;
use crate::metric;
use std::path::{Path, PathBuf};

/// Where results are saved without `--save DIR`.
pub const DEFAULT_DIR: &str = "netrig-results";

/// Largest saved experiment read (a runaway file is refused, not read).
pub const MAX_FILE: u64 = 1 << 30;

/// Saves `e` in `dir` (created if need be) as `<name>-<UTC time>.json`;
/// returns the file's path.
pub fn save(e: &Experiment, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(e.started_unix_s.max(0.0));
    let stamp = humantime::format_rfc3339_seconds(when)
        .to_string()
        .replace(':', "");
    let name: String = e
        .plan
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut path = dir.join(format!("{name}-{stamp}.json"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{name}-{stamp}-{n}.json"));
    }
    let text = serde_json::to_string_pretty(e).map_err(|err| err.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path)
}

/// Reads a saved experiment.
pub fn load(path: &Path) -> Result<Experiment, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{}: {} bytes, more than netrig reads ({MAX_FILE})",
            path.display(),
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Experiment::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One line per saved experiment in `dir`, oldest first: file, name, when,
/// complete or not, tests, points, arms, runs, netrig's version, kernel.
pub fn list(dir: &Path) -> Result<Vec<String>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match load(&f) {
            Ok(e) => {
                let points: usize = e.tests.iter().map(|t| t.points.len()).sum();
                let runs: usize = e
                    .tests
                    .iter()
                    .flat_map(|t| &t.points)
                    .flat_map(|p| &p.arms)
                    .map(|a| a.runs.len())
                    .sum::<usize>()
                    + e.groups
                        .iter()
                        .flat_map(|g| &g.arms)
                        .map(|a| a.runs.len())
                        .sum::<usize>();
                let groups = match e.groups.len() {
                    0 => String::new(),
                    n => format!(", {n} group(s)"),
                };
                // The release (`uname -r`, "6.18.44"), not the build string
                // (`uname -v`, "#1 SMP PREEMPT_DYNAMIC ...").
                let kernel = first_environment(&e)
                    .map(|env| env.kernel.clone())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| "?".into());
                out.push(format!(
                    "{name}  {:<16} {} {}  {} test(s){groups}, {points} point(s), {} arm(s), {runs} run(s)  netrig {}  kernel {kernel}",
                    e.plan.name,
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(e.started_unix_s.max(0.0))
                    ),
                    if e.complete { "complete  " } else { "INCOMPLETE" },
                    e.tests.len(),
                    e.plan.arms().len(),
                    e.netrig_version,
                ));
            }
            Err(err) => out.push(format!("{name}  (not read: {err})")),
        }
    }
    Ok(out)
}

fn first_environment(e: &Experiment) -> Option<&netrig_report::model::measure::Environment> {
    e.tests
        .iter()
        .flat_map(|t| &t.points)
        .flat_map(|p| &p.arms)
        .flat_map(|a| &a.runs)
        .chain(
            e.groups
                .iter()
                .flat_map(|g| &g.arms)
                .flat_map(|a| &a.runs)
                .flat_map(|r| &r.members)
                .filter_map(|m| m.result.as_ref()),
        )
        .find_map(|r| r.environment.local.as_ref())
}

/// What differs between the environments of two experiments' first runs
/// (either end): kernel release and build, CPU, CPUs online, sysctls.
pub fn environment_differences(base: &Experiment, new: &Experiment) -> Vec<String> {
    let end = |e: &Experiment, remote: bool| {
        e.tests
            .iter()
            .flat_map(|t| &t.points)
            .flat_map(|p| &p.arms)
            .flat_map(|a| &a.runs)
            .find_map(|r| {
                if remote {
                    r.environment.remote.clone()
                } else {
                    r.environment.local.clone()
                }
            })
    };
    let mut out = Vec::new();
    for (label, remote) in [("local", false), ("remote", true)] {
        let (Some(a), Some(b)) = (end(base, remote), end(new, remote)) else {
            continue;
        };
        let mut diff = |what: &str, x: String, y: String| {
            if x != y {
                out.push(format!("{label} {what}: {x} → {y}"));
            }
        };
        diff("kernel", a.kernel.clone(), b.kernel.clone());
        diff("kernel build", a.kernel_version.clone(), b.kernel_version.clone());
        diff(
            "CPU",
            a.cpu_model.clone().unwrap_or_default(),
            b.cpu_model.clone().unwrap_or_default(),
        );
        diff(
            "CPUs online",
            a.cpus_online.to_string(),
            b.cpus_online.to_string(),
        );
        for (k, v) in &a.sysctls {
            let w = b.sysctls.get(k).cloned().unwrap_or_else(|| "(absent)".into());
            if *v != w {
                out.push(format!("{label} sysctl {k}: {v} → {w}"));
            }
        }
        for (k, w) in b.sysctls.iter().filter(|(k, _)| !a.sysctls.contains_key(*k)) {
            out.push(format!("{label} sysctl {k}: (absent) → {w}"));
        }
    }
    out
}

/// The regression check of `new` against `base`: every (test, point, arm)
/// both have, for `metric` (or each test's headline), worse by more than
/// `threshold_pct` with significance. Returns every check made.
pub fn compare(
    base: &Experiment,
    new: &Experiment,
    metric: Option<&str>,
    threshold_pct: f64,
    level: f64,
) -> Result<Vec<Regression>, String> {
    if let Some(m) = metric {
        metric::by_name(m).ok_or_else(|| {
            let names: Vec<&str> = metric::METRICS.iter().map(|m| m.name).collect();
            format!("--metric {m} is none of {}", names.join(", "))
        })?;
    }
    let mut out = Vec::new();
    for (bt, nt) in base.tests.iter().zip(&new.tests) {
        if bt.kind != nt.kind {
            continue;
        }
        for bp in &bt.points {
            let Some(np) = nt.points.iter().find(|p| p.point == bp.point) else {
                continue;
            };
            for ba in &bp.arms {
                let Some(na) = np.arms.iter().find(|a| a.arm == ba.arm) else {
                    continue;
                };
                let (Some(first), false) = (ba.runs.first(), na.runs.is_empty()) else {
                    continue;
                };
                let m = match metric {
                    Some(m) => metric::by_name(m).expect("checked above"),
                    None => metric::headline(first),
                };
                let what = format!("{} {} arm {}", bt.kind, bp.point, ba.arm);
                if let Some(r) = analysis::regression(&what, m, &ba.runs, &na.runs, threshold_pct, level) {
                    out.push(r);
                }
            }
        }
    }
    if out.is_empty() {
        return Err("the two experiments have no test, point and arm in common with that metric".into());
    }
    Ok(out)
}
