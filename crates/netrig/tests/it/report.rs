//! The HTML report (issue #10): made from real runs, its numbers the JSON's
//! of the same run, opened in a headless browser with no network.

use crate::helpers::*;
use serde_json::Value;
use std::path::Path;

/// The JSON embedded in a report, unescaped.
fn embedded_json(html: &str) -> Value {
    let start = html.find("<pre id=\"json\">").expect("the JSON is embedded") + "<pre id=\"json\">".len();
    let end = start + html[start..].find("</pre>").unwrap();
    let text = html[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap()
}

/// Opens `page` in headless Chromium inside a network namespace with no
/// interface but loopback down: it must render from the file alone. Returns
/// the DOM after load and the browser's log, or `None` when no browser is
/// installed (outside CI, where .ci/run installs Debian's chromium).
fn browse(page: &Path) -> Option<(String, String)> {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(chromium) = chromium else {
        crate::skip::missing("no chromium (apt-get install chromium)");
        return None;
    };
    let ns = match Netns::create("browser") {
        Ok(ns) => ns,
        Err(e) => {
            crate::skip::missing(format!("needs a network namespace for an offline browser ({e})"));
            return None;
        }
    };
    let profile = page.with_extension("profile");
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.0, chromium])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
            // A wide laptop's window: the report's tables fit in it.
            "--window-size=1400,1000",
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
            &format!("file://{}", page.display()),
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    Some((
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// The page rendered every plot, with no console error.
pub(crate) fn check_in_browser(page: &Path, plots: usize) {
    let Some((dom, log)) = browse(page) else { return };
    assert!(
        dom.contains(&format!("data-plots=\"{plots}\"")),
        "{} plots expected: {}",
        plots,
        &dom[..dom.len().min(400)]
    );
    assert!(
        dom.contains(&format!("data-plots-drawn=\"{plots}\"")),
        "not every plot drew: {}",
        &dom[..dom.len().min(400)]
    );
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(errors.is_empty(), "console: {errors:#?}");
}

#[test]
fn a_runs_report_is_its_json_with_its_plots_offline() {
    let tmp = TempDir::new("report-run");
    let dir = tmp.path().to_path_buf();
    let page = dir.join("run.html");
    let o = run(&[
        "tcp-stream",
        "-l",
        "0.6",
        "-i",
        "0.2",
        "-P",
        "2",
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(embedded_json(&html), json, "the report's JSON is the run's");
    let mbps = format!("{:.2}", json["summary"]["throughput_bps"].as_f64().unwrap() / 1e6);
    assert!(
        html.contains(&mbps),
        "the table's throughput {mbps} is the JSON's"
    );
    assert!(html.contains("id=\"plot-timeseries\""), "the two flows over time");
    assert!(html.contains("flow 0 tx") && html.contains("flow 1 tx"));
    check_in_browser(&page, 1);
}

#[test]
fn sweep_and_comparison_reports_render_offline() {
    let tmp = TempDir::new("report-exp");
    let dir = tmp.path().to_path_buf();
    let sweep = dir.join("sweep.html");
    let o = run(&[
        "tcp-stream",
        "-l",
        "0.2",
        "-m",
        "1K,64K",
        "--iterations",
        "2",
        "--json",
        "--html",
        sweep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = std::fs::read_to_string(&sweep).unwrap();
    assert_eq!(embedded_json(&html), json);
    assert!(html.contains("id=\"plot-sweep\""), "{}", &html[..400]);
    check_in_browser(&sweep, 1);
    let plan = dir.join("cmp.toml");
    std::fs::write(
        &plan,
        "name = \"cmp\"\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.2\"]\n[iterations]\nmax = 2\nmin = 2\n[[arm]]\nname = \"a\"\n[[arm]]\nname = \"b\"\n",
    )
    .unwrap();
    let cmp = dir.join("cmp.html");
    let o = run(&["run", plan.to_str().unwrap(), "--html", cmp.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&cmp).unwrap();
    assert!(html.contains("id=\"plot-compare\""), "{}", &html[..400]);
    let figures = html.matches("<figure class=\"plot\"").count();
    check_in_browser(&cmp, figures);
    // A saved experiment's report without its JSON document (a study's is megabytes): the same
    // page but the document, which it names instead.
    let store = dir.join("store");
    let o = run(&["run", plan.to_str().unwrap(), "--save", store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("the saved experiment");
    let (full, lite) = (dir.join("full.html"), dir.join("lite.html"));
    for (out, extra) in [(&full, None), (&lite, Some("--no-data"))] {
        let mut a = vec!["report", doc.to_str().unwrap(), "-o", out.to_str().unwrap()];
        a.extend(extra);
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (full, lite) = (
        std::fs::read_to_string(&full).unwrap(),
        std::fs::read_to_string(&lite).unwrap(),
    );
    assert!(full.contains("<pre id=\"json\">") && !lite.contains("<pre id=\"json\">"));
    assert!(
        lite.contains(&format!("<code>{}</code>", doc.display())),
        "{lite}"
    );
    assert!(lite.contains("id=\"plot-compare\"") && lite.len() < full.len());
    // A study's answer is derived again from the saved runs with --answer-again (here the
    // answer is taken out of the file first: the report shows it only when derived again).
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(&doc).unwrap()).unwrap();
    saved["plan"]["study"] =
        serde_json::json!({"kind": "ipqos", "question": "What does it cost?", "full_minutes": 1.0});
    saved["answer"] = Value::Null;
    let bare = dir.join("bare.json");
    std::fs::write(&bare, serde_json::to_string(&saved).unwrap()).unwrap();
    let (again, kept) = (dir.join("again.html"), dir.join("kept.html"));
    for (out, extra) in [(&again, Some("--answer-again")), (&kept, None)] {
        let mut a = vec![
            "report",
            bare.to_str().unwrap(),
            "--no-data",
            "-o",
            out.to_str().unwrap(),
        ];
        a.extend(extra);
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let again = std::fs::read_to_string(&again).unwrap();
    assert!(
        again.contains("<section id=\"answer\">") && again.contains("What does it cost?"),
        "{again}"
    );
    // (The plan ran tcp-rr: the IPQoS answer says what it lacks.)
    assert!(again.contains("no tcp-stream test"), "{again}");
    assert!(!std::fs::read_to_string(&kept)
        .unwrap()
        .contains("<section id=\"answer\">"));
    // A saved result's report, later.
    let saved = dir.join("saved.json");
    std::fs::write(&saved, serde_json::to_string(&json).unwrap()).unwrap();
    let o = run(&["report", saved.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(dir.join("saved.html"))
        .unwrap()
        .contains("id=\"plot-sweep\""));
}

/// Issue #37: at 1400 px the experiment's table fits the page (its Arm
/// and Δ columns were cut off behind a scroll bar), and each warning is
/// printed once (it was in the table's text and again in the list).
#[test]
fn an_experiments_report_fits_at_1400px_and_warns_once() {
    let tmp = TempDir::new("report-fit");
    let dir = tmp.path().to_path_buf();
    let plan = dir.join("fit.toml");
    std::fs::write(
        &plan,
        "name = \"fit\"\nbaseline = \"no-qos\"\n[[test]]\nkind = \"tcp-stream\"\nargs = [\"-l\", \"0.2\", \"-s\", \"32K\", \"-S\", \"32K\"]\nsweep = { \"-m\" = [32, 2920] }\n[iterations]\nmax = 2\nmin = 2\nlevel = 99\nwidth = 0.01\n[[arm]]\nname = \"no-qos\"\n[[arm]]\nname = \"empty-chain\"\n[[arm]]\nname = \"dscp-rule\"\n",
    )
    .unwrap();
    let page = dir.join("fit.html");
    let o = run(&[
        "run",
        plan.to_str().unwrap(),
        "--json",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    let warnings: Vec<String> = json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("wider than the 0.01% asked")),
        "a 0.01 % interval asked of two runs warns: {warnings:?}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // The page a person reads, without the JSON embedded at its end.
    let read = &html[..html.find("<pre id=\"json\">").unwrap()];
    for w in &warnings {
        let escaped = w
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#39;");
        assert_eq!(read.matches(&escaped).count(), 1, "printed once: {w}");
    }
    // The table is an HTML table with the arms and the Δ column.
    for t in ["<th>Arm</th>", "Δ throughput", ">dscp-rule</td>"] {
        assert!(html.contains(t), "{t}");
    }
    let figures = html.matches("<figure class=\"plot\"").count();
    check_in_browser(&page, figures);
    let Some((dom, _)) = browse(&page) else { return };
    assert!(
        dom.contains("data-wide=\"\""),
        "a table or line wider than the page at 1400 px: {}",
        &dom[..dom.len().min(600)]
    );
}
