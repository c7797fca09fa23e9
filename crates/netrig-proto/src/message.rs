//! Control messages. Each travels as one JSON frame (see [`crate::frame`]);
//! the `type` field names the variant.

use crate::report::{IntervalSample, SideReport};
use crate::{SessionCookie, TestSpec};
use serde::{Deserialize, Serialize};

/// Bounds the agent enforces on every client. Sent in the welcome so a
/// client can check a spec before asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentLimits {
    /// Control sessions served at once; one more gets `Busy`.
    pub max_sessions: u32,
    /// Flows per direction in one test.
    pub max_flows: u32,
    /// Longest test, in seconds.
    pub max_duration_s: u64,
    /// Largest send or receive size.
    pub max_message_size: u32,
    /// How long the agent waits for each setup step (data connections, go).
    pub setup_timeout_s: u64,
    /// Worker threads one test may ask of the agent (`-T`).
    #[serde(default = "default_max_workers")]
    pub max_workers: u32,
    /// The data path's buffers one test may make the agent allocate, in
    /// bytes: its workers × [`TestSpec::worker_buffer_bytes`].
    #[serde(default = "default_max_buffer_bytes")]
    pub max_buffer_bytes: u64,
    /// The hooks the agent offers (`netrig serve --hooks DIR`), by name: the
    /// only names a spec's [`crate::spec::RemoteHooks`] may ask for. Empty
    /// (and absent from the welcome): the agent runs no hooks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    /// How long the agent lets a hook run before it kills it, in seconds
    /// (`--hook-timeout`); absent when it offers no hooks. The client waits
    /// this much longer for an answer when it asks for hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_timeout_s: Option<u64>,
    /// The most payload bits/s a test may offer in each direction, all its
    /// flows together (`--max-rate`); absent: no cap. A test must state its
    /// rate (`-b`, `--rate`) to run under a cap, closed-loop
    /// request/response excepted ([`crate::spec::kind::Offered`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate_bps: Option<u64>,
    /// The most times larger than its request a UDP answer of the agent's
    /// may be (`--max-amplification`): a UDP request proves nothing of its
    /// sender's address, so an agent that answered 28 bytes with 65,000
    /// would be an amplifier. Both sizes are the datagrams' payload with
    /// netrig's header. Absent: no bound (an agent in the client's own
    /// process; one older than the bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_amplification: Option<u32>,
}

fn default_max_workers() -> u32 {
    64
}

fn default_max_buffer_bytes() -> u64 {
    1 << 30
}

/// The longest `setup_timeout_s` a client takes from an agent's welcome.
pub const MAX_SETUP_TIMEOUT_S: u64 = 3600;
/// The longest `max_duration_s` a client takes from an agent's welcome: the
/// most the agent's `--max-duration` takes (365 days).
pub const MAX_AGENT_DURATION_S: u64 = 31_536_000;
/// The most hooks an agent offers (and a client takes from a welcome).
pub const MAX_HOOKS: usize = 256;
/// The longest `hook_timeout_s` (the agent's `--hook-timeout`, and what a
/// client takes from a welcome).
pub const MAX_HOOK_TIMEOUT_S: u64 = 3600;
/// A hook's time limit without `--hook-timeout`.
pub const DEFAULT_HOOK_TIMEOUT_S: u64 = 30;

impl AgentLimits {
    /// Checks limits that came from a peer (the agent's welcome): the client
    /// derives its own timeouts from the durations, so they must be bounded
    /// for that arithmetic to be safe.
    pub fn check(&self) -> Result<(), crate::ProtoError> {
        let bad = |what: &str, v: u64, max: u64| {
            Err(crate::ProtoError::Violation(format!(
                "the agent's welcome has {what} {v} s, over the {max} s a client takes"
            )))
        };
        if self.setup_timeout_s > MAX_SETUP_TIMEOUT_S {
            return bad("setup_timeout_s", self.setup_timeout_s, MAX_SETUP_TIMEOUT_S);
        }
        if self.max_duration_s > MAX_AGENT_DURATION_S {
            return bad("max_duration_s", self.max_duration_s, MAX_AGENT_DURATION_S);
        }
        if let Some(t) = self.hook_timeout_s.filter(|t| *t > MAX_HOOK_TIMEOUT_S) {
            return bad("hook_timeout_s", t, MAX_HOOK_TIMEOUT_S);
        }
        if self.hooks.len() > MAX_HOOKS {
            return Err(crate::ProtoError::Violation(format!(
                "the agent's welcome offers {} hooks, over the {MAX_HOOKS} a client takes",
                self.hooks.len()
            )));
        }
        if let Some(h) = self.hooks.iter().find(|h| !crate::spec::is_hook_name(h)) {
            return Err(crate::ProtoError::Violation(format!(
                "the agent's welcome offers a hook named {:?}, which is not a hook's name",
                h.chars().take(80).collect::<String>()
            )));
        }
        Ok(())
    }

    /// How long the agent may take to run the hooks `hooks` asks for, beside
    /// the test: the time a client adds to its waits.
    pub fn hook_time(&self, hooks: &crate::spec::RemoteHooks) -> std::time::Duration {
        let each = self.hook_timeout_s.unwrap_or(DEFAULT_HOOK_TIMEOUT_S);
        // Each hook is killed at its timeout; a second more for the kill and its output.
        let n = hooks.requested().count() as u64;
        std::time::Duration::from_secs(n * (each + 1))
    }
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_sessions: 64,
            max_flows: 10_000,
            max_duration_s: 3600,
            max_message_size: crate::spec::MAX_MESSAGE_SIZE,
            setup_timeout_s: 30,
            max_workers: default_max_workers(),
            max_buffer_bytes: default_max_buffer_bytes(),
            hooks: Vec::new(),
            hook_timeout_s: None,
            max_rate_bps: None,
            max_amplification: None,
        }
    }
}

/// Client to agent. A field the agent does not know is refused, as in the
/// spec: a client that means something the agent would ignore is told so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
// One per test on the control connection: a boxed spec would save nothing that matters.
#[allow(clippy::large_enum_variant)]
pub enum ClientMsg {
    /// First frame after the agent's welcome: the client's nonce, and its
    /// key and signature when it has one (see [`crate::auth`]).
    Hello {
        software: String,
        auth: crate::auth::HelloAuth,
    },
    /// Asks the agent to set up a test. `auth`: the client's signature of
    /// this request, when the session is authenticated.
    TestRequest {
        spec: TestSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<crate::auth::RequestAuth>,
    },
    /// Every data connection is open: start measuring now.
    #[serde(deserialize_with = "no_fields")]
    Go,
    /// Stop the running test (the user pressed Ctrl-C, or the client failed).
    Abort { reason: String },
    /// The client is done with this control connection.
    #[serde(deserialize_with = "no_fields")]
    Bye,
    /// Protocol 5: sent every [`HEARTBEAT`] from `go` until the results, so
    /// that an agent notices a client that fell silent (stopped, or its host
    /// gone without a FIN) within [`SILENCE_LIMIT`] and stops sending.
    #[serde(deserialize_with = "no_fields")]
    Heartbeat,
    /// Protocol 6: watch this host (the agent's) from now until `watch_end`:
    /// the agent snapshots its CPU times and kernel counters and samples its
    /// levels (conntrack, sockets by state) about once a second. Only from
    /// idle; one watch per session at a time. The client sends `heartbeat`s
    /// every second while it watches.
    #[serde(deserialize_with = "no_fields")]
    WatchStart,
    /// Protocol 6: end the watch; the agent answers `host_view`.
    #[serde(deserialize_with = "no_fields")]
    WatchEnd,
    /// Protocol 7: when idle, asks the agent for its clock now (the clock
    /// probe, `netrig_proto::clock`): it answers `clock_echo` with the same
    /// `seq` at once. At most [`crate::clock::MAX_PROBES_PER_TEST`] between
    /// two test requests.
    ClockProbe { seq: u32 },
    /// Protocol 8: when idle, in a session whose client proved its key, run `request`'s test
    /// as a client against another agent (its `target`) and answer with the result
    /// (`initiate_done`) or why not (`initiate_rejected`). `auth`: the client's signature of
    /// the request, counted with its test requests.
    Initiate {
        request: crate::initiate::InitiateRequest,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<crate::auth::RequestAuth>,
    },
}

/// The first protocol version with the watch of the agent's host.
pub const WATCH_VERSION: u16 = 6;
/// The longest watch a client takes from an agent's `watch_started`: its
/// longest test ([`MAX_AGENT_DURATION_S`]) and set-up ([`MAX_SETUP_TIMEOUT_S`]).
pub const MAX_WATCH_S: u64 = MAX_AGENT_DURATION_S + MAX_SETUP_TIMEOUT_S;

/// How often each end says it is alive during a test (protocol 5).
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long an end waits, during a test, for any frame from the other before
/// it gives the test up: ten heartbeats.
pub const SILENCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The first protocol version with heartbeats.
pub const HEARTBEAT_VERSION: u16 = 5;

/// A message that has no fields but its `type`: any other is refused (serde's
/// `deny_unknown_fields` does not reach an internally tagged unit variant).
fn no_fields<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NoFields {}
    NoFields::deserialize(d).map(|NoFields {}| ())
}

impl ClientMsg {
    pub fn name(&self) -> &'static str {
        match self {
            ClientMsg::Hello { .. } => "hello",
            ClientMsg::TestRequest { .. } => "test_request",
            ClientMsg::Go => "go",
            ClientMsg::Abort { .. } => "abort",
            ClientMsg::Bye => "bye",
            ClientMsg::Heartbeat => "heartbeat",
            ClientMsg::WatchStart => "watch_start",
            ClientMsg::WatchEnd => "watch_end",
            ClientMsg::ClockProbe { .. } => "clock_probe",
            ClientMsg::Initiate { .. } => "initiate",
        }
    }
}

/// Agent to client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentMsg {
    /// Answer to a control preamble whose version range overlaps ours.
    Welcome {
        version: u16,
        software: String,
        limits: AgentLimits,
        /// A fresh nonce, whether authentication is required, the agent's key.
        auth: crate::auth::WelcomeAuth,
        /// The agent's clock (its kernel's boot id), for one-way delay;
        /// absent from an older agent's welcome.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clock: Option<crate::clock::AgentClock>,
        /// Protocol 8: the agent's name for itself (`netrig serve --name`, e.g. its node's),
        /// at most [`crate::initiate::MAX_NAME_LEN`] bytes; absent without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Answer to a hello the agent accepts: the agent's signature of the
    /// handshake when it has a key. A hello it refuses gets `error`.
    HelloAccepted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<crate::auth::Signature>,
    },
    /// Answer to a preamble whose range does not overlap ours. This variant's
    /// shape never changes, so every version can read it; the agent closes
    /// the connection after sending it.
    VersionMismatch {
        agent_min: u16,
        agent_max: u16,
        software: String,
    },
    /// The agent serves as many sessions as it may; it closes after this.
    Busy { reason: String },
    /// The test is set up: open the data connections with this cookie.
    TestAccepted {
        cookie: SessionCookie,
        warnings: Vec<String>,
    },
    /// The spec broke a limit or cannot run; the session stays usable.
    TestRejected { reason: String },
    /// All data connections arrived.
    DataReady,
    /// One interim sample of the agent's side, sent as it is taken.
    Interval { sample: Box<IntervalSample> },
    /// The agent's side of the finished test.
    Results { report: Box<SideReport> },
    /// The agent gave up on the session; it closes after this.
    Error { message: String },
    /// Protocol 5: sent every [`HEARTBEAT`] from `go` until the results
    /// whenever nothing else went, so that a client notices an agent that
    /// fell silent within [`SILENCE_LIMIT`] whichever end sends.
    Heartbeat,
    /// Protocol 6: the watch began (the start snapshot is taken). It stops
    /// by itself after `limit_s` seconds (the agent's longest test and its
    /// set-up timeout), and ends with the session if the client says nothing
    /// for [`SILENCE_LIMIT`].
    WatchStarted { limit_s: u64 },
    /// Protocol 6: the agent will not watch (its `--disclose minimal` for a
    /// client that did not authenticate, a watch running in this session
    /// already); the session stays as it was.
    WatchRejected { reason: String },
    /// Protocol 6: the answer to `watch_end`.
    HostView {
        view: Box<crate::report::host::HostView>,
    },
    /// Protocol 7: the answer to `clock_probe`: its `seq`, and the agent's
    /// `CLOCK_REALTIME` (ns since the epoch) when the probe arrived and as
    /// this leaves (`sent_ns` − `received_ns` at most
    /// [`crate::clock::MAX_ECHO_HOLD_NS`]).
    ClockEcho {
        seq: u32,
        received_ns: u64,
        sent_ns: u64,
    },
    /// Protocol 8: the answer to `initiate`: the test's whole result as the agent's client
    /// made it (the document `netrig KIND --json` prints), read by the asker within the
    /// frame's bound.
    InitiateDone { result: Box<serde_json::Value> },
    /// Protocol 8: the agent did not run the asked test (its operator does not allow it, the
    /// target is not an agent it may reach, a cap) or the test failed: why, in words. The
    /// session is idle again.
    InitiateRejected { reason: String },
}

impl AgentMsg {
    /// Reads one message from its JSON, as `serde_json::from_slice` does, but
    /// without serde's buffering of an internally tagged enum: that copies
    /// the whole message into a tree of `Content` before choosing the
    /// variant, some 3 KB per flow of a results message (60 MB at 19,000
    /// flows). The tag is read first (skipping the rest unallocated); the
    /// results and interval messages are then read straight into their
    /// variant, the others as before.
    pub fn from_slice(json: &[u8]) -> serde_json::Result<AgentMsg> {
        #[derive(Deserialize)]
        struct Tag<'a> {
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        #[derive(Deserialize)]
        struct Results {
            report: Box<SideReport>,
        }
        #[derive(Deserialize)]
        struct Interval {
            sample: Box<IntervalSample>,
        }
        // Bytes that are not UTF-8 sit in a string the variant's own
        // reading may skip unchecked (an unknown key's value), where the
        // derived reading checks every string: such a message takes the
        // derived reading, and fails as it does. (Found by the `message`
        // fuzz target.)
        if std::str::from_utf8(json).is_err() {
            return serde_json::from_slice(json);
        }
        match serde_json::from_slice::<Tag>(json)
            .ok()
            .as_ref()
            .map(|t| &*t.kind)
        {
            Some("results") => {
                serde_json::from_slice::<Results>(json).map(|r| AgentMsg::Results { report: r.report })
            }
            Some("interval") => {
                serde_json::from_slice::<Interval>(json).map(|i| AgentMsg::Interval { sample: i.sample })
            }
            _ => serde_json::from_slice(json),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            AgentMsg::Welcome { .. } => "welcome",
            AgentMsg::HelloAccepted { .. } => "hello_accepted",
            AgentMsg::VersionMismatch { .. } => "version_mismatch",
            AgentMsg::Busy { .. } => "busy",
            AgentMsg::TestAccepted { .. } => "test_accepted",
            AgentMsg::TestRejected { .. } => "test_rejected",
            AgentMsg::DataReady => "data_ready",
            AgentMsg::Interval { .. } => "interval",
            AgentMsg::Results { .. } => "results",
            AgentMsg::Error { .. } => "error",
            AgentMsg::Heartbeat => "heartbeat",
            AgentMsg::WatchStarted { .. } => "watch_started",
            AgentMsg::WatchRejected { .. } => "watch_rejected",
            AgentMsg::HostView { .. } => "host_view",
            AgentMsg::ClockEcho { .. } => "clock_echo",
            AgentMsg::InitiateDone { .. } => "initiate_done",
            AgentMsg::InitiateRejected { .. } => "initiate_rejected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_slice` reads what serde's derived reading reads, whatever the
    /// order of the keys, and fails where it fails.
    #[test]
    fn from_slice_reads_as_the_derived_reading_does() {
        let report = serde_json::to_string(&SideReport::default()).unwrap();
        let texts = [
            format!(r#"{{"type":"results","report":{report}}}"#),
            format!(r#"{{"report":{report},"type":"results"}}"#),
            r#"{"type":"interval","sample":{"index":3,"start_s":0.5,"end_s":1.0,"ids":[1],"bytes":[2],"tcp_info":[]}}"#
                .to_string(),
            r#"{"type":"data_ready"}"#.to_string(),
            r#"{"type":"busy","reason":"full"}"#.to_string(),
            serde_json::to_string(&AgentMsg::Results { report: Box::default() }).unwrap(),
        ];
        for t in &texts {
            let derived: AgentMsg = serde_json::from_str(t).unwrap();
            assert_eq!(AgentMsg::from_slice(t.as_bytes()).unwrap(), derived, "{t}");
        }
        // An unknown key whose value is not UTF-8: both readings refuse it.
        let mut skipped = br#"{"type":"interval","sa":"in"#.to_vec();
        skipped.extend([0xff; 8]);
        skipped.extend(
            br#"","sample":{"index":0,"start_s":0.0,"end_s":0.5,"ids":[],"bytes":[],"tcp_info":[]}}"#,
        );
        assert!(serde_json::from_slice::<AgentMsg>(&skipped).is_err());
        assert!(AgentMsg::from_slice(&skipped).is_err());
        for bad in [
            r#"{"type":"results"}"#,
            r#"{"type":"interval","sample":7}"#,
            r#"{"type":"nonsense"}"#,
            r#"{"report":{}}"#,
            "[1,2]",
            "{",
        ] {
            assert!(serde_json::from_str::<AgentMsg>(bad).is_err(), "{bad}");
            assert!(AgentMsg::from_slice(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn version_mismatch_wire_shape_is_stable() {
        // Older and newer versions must be able to read this exact shape.
        let m = AgentMsg::VersionMismatch {
            agent_min: 1,
            agent_max: 1,
            software: "0.1.0".into(),
        };
        let v: serde_json::Value = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"version_mismatch","agent_min":1,"agent_max":1,"software":"0.1.0"})
        );
    }

    /// Found by the `message` fuzz target: without serde_json's
    /// `float_roundtrip` a figure could read back one ULP off what was
    /// written (here an interval's `start_s`).
    #[test]
    fn floats_read_back_exactly() {
        let text = format!(
            r#"{{"type":"interval","sample":{{"index":0,"start_s":{}0,"end_s":0.5,"ids":[],"bytes":[],"tcp_info":[]}}}}"#,
            "1".repeat(61) + &"2".repeat(117) + &"1".repeat(19)
        );
        let m: AgentMsg = serde_json::from_str(&text).unwrap();
        let back: AgentMsg = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        for x in [
            1.1111111111111112e197,
            0.1,
            1.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
        ] {
            let y: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
            assert_eq!(y.to_bits(), x.to_bits(), "{x:e}");
        }
    }

    /// A welcome names only hooks a spec could name, a bounded number of
    /// them, with a bounded timeout: the client prints the names and waits
    /// on the timeout. An older agent's welcome has neither field.
    #[test]
    fn welcome_hooks_are_bounded() {
        let ok = AgentLimits {
            hooks: vec!["a".into(), "nft-stateless".into()],
            hook_timeout_s: Some(MAX_HOOK_TIMEOUT_S),
            ..AgentLimits::default()
        };
        assert!(ok.check().is_ok());
        let v = serde_json::to_value(AgentLimits::default()).unwrap();
        assert!(
            v.get("hooks").is_none() && v.get("hook_timeout_s").is_none(),
            "{v}"
        );
        let back: AgentLimits = serde_json::from_value(v).unwrap();
        assert!(back.hooks.is_empty());
        for bad in [
            AgentLimits {
                hooks: vec!["../../bin/sh".into()],
                ..ok.clone()
            },
            AgentLimits {
                hooks: vec!["h".into(); MAX_HOOKS + 1],
                ..ok.clone()
            },
            AgentLimits {
                hook_timeout_s: Some(MAX_HOOK_TIMEOUT_S + 1),
                ..ok.clone()
            },
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.contains("the agent's welcome"), "{e}");
        }
        let both = crate::spec::RemoteHooks {
            setup: Some("a".into()),
            teardown: Some("a".into()),
        };
        assert_eq!(ok.hook_time(&both), std::time::Duration::from_secs(2 * 3601));
        assert_eq!(
            AgentLimits::default().hook_time(&crate::spec::RemoteHooks::default()),
            std::time::Duration::ZERO
        );
    }

    /// Issue #11: unknown fields of `hello` and `test_request` (and of every
    /// message a client sends, and of their `auth`) are refused as the
    /// spec's are, fields-less `go` and `bye` included.
    #[test]
    fn a_client_message_with_an_unknown_field_is_refused() {
        let nonce = crate::auth::Nonce::random();
        let hello = ClientMsg::Hello {
            software: "s".into(),
            auth: crate::auth::HelloAuth {
                nonce,
                client_key: None,
                signature: None,
            },
        };
        let request = ClientMsg::TestRequest {
            spec: TestSpec::new(
                crate::spec::KindSpec::TcpStream(Default::default()),
                crate::spec::Limit::Duration { seconds: 1.0 },
            ),
            auth: Some(crate::auth::RequestAuth {
                counter: 1,
                signature: crate::auth::Bytes([0; 64]),
            }),
        };
        for m in [
            hello,
            request,
            ClientMsg::Go,
            ClientMsg::Bye,
            ClientMsg::Abort { reason: "r".into() },
            ClientMsg::WatchStart,
            ClientMsg::WatchEnd,
        ] {
            let v = serde_json::to_value(&m).unwrap();
            assert_eq!(serde_json::from_value::<ClientMsg>(v.clone()).unwrap(), m);
            let mut extra = v.clone();
            extra["format_disk"] = true.into();
            let e = serde_json::from_value::<ClientMsg>(extra)
                .unwrap_err()
                .to_string();
            assert!(e.contains("unknown field `format_disk`"), "{}: {e}", m.name());
            if let Some(auth) = v.get("auth") {
                let mut extra = v.clone();
                extra["auth"]["format_disk"] = true.into();
                let e = serde_json::from_value::<ClientMsg>(extra)
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("unknown field `format_disk`"),
                    "{}.auth {auth}: {e}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn unknown_message_type_is_an_error() {
        let r: Result<ClientMsg, _> = serde_json::from_str(r#"{"type":"format_disk"}"#);
        assert!(r.is_err());
    }
}
