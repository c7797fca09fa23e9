//! Warnings about peers, a few a second: a peer must not be able to fill
//! the agent's log.

use std::time::{Duration, Instant};

/// Warnings about peers per second, per kind; the rest are counted.
pub(crate) const WARNINGS_PER_SECOND: u32 = 20;

/// At most `WARNINGS_PER_SECOND` warnings of one kind a second; the rest are
/// counted and summed up once the second is over.
pub(crate) struct RateLimit {
    what: &'static str,
    per_second: u32,
    since: Option<Instant>,
    shown: u32,
    suppressed: u64,
}

impl RateLimit {
    pub(crate) const fn new(what: &'static str, per_second: u32) -> Self {
        RateLimit {
            what,
            per_second,
            since: None,
            shown: 0,
            suppressed: 0,
        }
    }

    /// Starts a new second when the last one is over.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self
            .since
            .is_some_and(|s| now.saturating_duration_since(s) >= Duration::from_secs(1))
        {
            if self.suppressed > 0 {
                log::warn!(
                    "{} more warning(s) about {} not shown",
                    self.suppressed,
                    self.what
                );
            }
            self.since = None;
            self.shown = 0;
            self.suppressed = 0;
        }
    }

    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        self.tick(now);
        self.since.get_or_insert(now);
        if self.shown < self.per_second {
            self.shown += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}
