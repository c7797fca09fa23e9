//! Where one arm of a rate sweep saturated, as the document carries it (crate::saturation finds it).

use serde::{Deserialize, Serialize};

/// Where one arm of a rate sweep saturated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saturation {
    pub arm: String,
    /// The point (index into the test's points) where it saturated.
    pub point: usize,
    /// That point's swept values, as typed (`[["--rate", "1800"]]`).
    pub values: Vec<(String, String)>,
    /// Requests per second offered there (due in the window / window).
    pub offered_per_s: f64,
    /// Replies (completed transactions) per second there.
    pub replies_per_s: f64,
    /// Which rule it met, in words, with the figures.
    pub reason: String,
    /// The highest offered rate before it that met none of the rules
    /// (`null` when the first point already saturated).
    pub highest_kept_per_s: Option<f64>,
}
