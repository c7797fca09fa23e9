//! Servers of other tools a client may reach by mistake, recognised from
//! how they answer netrig's control preamble, or named from their port.
//!
//! A netrig agent answers the 8-byte preamble at once with a frame whose
//! first byte is 0 (a welcome, a `busy` or a `version_mismatch`, all far
//! under 16 MiB). Measured on loopback (iperf3 3.21, netperf 2.7.1's
//! netserver; docs/PROTOCOL.md, "Not an agent"):
//!
//! - an idle iperf3 server reads its client's 37-byte cookie with a 10 s
//!   timeout: given netrig's 8 bytes it says nothing for 10 s, then sends
//!   SERVER_ERROR (the byte 0xFE), its error 106 ("unable to receive the
//!   cookie") and errno 0 as two big-endian 32-bit numbers, and closes;
//! - an iperf3 server running a test answers any new connection at once
//!   with ACCESS_DENIED (the byte 0xFF) and closes;
//! - netserver waits for a whole netperf request and says nothing, ever.
//!
//! So only a busy iperf3 server (and servers that speak first: SSH, or an
//! HTTP server answering the preamble as a bad request) can be recognised at
//! once; for the silent ones the port is the only hint.

/// A server netrig recognised, and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// What it is: "an iperf3 server".
    pub what: &'static str,
    /// How it answered, in words.
    pub how: String,
    /// What to do instead.
    pub advice: &'static str,
}

/// iperf3's state byte for a server busy with another test (ACCESS_DENIED, -1).
pub const IPERF3_ACCESS_DENIED: u8 = 0xFF;
/// iperf3's state byte for a server that gave up on its client (SERVER_ERROR, -2).
pub const IPERF3_SERVER_ERROR: u8 = 0xFE;
/// iperf3's error "unable to receive cookie at server" (IERECVCOOKIE).
const IPERF3_ERECVCOOKIE: u32 = 106;

const USE_IPERF3: &str = "run `netrig serve` there, or use iperf3";
const OTHER_PORT: &str =
    "a netrig agent listens on port 6387 unless `netrig serve -p` chose another: check -p";

/// Names the server that answered netrig's control preamble with `reply`
/// (what it sent before it closed or paused). `None`: an answer netrig does
/// not know, or the start of a netrig frame.
pub fn recognise(reply: &[u8]) -> Option<Neighbour> {
    let iperf3 = |how: String| Neighbour {
        what: "an iperf3 server",
        how,
        advice: USE_IPERF3,
    };
    match reply {
        [IPERF3_ACCESS_DENIED] => Some(iperf3(
            "it answered netrig's greeting with ACCESS_DENIED, as iperf3 answers any client while it runs a test"
                .into(),
        )),
        [IPERF3_SERVER_ERROR, rest @ ..] if rest.len() <= 8 => {
            let error = rest
                .first_chunk::<4>()
                .map(|e| u32::from_be_bytes(*e))
                .map_or(String::new(), |e| match e {
                    IPERF3_ERECVCOOKIE => format!(" {e}, unable to receive its client's cookie"),
                    e => format!(" {e}"),
                });
            Some(iperf3(format!(
                "it answered netrig's greeting with SERVER_ERROR (iperf3 error{error})"
            )))
        }
        _ if reply.starts_with(b"SSH-") => Some(Neighbour {
            what: "an SSH server",
            how: format!("it greeted with \"{}\"", first_line(reply)),
            advice: OTHER_PORT,
        }),
        _ if reply.starts_with(b"HTTP/") => Some(Neighbour {
            what: "an HTTP server",
            how: format!("it answered \"{}\"", first_line(reply)),
            advice: OTHER_PORT,
        }),
        _ => None,
    }
}

/// The first line of a text answer, short, in printable ASCII (anything else
/// is a `?`: a peer's bytes must not reach a terminal as they are).
fn first_line(reply: &[u8]) -> String {
    let line = reply.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.iter()
        .take(60)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}

/// Whether `first`, the first byte of an answer to the control preamble,
/// can start a netrig frame: its 4-byte big-endian length is far under 16 MiB.
pub fn may_be_netrig(first: u8) -> bool {
    first == 0
}

/// Another tool's default port, and how its server answers netrig's
/// greeting when that is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortHint {
    /// "iperf3's".
    pub whose: &'static str,
    /// How that server meets netrig's greeting: "an idle iperf3 server says
    /// nothing for 10 s". Empty when netrig has not measured it.
    pub silence: &'static str,
    /// What to do instead.
    pub advice: &'static str,
}

/// The tool whose server listens on `port` by default, if netrig knows one.
pub fn port_hint(port: u16) -> Option<PortHint> {
    let hint = |whose, silence, advice| {
        Some(PortHint {
            whose,
            silence,
            advice,
        })
    };
    match port {
        5201 => hint(
            "iperf3's",
            "an idle iperf3 server says nothing to netrig's greeting for 10 s, then gives up on the cookie it waits for",
            USE_IPERF3,
        ),
        12865 => hint(
            "netperf's netserver's",
            "a netserver says nothing to netrig's greeting, ever",
            "run `netrig serve` there, or use netperf",
        ),
        12866 => hint("neper's", "", "run `netrig serve` there, or use neper"),
        5001 => hint("iperf 2's", "", "run `netrig serve` there, or use iperf 2"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes iperf3 3.21 sent (docs/PROTOCOL.md, "Not an agent").
    #[test]
    fn iperf3s_answers_are_recognised() {
        let busy = recognise(&[0xFF]).unwrap();
        assert_eq!(busy.what, "an iperf3 server");
        assert!(busy.how.contains("ACCESS_DENIED"), "{}", busy.how);
        assert!(busy.advice.contains("netrig serve"));
        let gave_up = recognise(&[0xFE, 0, 0, 0, 106, 0, 0, 0, 0]).unwrap();
        assert_eq!(gave_up.what, "an iperf3 server");
        assert!(
            gave_up
                .how
                .contains("SERVER_ERROR (iperf3 error 106, unable to receive its client's cookie)"),
            "{}",
            gave_up.how
        );
        assert!(recognise(&[0xFE]).unwrap().how.ends_with("(iperf3 error)"));
        // More than iperf3 sends, or another first byte: not recognised.
        assert_eq!(recognise(&[0xFF, 0]), None);
        assert_eq!(recognise(&[0xFE; 10]), None);
        assert_eq!(recognise(&[0, 0, 1, 0x20, b'{']), None);
        assert_eq!(recognise(&[]), None);
    }

    #[test]
    fn servers_that_speak_first_are_named() {
        let ssh = recognise(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n").unwrap();
        assert_eq!(ssh.what, "an SSH server");
        assert!(
            ssh.how.contains("\"SSH-2.0-OpenSSH_9.2p1 Debian-2\""),
            "{}",
            ssh.how
        );
        assert!(ssh.advice.contains("-p"));
        let http = recognise(b"HTTP/1.1 400 Bad Request\r\nServer: x\r\n\r\n").unwrap();
        assert!(http.how.contains("\"HTTP/1.1 400 Bad Request\""), "{}", http.how);
        let long = [b"SSH-".as_slice(), &[b'a'; 500]].concat();
        assert_eq!(first_line(&long).chars().count(), 60);
        assert_eq!(first_line(b"SSH-\x1b[2J\xe2\x80\xae\"\r\n"), "SSH-?[2J???\"");
    }

    #[test]
    fn a_welcome_may_be_netrig_and_nothing_else_may() {
        let welcome = crate::encode_frame(&crate::AgentMsg::Busy { reason: "r".into() });
        assert!(may_be_netrig(welcome[0]));
        assert!(!may_be_netrig(0xFF) && !may_be_netrig(b'S') && !may_be_netrig(b'H'));
    }

    #[test]
    fn default_ports_are_named() {
        assert_eq!(port_hint(5201).unwrap().whose, "iperf3's");
        assert!(port_hint(12865).unwrap().silence.contains("ever"));
        assert!(port_hint(crate::DEFAULT_PORT).is_none());
        assert!(OTHER_PORT.contains(&format!("port {} unless", crate::DEFAULT_PORT)));
    }
}
