//! A watch of this host for a client (protocol 6, `watch_start` ...
//! `watch_end`): the start snapshot is taken on the session's thread before
//! `watch_started` goes, then a thread of the watch's own samples the levels
//! about once a second until the client ends it, or until the watch's
//! limit, where it takes the end snapshot and stops by itself.

use netrig_metrics::host::{HostView, HostWatch};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the levels (conntrack, sockets by state) are sampled.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct Watch {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<HostView>,
    started: Instant,
    limit: Duration,
}

impl Watch {
    /// Snapshots the host and starts sampling; the watch ends by itself
    /// after `limit`.
    pub(crate) fn start(limit: Duration) -> std::io::Result<Watch> {
        let w = HostWatch::start();
        let started = w.started();
        let (stop, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("netrig-watch".into())
            .spawn(move || sample_until(w, &rx, limit))?;
        Ok(Watch {
            stop,
            thread,
            started,
            limit,
        })
    }

    /// When a client that keeps the session open must have ended the watch:
    /// its limit, and a set-up timeout's grace for the `watch_end`.
    pub(crate) fn hard_deadline(&self, grace: Duration) -> Instant {
        self.started + self.limit + grace
    }

    /// Ends the watch now (or returns what it saw up to its limit).
    pub(crate) fn end(self) -> Result<HostView, String> {
        let _ = self.stop.send(());
        self.thread
            .join()
            .map_err(|_| "the watch's thread panicked".to_string())
    }
}

fn sample_until(mut w: HostWatch, stop: &mpsc::Receiver<()>, limit: Duration) -> HostView {
    loop {
        let left = limit.saturating_sub(w.started().elapsed());
        if left.is_zero() {
            return w.finish(Some(limit.as_secs_f64()));
        }
        match stop.recv_timeout(SAMPLE_EVERY.min(left)) {
            Err(mpsc::RecvTimeoutError::Timeout) if w.started().elapsed() < limit => w.sample(),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return w.finish(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_samples_and_stops_at_its_limit() {
        let w = Watch::start(Duration::from_millis(1500)).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let v = w.end().unwrap();
        assert_eq!(v.limit_s, Some(1.5), "stopped by itself");
        assert!((1.0..2.4).contains(&v.window_s), "{}", v.window_s);
        assert!(v.samples >= 1, "{}", v.samples);
        let w = Watch::start(Duration::from_secs(60)).unwrap();
        let t = Instant::now();
        let v = w.end().unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "ended when asked");
        assert_eq!(v.limit_s, None);
    }
}
