//! Accepts that failed (the agent out of file descriptors, most often),
//! kept so a session whose data connections did not all arrive can tell its
//! client why, not only "55 of 100 arrived".

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many accepts failed since the agent started, and the last failure.
#[derive(Debug, Default)]
pub(crate) struct AcceptFailures {
    count: AtomicU64,
    last: Mutex<Option<Failure>>,
}

#[derive(Debug, Clone)]
struct Failure {
    error: String,
    errno: Option<i32>,
    /// Connections left waiting in the listen queue, when it could be read.
    queued: Option<u32>,
}

impl AcceptFailures {
    /// Records a failed accept; `queued`: the connections still waiting for one.
    pub(crate) fn record(&self, error: &io::Error, queued: Option<u32>) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Failure {
            error: error.to_string(),
            errno: error.raw_os_error(),
            queued,
        });
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Failed accepts so far: pass it to [`Self::since`] later.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// What failed after `count` was `before`, in words, with what to do:
    /// `None` when nothing did.
    pub(crate) fn since(&self, before: u64) -> Option<String> {
        let failed = self.count().saturating_sub(before);
        if failed == 0 {
            return None;
        }
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        let what = match last.queued {
            Some(n) if n > 0 => format!("could not accept {n} connection(s) waiting in its listen queue"),
            _ => "could not accept connections".into(),
        };
        let remedy = match last.errno {
            Some(libc::EMFILE) => format!(
                ": raise its open-file limit (`ulimit -n`{}; LimitNOFILE= in a systemd unit)",
                open_file_limit().map_or(String::new(), |n| format!(", {n} now"))
            ),
            Some(libc::ENFILE) => ": the host's open files are at its limit (sysctl fs.file-max)".into(),
            Some(libc::ENOBUFS | libc::ENOMEM) => ": the host is short of memory".into(),
            _ => String::new(),
        };
        Some(format!(
            "the agent {what} ({failed} failed accept(s), the last: {}){remedy}",
            last.error
        ))
    }
}

/// This process's soft limit on open files.
fn open_file_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid pointer to an initialised struct.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_since_a_count_are_told_with_their_remedy() {
        let f = AcceptFailures::default();
        let before = f.count();
        assert_eq!(f.since(before), None);
        f.record(&io::Error::from_raw_os_error(libc::EMFILE), Some(3));
        f.record(&io::Error::from_raw_os_error(libc::EMFILE), Some(45));
        let told = f.since(before).unwrap();
        assert!(
            told.starts_with(
                "the agent could not accept 45 connection(s) waiting in its listen queue (2 failed"
            ),
            "{told}"
        );
        assert!(told.contains("Too many open files (os error 24)"), "{told}");
        assert!(
            told.contains("raise its open-file limit (`ulimit -n`, "),
            "{told}"
        );
        assert_eq!(f.since(f.count()), None, "nothing since");
        f.record(&io::Error::from_raw_os_error(libc::ENFILE), None);
        let told = f.since(before).unwrap();
        assert!(
            told.starts_with("the agent could not accept connections (3 failed"),
            "{told}"
        );
        assert!(told.contains("fs.file-max"), "{told}");
    }
}
