//! Something that watches the measured window from outside the engine: told the instant the
//! window opens and the instant it closes (a profiler samples exactly that window). The engine
//! knows nothing of what watches; the client's `--profile` is one.

use std::sync::Arc;

/// Told when this end's measured window opens and closes, on the sampling thread, right after
/// the window's own marks. Both must return quickly: the run waits for them.
pub trait WindowListener: Send + Sync {
    fn opened(&self);
    fn closed(&self);
}

/// A run plan's listener, if any (a plan is cloned and printed; a listener is neither).
#[derive(Clone, Default)]
pub struct WindowWatch(pub Option<Arc<dyn WindowListener>>);

impl WindowWatch {
    pub(crate) fn opened(&self) {
        if let Some(l) = &self.0 {
            l.opened();
        }
    }

    pub(crate) fn closed(&self) {
        if let Some(l) = &self.0 {
            l.closed();
        }
    }
}

impl std::fmt::Debug for WindowWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "WindowWatch(listener)"
        } else {
            "WindowWatch(none)"
        })
    }
}
