//! A study's answer, as the experiment's table prints it after its tests.

use netrig_document::experiment::study::Answer;

/// The table's lines for an answer (after the experiment's table).
pub fn render(a: &Answer) -> String {
    let mut s = format!(
        "\nStudy {}{}: {}\n",
        a.study,
        if a.quick {
            " (quick form: the shape, not the figures)"
        } else {
            ""
        },
        a.question
    );
    for line in &a.summary {
        s.push_str(&format!("  {line}\n"));
    }
    s
}
