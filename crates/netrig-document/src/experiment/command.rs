//! What one of an arm's set-up or tear-down commands did, as the experiment keeps it
//! (netrig-experiment's `command` runs them).

use serde::{Deserialize, Serialize};

/// What one command did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRun {
    /// "setup" or "teardown".
    pub phase: String,
    pub arm: String,
    pub command: String,
    /// Exit status; `None` when it was killed (time limit, signal) or did not start.
    pub status: Option<i32>,
    pub seconds: f64,
    /// The end of its combined standard output and error.
    pub output: String,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The lab host it ran in (an arm's `in_host`); absent: this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl CommandRun {
    pub fn ok(&self) -> bool {
        self.status == Some(0) && self.error.is_none()
    }

    /// The failure as a person reads it.
    pub fn failure(&self) -> String {
        let why = match (&self.error, self.status) {
            (Some(e), _) => e.clone(),
            (None, Some(s)) => format!("exit status {s}"),
            (None, None) => "killed".into(),
        };
        let out = self.output.trim_end();
        format!(
            "arm {:?}: {} command `{}` failed ({why}){}",
            self.arm,
            self.phase,
            self.command,
            if out.is_empty() {
                String::new()
            } else {
                format!(":\n{out}")
            }
        )
    }
}
