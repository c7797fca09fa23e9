//! A study's answer in words, as the document carries it (crate::study; netrig-studies writes it).

use serde::{Deserialize, Serialize};

/// A study's answer, written from the measurements by its module in netrig-studies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The study ("ipqos").
    pub study: String,
    pub question: String,
    /// The answer in a few sentences, each from the figures in `findings`.
    pub summary: Vec<String>,
    /// Each finding: a sentence, what it rests on, and whether the measurements settle it.
    pub findings: Vec<Finding>,
    /// Made from a `--quick` run (fewer points and runs: the shape, not the figures).
    #[serde(default)]
    pub quick: bool,
}

/// One finding of a study's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// What it is about, short ("dscp-rule at -m 32", "scavenger alone").
    pub topic: String,
    /// The sentence.
    pub text: String,
    /// "holds", "does not hold", "tie" (within the interval stated) or "withheld" (with the
    /// reason in `text`).
    pub verdict: String,
    /// The figures it rests on (named, with units in their names).
    #[serde(default)]
    pub figures: serde_json::Map<String, serde_json::Value>,
}
