//! Text bound for a CSV cell that a spreadsheet will open.
//!
//! Spreadsheets read a cell that begins with `=`, `+`, `-` or `@` as a formula (and some a tab or a
//! carriage return before one), so a name another party chose (an agent's `--name`, a DNS
//! record's target, a refusal's reason, an arm in a shared plan) could run as one when a user
//! opens netrig's CSV ("CSV injection", OWASP). [`text`] puts a `'` before such a cell, which the
//! spreadsheets show as text and drop from the value; a cell that is a number (`-3.5`, `-1e3`) is
//! left alone, so negative figures stay numbers. Number columns need not pass through it.

use std::borrow::Cow;

/// `s`, with a `'` before it where a spreadsheet would read it as a formula.
pub fn text(s: &str) -> Cow<'_, str> {
    let risky = matches!(
        s.as_bytes().first(),
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r')
    );
    if risky && s.trim().parse::<f64>().is_err() {
        Cow::Owned(format!("'{s}"))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn formulas_become_text_and_numbers_stay_numbers() {
        for (given, written) in [
            ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
            ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
            ("-1+1", "'-1+1"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("-3.5", "-3.5"),
            ("-1e3", "-1e3"),
            ("+7", "+7"),
            ("rack-1", "rack-1"),
            ("", ""),
            ("a=b", "a=b"),
        ] {
            assert_eq!(text(given), written, "{given:?}");
        }
    }
}
