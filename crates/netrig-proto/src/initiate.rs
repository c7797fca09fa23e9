//! Protocol 8: agent-to-agent tests (issue #43, docs/PROTOCOL.md "Initiate"). A client that
//! proved its key (the asker, e.g. `netrig mesh`) asks agent A to run a test as a client
//! against agent B (`initiate`); A does so with its own key, only when its operator allows it
//! (`netrig serve --allow-initiate`, `--initiate-keys`) and only towards a peer that proves an
//! agent key, and sends the whole result back (`initiate_done`), or why not
//! (`initiate_rejected`). During the test A sends heartbeats, as during one of its own.

use crate::spec::{validate_mss, validate_socket_options, SocketOptions};
use crate::TestSpec;
use serde::{Deserialize, Serialize};

/// The first protocol version with `initiate` and the welcome's `name`.
pub const INITIATE_VERSION: u16 = 8;
/// The longest target (`host:port`, a name or an address) an asker may name, bytes.
pub const MAX_TARGET_LEN: usize = 255;
/// The longest agent name (`netrig serve --name`) a welcome may carry, bytes.
pub const MAX_NAME_LEN: usize = 64;
/// The furthest ahead of the agent's clock a start may be asked for, ns: an asker that sets
/// its tests up together starts them a few seconds ahead, never minutes.
pub const MAX_START_AHEAD_NS: u64 = 60_000_000_000;
/// What the asker waits for beyond a test's own length and set-up for its result: the
/// agent's connection to the target and its tear-down.
pub const RESULT_MARGIN_S: u64 = 30;

/// What the asker wants agent A to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitiateRequest {
    /// The agent B to test against: `host:port` (`[v6]:port`), at most [`MAX_TARGET_LEN`] bytes.
    pub target: String,
    /// The test, as a client would send it to B; every cap of A's applies to it as to a test
    /// of its own, and B's when A asks B.
    pub spec: TestSpec,
    /// Send `go` at this instant of A's `CLOCK_REALTIME` (ns since the epoch), once set up:
    /// the asker's agreed start, moved to A's clock by the offset it measured (the clock
    /// probe). Absent: at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_ns: Option<u64>,
    /// The client's own end, which A applies to its data sockets as `netrig KIND` applies the
    /// options of its own end. Absent: A's sockets as they are.
    #[serde(default, skip_serializing_if = "ClientEnd::is_default")]
    pub client: ClientEnd,
}

/// The options of the client's own data sockets that the spec does not carry (the spec's
/// `remote` is the server's end): `-s` (`sndbuf`, `rcvbuf`), `--tos`/`--dscp`, `--priority`,
/// `--max-pacing-rate` (which `netrig KIND` sets on both ends, so a spec from the command line
/// has them in `remote` too) and `--mss`. The TCP options both ends take (`--cc`, `--nodelay`,
/// `--mptcp`) are the spec's kind's. Bounded as the spec's own socket options are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEnd {
    #[serde(default)]
    pub socket: SocketOptions,
    /// TCP_MAXSEG before connect (`--mss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
}

impl ClientEnd {
    pub fn is_default(&self) -> bool {
        *self == ClientEnd::default()
    }
}

impl InitiateRequest {
    /// The request's own bounds (the spec's are the session's to check against the limits).
    pub fn validate(&self, now_ns: u64) -> Result<(), String> {
        if self.target.is_empty() || self.target.len() > MAX_TARGET_LEN {
            return Err(format!(
                "initiate: the target must be 1 to {MAX_TARGET_LEN} bytes (host:port), not {}",
                self.target.len()
            ));
        }
        if self.target.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err("initiate: the target holds a control or space character".into());
        }
        validate_socket_options(&self.client.socket, "-s/--local-sockbuf")
            .map_err(|e| format!("initiate: the client's end: {e}"))?;
        if let Some(mss) = self.client.mss {
            validate_mss(mss).map_err(|e| format!("initiate: the client's end: {e}"))?;
        }
        if let Some(t) = self.start_at_ns {
            if t > now_ns.saturating_add(MAX_START_AHEAD_NS) {
                return Err(format!(
                    "initiate: start_at_ns is {:.1} s ahead of this agent's clock; the agent allows at most {} s",
                    (t - now_ns) as f64 / 1e9,
                    MAX_START_AHEAD_NS / 1_000_000_000
                ));
            }
        }
        Ok(())
    }
}

/// Checks an agent's name from its welcome: at most [`MAX_NAME_LEN`] bytes of printable
/// characters (a node's name, a label).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "the agent's name must be 1 to {MAX_NAME_LEN} bytes, not {}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("the agent's name holds a control character".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{KindSpec, Limit, TcpStreamSpec};

    fn request(target: &str, start: Option<u64>) -> InitiateRequest {
        InitiateRequest {
            target: target.into(),
            spec: TestSpec::new(
                KindSpec::TcpStream(TcpStreamSpec::default()),
                Limit::Duration { seconds: 1.0 },
            ),
            start_at_ns: start,
            client: ClientEnd::default(),
        }
    }

    #[test]
    fn targets_and_starts_are_bounded() {
        let now = 1_000_000_000_000;
        assert!(request("10.0.0.2:6387", Some(now + 5_000_000_000))
            .validate(now)
            .is_ok());
        assert!(request("", None).validate(now).unwrap_err().contains("1 to 255"));
        assert!(request(&"a".repeat(256), None).validate(now).is_err());
        assert!(request("a b:1", None)
            .validate(now)
            .unwrap_err()
            .contains("space"));
        let e = request("h:1", Some(now + 61_000_000_000))
            .validate(now)
            .unwrap_err();
        assert!(e.contains("61.0 s ahead") && e.contains("at most 60 s"), "{e}");
        assert!(check_name("node-1").is_ok());
        assert!(check_name(&"n".repeat(65)).is_err());
        assert!(check_name("a\nb").is_err());
    }

    /// The client's end is bounded as the spec's socket options are, and left out of the
    /// message when it asks for nothing.
    #[test]
    fn the_client_s_end_is_bounded_and_optional() {
        let now = 1_000_000_000_000;
        let mut r = request("h:1", None);
        assert!(serde_json::to_value(&r).unwrap().get("client").is_none());
        r.client.socket.sndbuf = Some(65536);
        r.client.socket.tos = Some(40);
        r.client.mss = Some(1000);
        assert!(r.validate(now).is_ok());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["client"]["socket"]["sndbuf"], 65536);
        assert_eq!(serde_json::from_value::<InitiateRequest>(v).unwrap(), r);
        r.client.socket.priority = Some(9);
        let e = r.validate(now).unwrap_err();
        assert!(e.contains("the client's end") && e.contains("--priority"), "{e}");
        r.client.socket.priority = None;
        r.client.mss = Some(20);
        assert!(r.validate(now).unwrap_err().contains("--mss"));
        r.client.mss = None;
        r.client.socket.rcvbuf = Some(0);
        assert!(r.validate(now).unwrap_err().contains("-s/--local-sockbuf"));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut v = serde_json::to_value(request("h:1", None)).unwrap();
        v["via"] = "x".into();
        let e = serde_json::from_value::<InitiateRequest>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `via`"), "{e}");
    }
}
