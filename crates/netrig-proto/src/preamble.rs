//! The fixed-size binary greetings that open every connection to the agent.
//!
//! Control and data connections share the agent's one port, so the first
//! four bytes say which is which. The control preamble's layout never changes
//! between protocol versions: that is what lets two different versions tell
//! each other, in words, that they do not match.

use crate::ProtoError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// First bytes of a control connection.
pub const CONTROL_MAGIC: [u8; 4] = *b"NRGC";
/// First bytes of a data connection (and of a UDP flow's hello datagram).
pub const DATA_MAGIC: [u8; 4] = *b"NRGD";
/// First bytes of the agent's answer to a UDP flow's hello.
pub const UDP_ACK_MAGIC: [u8; 4] = *b"NRGA";

/// Which kind of connection a peer opened, from its first four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    Control,
    Data,
}

impl ConnKind {
    pub fn from_magic(magic: [u8; 4]) -> Result<Self, ProtoError> {
        match magic {
            CONTROL_MAGIC => Ok(ConnKind::Control),
            DATA_MAGIC => Ok(ConnKind::Data),
            other => Err(foreign(other).map_or(ProtoError::BadMagic(other), ProtoError::Foreign)),
        }
    }
}

/// Sent by the client on a new control connection: magic, then the range of
/// protocol versions it speaks (big-endian u16s). 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPreamble {
    pub min_version: u16,
    pub max_version: u16,
}

impl ControlPreamble {
    pub const LEN: usize = 8;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&CONTROL_MAGIC);
        b[4..6].copy_from_slice(&self.min_version.to_be_bytes());
        b[6..8].copy_from_slice(&self.max_version.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; Self::LEN]) -> Result<Self, ProtoError> {
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != CONTROL_MAGIC {
            return Err(ProtoError::BadMagic(magic));
        }
        let p = ControlPreamble {
            min_version: u16::from_be_bytes([b[4], b[5]]),
            max_version: u16::from_be_bytes([b[6], b[7]]),
        };
        if p.min_version > p.max_version || p.min_version == 0 {
            return Err(ProtoError::Malformed(format!(
                "version range {}..{} is empty",
                p.min_version, p.max_version
            )));
        }
        Ok(p)
    }
}

/// How long the greeting that begins with `first` is, so that a reader
/// takes no byte past it (what follows belongs to the session, or is test
/// traffic): until the magic is whole, the shorter greeting's length; then
/// the control preamble's or the data hello's, by the magic; an error for a
/// magic that is neither.
pub fn greeting_len(first: &[u8]) -> Result<usize, ProtoError> {
    match first.first_chunk::<4>() {
        None => Ok(ControlPreamble::LEN.min(DataHello::LEN)),
        Some(magic) => Ok(match ConnKind::from_magic(*magic)? {
            ConnKind::Control => ControlPreamble::LEN,
            ConnKind::Data => DataHello::LEN,
        }),
    }
}

/// A random 128-bit identifier the agent gives each test. Data connections
/// must present it: without it the agent closes them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionCookie(pub [u8; 16]);

impl fmt::Debug for SessionCookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionCookie({self})")
    }
}

impl fmt::Display for SessionCookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl SessionCookie {
    /// The first 8 bytes, as every UDP test datagram carries them.
    pub fn test_id(&self) -> u64 {
        u64::from_be_bytes([
            self.0[0], self.0[1], self.0[2], self.0[3], self.0[4], self.0[5], self.0[6], self.0[7],
        ])
    }

    pub fn from_hex(s: &str) -> Result<Self, ProtoError> {
        let bad = || ProtoError::Malformed(format!("session cookie {s:?} is not 32 hex digits"));
        // Hex digits only: `from_str_radix` alone would also take a sign
        // ("+f"), giving one cookie several spellings.
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(SessionCookie(out))
    }
}

impl Serialize for SessionCookie {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SessionCookie {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SessionCookie::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

/// Sent by the client as the first 32 bytes of every data connection. What
/// follows on that connection is test traffic, never counted before this
/// header is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    pub version: u16,
    pub cookie: SessionCookie,
    /// Index of the flow in the test's flow list (see `TestSpec::flow_plan`).
    pub flow: u32,
}

impl DataHello {
    pub const LEN: usize = 32;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&DATA_MAGIC);
        b[4..6].copy_from_slice(&self.version.to_be_bytes());
        // bytes 6..8 reserved, zero
        b[8..24].copy_from_slice(&self.cookie.0);
        b[24..28].copy_from_slice(&self.flow.to_be_bytes());
        // bytes 28..32 reserved, zero
        b
    }

    pub fn decode(b: &[u8; Self::LEN]) -> Result<Self, ProtoError> {
        Self::decode_with(b, DATA_MAGIC)
    }

    /// Whether `first`, a connection's first bytes (as many as came), may
    /// begin a data connection's greeting: they agree with [`DATA_MAGIC`]
    /// as far as they go.
    pub fn may_begin(first: &[u8]) -> bool {
        let n = first.len().min(DATA_MAGIC.len());
        first[..n] == DATA_MAGIC[..n]
    }

    /// Whether `first` is a data greeting begun and not yet whole: more of
    /// it is worth waiting for.
    pub fn partial(first: &[u8]) -> bool {
        !first.is_empty() && first.len() < Self::LEN && Self::may_begin(first)
    }

    /// The agent's acknowledgement of a UDP flow's hello: the same 32 bytes
    /// with [`UDP_ACK_MAGIC`], sent from the flow's own socket.
    pub fn encode_ack(&self) -> [u8; Self::LEN] {
        let mut b = self.encode();
        b[..4].copy_from_slice(&UDP_ACK_MAGIC);
        b
    }

    pub fn decode_ack(b: &[u8; Self::LEN]) -> Result<Self, ProtoError> {
        Self::decode_with(b, UDP_ACK_MAGIC)
    }

    /// The test id carried by every UDP datagram: the cookie's first 8 bytes.
    pub fn test_id(&self) -> u64 {
        self.cookie.test_id()
    }

    fn decode_with(b: &[u8; Self::LEN], want: [u8; 4]) -> Result<Self, ProtoError> {
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != want {
            return Err(ProtoError::BadMagic(magic));
        }
        let version = u16::from_be_bytes([b[4], b[5]]);
        if !(crate::MIN_PROTOCOL_VERSION..=crate::PROTOCOL_VERSION).contains(&version) {
            return Err(ProtoError::Malformed(format!(
                "a data hello of protocol version {version} (this build speaks {}..={})",
                crate::MIN_PROTOCOL_VERSION,
                crate::PROTOCOL_VERSION
            )));
        }
        if b[6..8].iter().chain(&b[28..32]).any(|x| *x != 0) {
            return Err(ProtoError::Malformed(
                "a data hello with bytes in its reserved fields".into(),
            ));
        }
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&b[8..24]);
        Ok(DataHello {
            version,
            cookie: SessionCookie(cookie),
            flow: u32::from_be_bytes([b[24], b[25], b[26], b[27]]),
        })
    }
}

/// Whether a connection's first four bytes may begin an iperf3 cookie
/// (base32's letters: a-z, 2-7), which the agent serves as iperf3.
pub fn iperf3_cookie_start(first: [u8; 4]) -> bool {
    first
        .iter()
        .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(b))
}

/// Names a known other tool from the first bytes it sends: an iperf3
/// client opens with a 37-byte cookie of base32 letters (a-z, 2-7); an
/// HTTP client with a method.
pub fn foreign(first: [u8; 4]) -> Option<&'static str> {
    if iperf3_cookie_start(first) {
        return Some("an iperf3 client (its cookie)");
    }
    if [*b"GET ", *b"POST", *b"HEAD", *b"PUT ", *b"OPTI"].contains(&first) {
        return Some("an HTTP request");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A greeting is read to its end and never past it, however its bytes
    /// come; a data greeting in part is told from anything else at once.
    #[test]
    fn greetings_are_measured_by_their_first_bytes() {
        assert_eq!(greeting_len(b"").unwrap(), ControlPreamble::LEN);
        assert_eq!(greeting_len(b"NRG").unwrap(), ControlPreamble::LEN);
        assert_eq!(greeting_len(b"NRGC").unwrap(), ControlPreamble::LEN);
        assert_eq!(greeting_len(b"NRGD\0").unwrap(), DataHello::LEN);
        assert!(greeting_len(b"GET /").is_err());
        let whole = DataHello {
            version: crate::PROTOCOL_VERSION,
            cookie: SessionCookie([1; 16]),
            flow: 2,
        }
        .encode();
        assert!(DataHello::may_begin(b"") && DataHello::may_begin(b"NR") && DataHello::may_begin(&whole));
        assert!(!DataHello::may_begin(b"NRGC") && !DataHello::may_begin(b"X"));
        assert!(DataHello::partial(&whole[..5]) && DataHello::partial(b"N"));
        assert!(!DataHello::partial(b""), "nothing yet is not a greeting begun");
        assert!(!DataHello::partial(&whole), "whole");
        assert!(!DataHello::partial(b"NRGC0000"), "a control preamble");
    }

    /// Issue #11: an iperf3 client and an HTTP request are named, not only
    /// "not a netrig peer"; a data hello of another version or with bytes
    /// in its reserved fields is refused.
    #[test]
    fn neighbours_are_named_and_data_hellos_checked() {
        let e = ConnKind::from_magic(*b"k3qz").unwrap_err().to_string();
        assert!(e.starts_with("an iperf3 client"), "{e}");
        assert!(ConnKind::from_magic(*b"GET ")
            .unwrap_err()
            .to_string()
            .starts_with("an HTTP request"));
        assert!(matches!(
            ConnKind::from_magic([0, 1, 2, 3]),
            Err(ProtoError::BadMagic(_))
        ));
        let h = DataHello {
            version: crate::PROTOCOL_VERSION,
            cookie: SessionCookie([7; 16]),
            flow: 3,
        };
        assert_eq!(DataHello::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b[4..6].copy_from_slice(&99u16.to_be_bytes());
        assert!(DataHello::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("version 99"));
        let mut b = h.encode();
        b[30] = 1;
        assert!(DataHello::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("reserved"));
    }

    #[test]
    fn control_preamble_roundtrip() {
        let p = ControlPreamble {
            min_version: 1,
            max_version: 7,
        };
        assert_eq!(ControlPreamble::decode(&p.encode()).unwrap(), p);
    }

    #[test]
    fn control_preamble_rejects_empty_range_and_foreign_magic() {
        let mut b = ControlPreamble {
            min_version: 3,
            max_version: 2,
        }
        .encode();
        assert!(ControlPreamble::decode(&b).is_err());
        b[..4].copy_from_slice(b"GET ");
        assert!(matches!(
            ControlPreamble::decode(&b),
            Err(ProtoError::BadMagic(_))
        ));
    }

    #[test]
    fn data_hello_roundtrip() {
        let h = DataHello {
            version: crate::PROTOCOL_VERSION,
            cookie: SessionCookie([7; 16]),
            flow: 9999,
        };
        assert_eq!(DataHello::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn magic_dispatch() {
        assert_eq!(ConnKind::from_magic(CONTROL_MAGIC).unwrap(), ConnKind::Control);
        assert_eq!(ConnKind::from_magic(DATA_MAGIC).unwrap(), ConnKind::Data);
        // iperf3 opens with a 37-byte cookie of printable characters.
        assert!(ConnKind::from_magic(*b"abcd").is_err());
    }

    #[test]
    fn cookie_hex_roundtrip_and_rejects_junk() {
        let c = SessionCookie([0xab; 16]);
        assert_eq!(SessionCookie::from_hex(&c.to_string()).unwrap(), c);
        assert!(SessionCookie::from_hex("zz").is_err());
        assert!(SessionCookie::from_hex(&"é".repeat(16)).is_err());
    }

    /// Found by the `preamble` fuzz target: `u8::from_str_radix` takes a
    /// leading `+`, so "+f" read as 0x0f and a cookie had several spellings.
    #[test]
    fn cookie_hex_takes_hex_digits_only() {
        assert!(SessionCookie::from_hex("00056000+00823508943aacbccddeeff").is_err());
        assert!(SessionCookie::from_hex(&"+f".repeat(16)).is_err());
        assert!(SessionCookie::from_hex(&"-0".repeat(16)).is_err());
        assert!(SessionCookie::from_hex(&" f".repeat(16)).is_err());
        let upper = "00112233445566778899AABBCCDDEEFF";
        assert_eq!(
            SessionCookie::from_hex(upper).unwrap().to_string(),
            upper.to_ascii_lowercase()
        );
    }
}
