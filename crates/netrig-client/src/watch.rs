//! Watching the agent's host while something else loads it (protocol 6):
//! `watch_start`, heartbeats every second from a thread of their own while
//! the caller runs its load, then `watch_end` and the host's view.

use crate::{Client, ClientError};
use netrig_proto::message::{HEARTBEAT, WATCH_VERSION};
use netrig_proto::report::host::HostView;
use netrig_proto::session::ClientEvent;
use netrig_proto::{AgentMsg, ClientMsg};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the client waits for `watch_started` and for the `host_view`:
/// the agent reads a few /proc files for each (a bounded part of
/// /proc/net/tcp among them).
const WATCH_ANSWER: Duration = Duration::from_secs(30);

/// A watch in progress: its heartbeats' thread, and how long the agent lets it run.
pub struct Watching {
    stop: Arc<AtomicBool>,
    beats: Option<JoinHandle<()>>,
    limit_s: u64,
}

impl Watching {
    /// The longest the agent lets this watch run (`watch_started`'s `limit_s`).
    pub fn limit_s(&self) -> u64 {
        self.limit_s
    }

    fn stop_beats(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.beats.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.stop_beats();
    }
}

impl Client {
    /// The protocol version this session speaks.
    pub fn protocol_version(&self) -> u16 {
        self.version
    }

    /// Asks the agent to watch its host from now on. An agent of an older
    /// protocol is told nothing: the error says which version it speaks
    /// and which the watch needs.
    pub fn start_watch(&mut self) -> Result<Watching, ClientError> {
        if self.version < WATCH_VERSION {
            return Err(ClientError::Handshake(format!(
                "{} speaks protocol v{}; the server host's view needs v{WATCH_VERSION} (netrig {} or later \
                 there)",
                self.agent_name(),
                self.version,
                netrig_proto::SOFTWARE_VERSION
            )));
        }
        self.sm
            .watch_start_sent()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.conn
            .send(&ClientMsg::WatchStart)
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let msg: AgentMsg = self.conn.recv(WATCH_ANSWER).map_err(|e| {
            ClientError::Protocol(format!("{} did not answer watch_start: {e}", self.agent_name()))
        })?;
        let limit_s = match self.sm.on_agent(msg) {
            Ok(ClientEvent::WatchStarted { limit_s }) => limit_s,
            Ok(ClientEvent::WatchRejected(reason)) => {
                return Err(ClientError::Rejected {
                    agent: self.agent_name(),
                    reason: format!("the watch of its host: {reason}"),
                })
            }
            Ok(other) => {
                return Err(ClientError::Protocol(format!(
                    "{} answered watch_start with {other}",
                    self.agent_name()
                )))
            }
            Err(e) => return Err(ClientError::Protocol(format!("{}: {e}", self.agent_name()))),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut stream = self
            .conn
            .try_clone_stream()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let flag = stop.clone();
        let beats = std::thread::Builder::new()
            .name("netrig-watch-beats".into())
            .spawn(move || {
                let beat = netrig_proto::encode_frame(&ClientMsg::Heartbeat);
                let tick = Duration::from_millis(50);
                let mut since = Duration::ZERO;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    since += tick;
                    if since >= HEARTBEAT {
                        since = Duration::ZERO;
                        // The write timeout is the connection's (30 s); a
                        // failure shows when the watch ends.
                        if stream.write_all(&beat).is_err() {
                            return;
                        }
                    }
                }
            })
            .map_err(|e| ClientError::Protocol(format!("cannot start the heartbeat thread: {e}")))?;
        Ok(Watching {
            stop,
            beats: Some(beats),
            limit_s,
        })
    }

    /// Ends the watch and returns what the agent's host saw, every figure
    /// bounded ([`HostView::check`]).
    pub fn end_watch(&mut self, mut w: Watching) -> Result<HostView, ClientError> {
        w.stop_beats();
        let agent = self.agent_name();
        let proto = |e: String| ClientError::Protocol(format!("{agent}: {e}"));
        self.sm.watch_end_sent().map_err(|e| proto(e.to_string()))?;
        self.conn
            .send(&ClientMsg::WatchEnd)
            .map_err(|e| proto(e.to_string()))?;
        let msg: AgentMsg = self
            .conn
            .recv(WATCH_ANSWER)
            .map_err(|e| proto(format!("no host_view after watch_end: {e}")))?;
        match self.sm.on_agent(msg) {
            Ok(ClientEvent::HostView(view)) => {
                // The watch's limit, and the time this side may have taken to ask.
                let longest = w.limit_s as f64 + WATCH_ANSWER.as_secs_f64();
                view.check(longest).map_err(|e| proto(e.to_string()))?;
                Ok(*view)
            }
            Ok(other) => Err(proto(format!("it answered watch_end with {other}"))),
            Err(e) => Err(proto(e.to_string())),
        }
    }
}
