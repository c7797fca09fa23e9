//! The `--json` exporter: one document on stdout.

use serde::Serialize;

/// Pretty JSON of any result (a test, or the quick suite).
pub fn to_json<T: Serialize>(result: &T) -> String {
    serde_json::to_string_pretty(result).expect("results always serialize")
}

/// One line of `--json-stream`: `{"event": EVENT, "data": DATA}`, compact,
/// without a newline.
pub fn event_line<T: Serialize>(event: &str, data: &T) -> String {
    #[derive(Serialize)]
    struct Event<'a, T> {
        event: &'a str,
        data: &'a T,
    }
    serde_json::to_string(&Event { event, data }).expect("results always serialize")
}
