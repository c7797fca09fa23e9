//! The 32-byte `DataHello` that opens every data connection and UDP flow
//! (and its `NRGA` acknowledgement).
//!
//! Invariants: no panic; a hello is accepted only with its magic, and then
//! encodes back to the bytes read with the reserved bytes (6..8, 28..32)
//! zeroed; its test id is the cookie's first 8 bytes; a hello and an ack are
//! never both accepted from the same bytes.

use netrig_proto::preamble::UDP_ACK_MAGIC;
use netrig_proto::{DataHello, DATA_MAGIC};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Some(b) = data.get(..DataHello::LEN) else {
        return;
    };
    let b: [u8; DataHello::LEN] = b.try_into().expect("32 bytes");
    let canonical = b;
    // A hello of a version this build speaks, with its reserved bytes zero.
    let version = u16::from_be_bytes([b[4], b[5]]);
    let well_formed = (netrig_proto::MIN_PROTOCOL_VERSION..=netrig_proto::PROTOCOL_VERSION)
        .contains(&version)
        && b[6..8].iter().chain(&b[28..32]).all(|x| *x == 0);
    let hello = DataHello::decode(&b);
    let ack = DataHello::decode_ack(&b);
    assert!(!(hello.is_ok() && ack.is_ok()), "one magic cannot be both");
    if let Ok(h) = hello {
        assert_eq!(b[..4], DATA_MAGIC);
        assert_eq!(h.encode(), canonical);
        assert_eq!(h.test_id().to_be_bytes(), b[8..16]);
        assert_eq!(DataHello::decode(&h.encode()).expect("re-decodes"), h);
        let mut a = canonical;
        a[..4].copy_from_slice(&UDP_ACK_MAGIC);
        assert_eq!(h.encode_ack(), a);
    } else {
        assert!(
            b[..4] != DATA_MAGIC || !well_formed,
            "a well-formed hello refused"
        );
    }
    if let Ok(h) = ack {
        assert_eq!(b[..4], UDP_ACK_MAGIC);
        assert_eq!(h.encode_ack(), {
            let mut a = canonical;
            a[..4].copy_from_slice(&UDP_ACK_MAGIC);
            a
        });
    } else {
        assert!(
            b[..4] != UDP_ACK_MAGIC || !well_formed,
            "a well-formed ack refused"
        );
    }
}
