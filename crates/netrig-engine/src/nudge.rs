//! Bounded blocking waits without a kernel timer per wait.
//!
//! A worker alone with its flow waits in recv(2), connect(2) and the like
//! on a blocking socket, as netperf does, and must still see the window
//! close, the test abort and its own deadlines. A socket timeout
//! (SO_RCVTIMEO, SO_SNDTIMEO) bounds each wait, but arms and cancels a
//! kernel timer every time the call sleeps: measured, about 3 % of a
//! one-flow tcp-rr's CPU per transaction with both ends on one CPU
//! (2.8 % of service demand, +2.2 % transactions/s).
//!
//! Instead, a worker registers a [`Watch`] and marks each wait with
//! [`Watch::waiting`] (an atomic store of a coarse tick, no clock read); a
//! watchdog thread, running only while watches exist (and [`LINGER`]
//! after the last), ticks every [`TICK`]
//! and sends the thread of a wait that has lasted two ticks or more a
//! signal (SIGURG, whose handler does nothing and is installed without
//! SA_RESTART), so that the call returns EINTR and the worker looks at the
//! clock and its flags, as after a socket timeout. A signal that comes
//! just before the call sleeps is sent again a tick later, for as long as
//! the wait lasts. Waits that end within a tick, which is all of them on a
//! test that runs, cost no signal.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// The watchdog's period: a wait is interrupted after 1 to 2 of them.
pub const TICK: Duration = Duration::from_millis(10);

/// The signal that interrupts a wait. Its default action is to ignore it,
/// so a stray one (with the handler not installed) harms nothing.
const SIGNAL: libc::c_int = libc::SIGURG;
/// Not in a wait.
const IDLE: u64 = u64::MAX;

static TICKS: AtomicU64 = AtomicU64::new(0);

struct Entry {
    thread: libc::pthread_t,
    /// The tick at the start of the current wait; [`IDLE`] between waits.
    since: AtomicU64,
}

/// How long the watchdog outlives the last watch before its thread ends
/// (the next watch starts another): no thread is left behind between runs.
const LINGER: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Watched {
    entries: Vec<Arc<Entry>>,
    /// A watchdog thread is running (or about to).
    running: bool,
}

#[derive(Default)]
struct Dog {
    watched: Mutex<Watched>,
    some: Condvar,
}

impl Dog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The watchdog's state, its signal handler installed; or why it cannot be.
fn dog() -> Result<&'static Dog, String> {
    static DOG: OnceLock<Result<&'static Dog, String>> = OnceLock::new();
    DOG.get_or_init(|| {
        install_handler().map_err(|e| format!("SIGURG handler: {e}"))?;
        Ok(Box::leak(Box::default()))
    })
    .clone()
}

extern "C" fn ignore(_: libc::c_int) {}

/// Installs the handler, unless another one than the default (or ours) is
/// there: this process's SIGURG is then someone else's.
fn install_handler() -> io::Result<()> {
    // SAFETY: sigaction(2) with a zeroed (valid) sigaction, read first to
    // leave another handler alone; the handler does nothing, async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(SIGNAL, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        let ours = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != ours {
            return Err(io::Error::other("another handler is installed"));
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = ours;
        // No SA_RESTART: the interrupted call returns EINTR.
        act.sa_flags = 0;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(SIGNAL, &act, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn watch_over(dog: &'static Dog) {
    // Started by the first watched worker, maybe a pinned one: its ticks
    // belong where the sampler's and the control thread's run.
    if let Err(e) = crate::affinity::unpin_current_thread() {
        log::debug!("the nudge's watchdog keeps its starter's CPUs: {e}");
    }
    loop {
        {
            let mut w = dog.lock();
            if w.entries.is_empty() {
                w = dog
                    .some
                    .wait_timeout(w, LINGER)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                if w.entries.is_empty() {
                    w.running = false;
                    return;
                }
            }
        }
        std::thread::sleep(TICK);
        let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        // Under the lock: a watch leaves the list before its thread can end.
        let w = dog.lock();
        for e in w.entries.iter() {
            let since = e.since.load(Ordering::Relaxed);
            if since != IDLE && now >= since.saturating_add(2) {
                // SAFETY: the thread is alive: its watch is still listed.
                unsafe { libc::pthread_kill(e.thread, SIGNAL) };
            }
        }
    }
}

/// The calling thread's waits, interrupted once they last 1 to 2 [`TICK`]s.
/// Neither `Send` nor `Sync`: the watchdog signals the thread that made it,
/// which must then be alive, so it stays on that thread and is dropped there.
///
/// ```compile_fail
/// fn elsewhere<T: Send>(_: T) {}
/// elsewhere(netrig_engine::nudge::Watch::new().unwrap());
/// ```
pub struct Watch {
    entry: Arc<Entry>,
    dog: &'static Dog,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl Watch {
    /// Watches the calling thread until dropped; an error if this process
    /// cannot (then bound the waits with socket timeouts).
    pub fn new() -> Result<Watch, String> {
        let dog = dog()?;
        let entry = Arc::new(Entry {
            // SAFETY: always safe.
            thread: unsafe { libc::pthread_self() },
            since: AtomicU64::new(IDLE),
        });
        let mut w = dog.lock();
        if !w.running {
            std::thread::Builder::new()
                .name("netrig-nudge".into())
                .spawn(move || watch_over(dog))
                .map_err(|e| format!("watchdog thread: {e}"))?;
            w.running = true;
        }
        w.entries.push(entry.clone());
        dog.some.notify_one();
        Ok(Watch {
            entry,
            dog,
            _this_thread: std::marker::PhantomData,
        })
    }

    /// A wait begins (call it right before the blocking call).
    #[inline]
    pub fn waiting(&self) {
        self.entry
            .since
            .store(TICKS.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// No wait now: nothing to interrupt.
    #[inline]
    pub fn idle(&self) {
        self.entry.since.store(IDLE, Ordering::Relaxed);
    }
}

/// [`Watch::waiting`], where there may be no watch (the waits then have
/// socket timeouts of their own).
#[inline]
pub fn waiting(watch: Option<&Watch>) {
    if let Some(w) = watch {
        w.waiting();
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.dog.lock().entries.retain(|e| !Arc::ptr_eq(e, &self.entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Instant;

    /// A blocking recv(2) with no timeout returns EINTR within a few ticks
    /// while marked waiting, again and again; marked idle, it is left alone.
    #[test]
    fn a_long_wait_is_interrupted_and_an_idle_one_is_not() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let w = Watch::new().unwrap();
        for _ in 0..3 {
            let t = Instant::now();
            w.waiting();
            let e = s.recv(&mut [0; 8]).unwrap_err();
            let took = t.elapsed();
            assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
            assert!(took >= TICK / 2 && took < TICK * 20, "{took:?}");
        }
        // Idle: a wait with a timeout of its own runs to that timeout.
        w.idle();
        s.set_read_timeout(Some(TICK * 5)).unwrap();
        let t = Instant::now();
        let e = s.recv(&mut [0; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert!(t.elapsed() >= TICK * 5, "{:?}", t.elapsed());
        // Dropped: no longer listed, so never signalled again; and with no
        // watch left, the watchdog's thread ends (no thread left behind).
        drop(w);
        let t = Instant::now();
        while dog().unwrap().lock().running {
            assert!(t.elapsed() < LINGER * 5, "the watchdog outlived its watches");
            std::thread::sleep(TICK);
        }
        let w = Watch::new().unwrap();
        assert!(dog().unwrap().lock().running, "started again");
        drop(w);
        let t = Instant::now();
        let e = s.recv(&mut [0; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert!(t.elapsed() >= TICK * 5, "{:?}", t.elapsed());
    }
}
