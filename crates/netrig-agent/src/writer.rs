//! The control connection's writer while a test runs: interval samples and
//! heartbeats go through a bounded queue to a thread of their own, so that
//! a client that stops reading can never block the engine (and so delay the
//! end of the window): when the queue is full, samples are dropped and
//! counted, and the results say how many.
//!
//! A blocked write costs the writer thread, never the test; it gives up when
//! a write has made no progress for [`netrig_proto::conn::WRITE_TIMEOUT`].

use netrig_proto::{encode_frame, AgentMsg};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bytes waiting for the writer, beyond what the socket's own buffer holds:
/// a burst of samples (one frame each, about 15 bytes a flow) rides it out.
const QUEUE_BYTES: usize = 1 << 20;
/// Frames waiting, whatever their size.
const QUEUE_FRAMES: usize = 1024;

/// Where the engine's interval samples go.
#[derive(Clone)]
pub(crate) struct Sink {
    tx: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
    queued: Arc<AtomicUsize>,
}

impl Sink {
    /// Queues a message, or counts it dropped when the queue is full (the
    /// client is not reading) or the writer gave up.
    pub(crate) fn send(&self, msg: &AgentMsg) {
        let frame = encode_frame(msg);
        let len = frame.len();
        if self.queued.fetch_add(len, Ordering::AcqRel) + len > QUEUE_BYTES {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(frame) {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer thread.
pub(crate) struct ControlWriter {
    sink: Option<Sink>,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ControlWriter {
    /// Starts writing to `stream` (a second handle on the control
    /// connection); with `heartbeat`, a heartbeat goes whenever nothing else
    /// did for that long.
    pub(crate) fn start(stream: TcpStream, heartbeat: Option<Duration>) -> std::io::Result<ControlWriter> {
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE_FRAMES);
        let dropped = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicUsize::new(0));
        let in_queue = queued.clone();
        let thread = std::thread::Builder::new()
            .name("netrig-ctl-tx".into())
            .spawn(move || {
                let mut stream = stream;
                let _ = stream.set_write_timeout(Some(netrig_proto::conn::WRITE_TIMEOUT));
                let beat = encode_frame(&AgentMsg::Heartbeat);
                let wait = heartbeat.unwrap_or(Duration::from_secs(3600));
                loop {
                    let frame = match rx.recv_timeout(wait) {
                        Ok(f) => {
                            in_queue.fetch_sub(f.len(), Ordering::AcqRel);
                            f
                        }
                        Err(RecvTimeoutError::Timeout) if heartbeat.is_some() => beat.clone(),
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return,
                    };
                    if let Err(e) = stream.write_all(&frame) {
                        // The session sees the connection fail on its side;
                        // what is still queued is dropped with the queue.
                        log::debug!("control connection: {e}; no more interval samples or heartbeats");
                        return;
                    }
                }
            })?;
        Ok(ControlWriter {
            sink: Some(Sink {
                tx,
                dropped: dropped.clone(),
                queued,
            }),
            dropped,
            thread: Some(thread),
        })
    }

    pub(crate) fn sink(&self) -> Sink {
        self.sink.clone().expect("a running writer has its sink")
    }

    /// Writes what is queued, stops, and says how many messages were
    /// dropped. Every other [`Sink`] must be gone for it to return at once
    /// (the engine's is, once the run is over).
    pub(crate) fn finish(mut self) -> u64 {
        self.stop();
        self.dropped.load(Ordering::Relaxed)
    }

    fn stop(&mut self) {
        self.sink = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ControlWriter {
    fn drop(&mut self) {
        self.stop();
    }
}
