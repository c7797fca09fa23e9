//! The `--json` exporter: one document on stdout.

use serde::Serialize;

/// Pretty JSON of any result (a test, or the quick suite).
pub fn to_json<T: Serialize>(result: &T) -> String {
    serde_json::to_string_pretty(result).expect("results always serialize")
}
