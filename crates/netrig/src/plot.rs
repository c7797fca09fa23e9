//! `netrig plot FILE [-o DIR]`: the plots a saved experiment or one test's
//! --json result supports (docs/PLOTS.md), one SVG file each.

use crate::cli::PlotArgs;
use crate::Usage;
use anyhow::{Context, Result};
use netrig_experiment::document::Experiment;
use netrig_report::TestResult;

pub fn plot(a: &PlotArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Usage(format!("{}: not JSON: {e}", a.file.display())))?;
    let plots = if v.get("format").is_some() {
        let e = Experiment::from_json(&text).map_err(|e| Usage(format!("{}: {e}", a.file.display())))?;
        netrig_plot::plots_for_experiment(&e)
    } else {
        let r: TestResult = serde_json::from_value(v).map_err(|e| {
            Usage(format!(
                "{}: neither a netrig experiment nor a test's --json result: {e}",
                a.file.display()
            ))
        })?;
        netrig_plot::plots_for_result(&r)
    };
    if plots.is_empty() {
        eprintln!(
            "nothing to plot in {} (no sweep, arms, intervals or latency histogram)",
            a.file.display()
        );
        return Ok(());
    }
    write(&plots, &a.output, a.png)
}

/// Writes each plot as `DIR/<name>.svg`, and `.png` beside it when `png`;
/// prints their paths: on standard output for `netrig plot`, whose output
/// they are, and on standard error beside a run's (its table, JSON or CSV
/// stays whole on standard output).
pub fn write(plots: &[netrig_plot::Plot], dir: &std::path::Path, png: bool) -> Result<()> {
    write_to(plots, dir, png, false)
}

/// [`write`] beside a run's own output: the paths go to standard error.
pub fn write_beside(plots: &[netrig_plot::Plot], dir: &std::path::Path, png: bool) -> Result<()> {
    write_to(plots, dir, png, true)
}

fn write_to(plots: &[netrig_plot::Plot], dir: &std::path::Path, png: bool, beside: bool) -> Result<()> {
    let say = |p: &std::path::Path| match beside {
        true => eprintln!("plot: {}", p.display()),
        false => println!("{}", p.display()),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for p in plots {
        let path = dir.join(format!("{}.svg", p.name));
        std::fs::write(&path, &p.svg).with_context(|| format!("writing {}", path.display()))?;
        say(&path);
        if png {
            let bytes = netrig_plot::to_png(&p.svg, 2.0).map_err(anyhow::Error::msg)?;
            let path = dir.join(format!("{}.png", p.name));
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
            say(&path);
        }
    }
    Ok(())
}
