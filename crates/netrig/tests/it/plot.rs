//! `netrig plot` (issue #10, plots): a real sweep and a real two-flow
//! interval run, saved as JSON, plotted as SVG files.

use crate::helpers::*;

fn plot(file: &std::path::Path, dir: &std::path::Path) -> Vec<String> {
    let o = run(&["plot", file.to_str().unwrap(), "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "netrig plot failed: {}", stderr(&o));
    let paths: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    for p in &paths {
        let svg = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{p}"
        );
    }
    paths
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("netrig-plot-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn plot_of_a_real_sweep() {
    let d = tmp("sweep");
    let o = run(&[
        "tcp-stream",
        "-l",
        "0.2",
        "-m",
        "1K,64K",
        "--iterations",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = d.join("sweep.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let paths = plot(&file, &d.join("out"));
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].ends_with("sweep.svg"));
    let svg = std::fs::read_to_string(&paths[0]).unwrap();
    for t in [
        "Throughput (Mbit/s)",
        "-m (message size, bytes)",
        "1K",
        "64K",
        "default",
    ] {
        assert!(
            svg.contains(&format!(">\n{t}\n<")) || svg.contains(&format!(">{t}<")),
            "{t}"
        );
    }
    assert!(svg.contains("<polyline"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plot_of_a_real_interval_run() {
    let d = tmp("intervals");
    let o = run(&["tcp-stream", "-l", "1.2", "-i", "0.5", "-P", "2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = d.join("run.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let paths = plot(&file, &d);
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].ends_with("timeseries.svg"));
    let svg = std::fs::read_to_string(&paths[0]).unwrap();
    assert!(svg.contains("flow 0 tx") && svg.contains("flow 1 tx"));
    assert!(svg.contains("time (s)"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plot_refuses_what_is_not_a_result() {
    let d = tmp("bad");
    let file = d.join("x.json");
    std::fs::write(&file, "{\"a\": 1}").unwrap();
    let o = run(&["plot", file.to_str().unwrap(), "-o", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("neither a netrig experiment"));
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue #37: the gigabit study's socket-buffer sweep, 64K to 1M (16x),
/// is drawn on a log x axis (64K and 128K a doubling apart, as 512K and
/// 1M), and its PNG renders without "path stroking failed".
#[test]
fn a_size_sweep_is_logarithmic_and_renders_clean() {
    let d = tmp("logsweep");
    let o = run(&[
        "tcp-stream",
        "-l",
        "0.2",
        "-s",
        "64K,128K,256K,512K,1M",
        "--iterations",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = d.join("sweep.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let out = d.join("out");
    let o = run(&[
        "plot",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--png",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("stroking"),
        "the PNG renderer warned: {}",
        stderr(&o)
    );
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    // Each tick label's x.
    let x_of = |label: &str| -> f64 {
        svg.split("<text")
            .filter(|t| {
                t.split_once('>').is_some_and(|(_, b)| {
                    b.trim_start().starts_with(&format!("{label}\n"))
                        || b.trim_start().starts_with(&format!("{label}<"))
                })
            })
            .filter_map(|t| t.split_once(" x=\"")?.1.split_once('"')?.0.parse().ok())
            .next()
            .unwrap_or_else(|| panic!("no tick {label}"))
    };
    let span = x_of("1M") - x_of("64K");
    let gap = x_of("128K") - x_of("64K");
    // Log: one doubling of four, 0.25 of the span; linear: 0.07.
    assert!(gap > 0.2 * span, "64K..128K {gap} px of {span}: not a log axis");
    assert!(out.join("sweep.png").exists());
    let _ = std::fs::remove_dir_all(&d);
}
