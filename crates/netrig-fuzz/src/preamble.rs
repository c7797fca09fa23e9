//! The first bytes of every connection to the agent: the magic that says
//! which kind it is (or which other program's peer it is, for the log), the
//! 8-byte control preamble and version negotiation, and the session
//! cookie's hex form (as `test_accepted` carries it).
//!
//! Invariants: no panic; no netrig magic is named another program's; a
//! preamble is accepted only with the control magic
//! and a non-empty version range from 1, and then encodes back to exactly the
//! bytes read; negotiation picks a version inside both ranges or says there
//! is none only when they are disjoint; a cookie is accepted only as 32 hex
//! digits, and prints back as the same digits. The client's side: an answer
//! to its preamble (`neighbour::recognise`) names a server only when it does
//! not start as a netrig frame, and its words stay short and printable.

use netrig_proto::preamble::{foreign, ConnKind, UDP_ACK_MAGIC};
use netrig_proto::{
    negotiate, ControlPreamble, ProtoError, SessionCookie, CONTROL_MAGIC, DATA_MAGIC, MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    if let Some(b) = data.get(..ControlPreamble::LEN) {
        let b: [u8; ControlPreamble::LEN] = b.try_into().expect("8 bytes");
        let magic = [b[0], b[1], b[2], b[3]];
        let (lo, hi) = (u16::from_be_bytes([b[4], b[5]]), u16::from_be_bytes([b[6], b[7]]));
        match ControlPreamble::decode(&b) {
            Ok(p) => {
                assert_eq!(magic, CONTROL_MAGIC);
                assert_eq!(p.encode(), b, "an accepted preamble encodes back to its bytes");
                assert!(p.min_version >= 1 && p.min_version <= p.max_version, "{p:?}");
                let ours = (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION);
                match negotiate(ours, (p.min_version, p.max_version)) {
                    Some(v) => {
                        assert!((ours.0..=ours.1).contains(&v), "{v} outside ours");
                        assert!((p.min_version..=p.max_version).contains(&v), "{v} outside theirs");
                        assert!(v == ours.1 || v == p.max_version, "{v} is not the highest common");
                    }
                    None => assert!(p.max_version < ours.0 || p.min_version > ours.1),
                }
            }
            Err(ProtoError::BadMagic(m)) => {
                assert_eq!(m, magic);
                assert_ne!(m, CONTROL_MAGIC);
            }
            Err(ProtoError::Malformed(_)) => {
                assert_eq!(magic, CONTROL_MAGIC);
                assert!(lo == 0 || lo > hi, "refused the range {lo}..{hi}");
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
        match ConnKind::from_magic(magic) {
            Ok(ConnKind::Control) => assert_eq!(magic, CONTROL_MAGIC),
            Ok(ConnKind::Data) => assert_eq!(magic, DATA_MAGIC),
            Err(_) => assert!(magic != CONTROL_MAGIC && magic != DATA_MAGIC),
        }
        // What the agent's log calls a peer that is not netrig's.
        if foreign(magic).is_some() {
            assert!(
                ![CONTROL_MAGIC, DATA_MAGIC, UDP_ACK_MAGIC].contains(&magic),
                "{magic:?}"
            );
        }
    }

    // An answer to the client's preamble.
    if let Some(n) = netrig_proto::neighbour::recognise(data) {
        assert!(!netrig_proto::neighbour::may_be_netrig(data[0]), "{n:?}");
        assert!(n.how.len() < 200, "{n:?}");
        assert!(n.how.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{n:?}");
    }

    // The cookie, as text and as the JSON string a message carries.
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(c) = SessionCookie::from_hex(s) {
            assert_eq!(s.len(), 32);
            assert!(s.bytes().all(|b| b.is_ascii_hexdigit()), "accepted {s:?}");
            assert_eq!(c.to_string(), s.to_ascii_lowercase(), "accepted {s:?}");
        }
    }
    if let Ok(c) = serde_json::from_slice::<SessionCookie>(data) {
        let text = serde_json::to_string(&c).expect("a cookie serializes");
        assert_eq!(
            serde_json::from_str::<SessionCookie>(&text).expect("and reads back"),
            c
        );
    }
}
