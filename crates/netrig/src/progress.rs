//! A single test's progress on a terminal: a bar with the time left, on
//! stderr, for a timed run longer than a few seconds (as an experiment's
//! runs get one). Never with `--json`, `--json-stream` or `--csv`, nor when
//! stderr is not a terminal. Interim (`-i`) lines are printed through
//! [`Progress::suspend`], so that the bar never cuts into them.

use netrig_export::Format;
use netrig_proto::spec::Limit;
use netrig_proto::TestSpec;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs shorter than this get no bar (it would only flicker).
pub const SHORTEST_S: f64 = 3.0;

/// The run's length to show, if it gets a bar: a table on a terminal, a
/// timed run of at least [`SHORTEST_S`].
pub fn wanted(spec: &TestSpec, format: Format, stderr_is_terminal: bool) -> Option<f64> {
    let Limit::Duration { seconds } = spec.limit else {
        return None;
    };
    (matches!(format, Format::Table) && stderr_is_terminal && seconds >= SHORTEST_S).then_some(seconds)
}

/// "12 s left", or "finishing" once the run's length has passed (the
/// results are being gathered).
pub fn left(length_s: f64, elapsed: Duration) -> String {
    let left = length_s - elapsed.as_secs_f64();
    if left > 0.0 {
        format!("{} s left", left.ceil() as u64)
    } else {
        "finishing".into()
    }
}

/// The bar, redrawn by a thread of its own until dropped.
pub struct Progress {
    bar: indicatif::ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// A bar for `spec`'s run when [`wanted`].
    pub fn start(spec: &TestSpec, format: Format) -> Option<Progress> {
        let length_s = wanted(spec, format, std::io::stderr().is_terminal())?;
        let bar = indicatif::ProgressBar::new((length_s * 1000.0) as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {} {{msg}}",
                spec.kind()
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (bar, stop) = (bar.clone(), stop.clone());
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let e = t0.elapsed();
                    bar.set_position((e.as_millis() as u64).min(bar.length().unwrap_or(0)));
                    bar.set_message(left(length_s, e));
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Some(Progress {
            bar,
            stop,
            ticker: Some(ticker),
        })
    }

    /// Runs `f` (a print on stdout) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(limit: Limit) -> TestSpec {
        let mut s = netrig_run::suite::quick(1.0)[0].clone();
        s.limit = limit;
        s
    }

    #[test]
    fn only_a_long_timed_table_run_on_a_terminal_gets_a_bar() {
        let long = spec(Limit::Duration { seconds: 60.0 });
        assert_eq!(wanted(&long, Format::Table, true), Some(60.0));
        assert_eq!(wanted(&long, Format::Table, false), None);
        for f in [Format::Json, Format::JsonStream, Format::Csv] {
            assert_eq!(wanted(&long, f, true), None);
        }
        assert_eq!(
            wanted(&spec(Limit::Duration { seconds: 2.0 }), Format::Table, true),
            None
        );
        assert_eq!(
            wanted(&spec(Limit::Bytes { bytes: 1 << 30 }), Format::Table, true),
            None
        );
    }

    #[test]
    fn the_time_left_counts_down_then_says_finishing() {
        assert_eq!(left(60.0, Duration::ZERO), "60 s left");
        assert_eq!(left(60.0, Duration::from_millis(59_100)), "1 s left");
        assert_eq!(left(60.0, Duration::from_secs(61)), "finishing");
    }
}
