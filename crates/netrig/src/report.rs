//! `netrig report FILE` (the HTML report of a saved experiment or of a run's JSON), and how every
//! command writes a report: the command line as typed, and the file said.

use crate::{cli, Usage};
use anyhow::{Context, Result};
use netrig_report::TestResult;

/// The command line as typed, for reports.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\*?;&|<>(){}".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes a report and says where.
pub fn write_report(path: &std::path::Path, html: &str) -> Result<()> {
    std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("report {}", path.display());
    Ok(())
}

/// `netrig report FILE`: the HTML report of a saved experiment or a run's JSON.
pub fn report(a: &cli::ReportArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let out = a.output.clone().unwrap_or_else(|| a.file.with_extension("html"));
    let command = format!("netrig report {}  (from {})", a.file.display(), command_line());
    let html = match netrig_experiment::document::Experiment::from_json(&text).map(|mut e| {
        if a.answer_again && e.plan.study.is_some() {
            // The answer is a function of the document's runs alone: derive it again with this
            // netrig's study code (the file itself is left as it is).
            e.answer = netrig_studies::answer(&e);
        }
        e
    }) {
        Ok(e) if a.no_data => {
            netrig_export::html::experiment_report_without_data(&e, &command, &a.file.display().to_string())
        }
        Ok(e) => netrig_export::html::experiment_report(&e, &command),
        Err(_) => {
            let r: TestResult = serde_json::from_str(&text).map_err(|e| {
                Usage(format!(
                    "{}: neither a saved experiment nor a test's --json result ({e})",
                    a.file.display()
                ))
            })?;
            // A kind this build lacks reads as a TCP stream.
            let kind = netrig_kinds::by_name(&r.test)
                .or_else(|| netrig_kinds::by_name("tcp-stream"))
                .expect("tcp-stream is a kind");
            let mut table = kind.table().render(&r);
            if let Some(h) = &r.server_host {
                table.push_str(&netrig_export::table::server_host(h));
            }
            netrig_export::html::run_report(&r, &command, &table)
        }
    };
    write_report(&out, &html)
}
