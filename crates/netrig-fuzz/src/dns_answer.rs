//! A DNS server's answer (`netrig mesh --discover`): `netrig_fleet::discover::parse_answer` on
//! arbitrary bytes, as a UDP datagram or a TCP answer (after its length) would bring them.
//! The query id is the message's own (its first two bytes), so that the fuzzer reaches the
//! parse; and another id, which must be refused before any parsing.
//!
//! Invariants: no panic; another id is [`AnswerError::WrongId`] (or `Short` under 12 bytes);
//! an answer is taken only with the QR bit set, with the TC bit as the header has it, at most
//! `MAX_RECORDS` records of each list, every name printable ASCII (hickory's escapes) of
//! bounded length.

use netrig_fleet::discover::{parse_answer, Answer, AnswerError, MAX_RECORDS};

/// The longest name as text: 255 bytes on the wire, each escaped as `\DDD` at most.
const MAX_NAME_TEXT: usize = 4 * 255;

pub fn run(data: &[u8]) {
    let id = match data {
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
        _ => 0,
    };
    let other = id ^ 0x5a5a;
    match parse_answer(other, data) {
        Err(AnswerError::WrongId { want, got }) => {
            assert!(data.len() >= 12);
            assert_eq!((want, got), (other, id));
        }
        Err(AnswerError::Short(n)) => assert!(n == data.len() && n < 12),
        taken => panic!("an answer to another query taken: {taken:?}"),
    }
    match parse_answer(id, data) {
        Ok(answer) => check(data, &answer),
        Err(AnswerError::WrongId { .. }) => panic!("its own id refused"),
        Err(AnswerError::Short(n)) => assert!(n == data.len() && n < 12),
        Err(AnswerError::NotAResponse) | Err(AnswerError::Malformed(_)) => {}
    }
}

fn check(data: &[u8], a: &Answer) {
    assert!(data.len() >= 12);
    assert_ne!(data[2] & 0x80, 0, "a query taken as an answer");
    assert_eq!(a.truncated, data[2] & 0x02 != 0, "the TC bit");
    assert!(a.srv.len() <= MAX_RECORDS);
    assert!(a.addresses.len() <= MAX_RECORDS);
    assert!(a.additional.len() <= MAX_RECORDS);
    let names = a
        .srv
        .iter()
        .map(|s| &s.target)
        .chain(a.addresses.iter().map(|(n, _)| n))
        .chain(a.additional.iter().map(|(n, _)| n))
        .chain(a.question.iter().map(|(n, _)| n));
    for name in names {
        assert!(!name.is_empty() && name.len() <= MAX_NAME_TEXT, "{name:?}");
        assert!(name.bytes().all(|b| b.is_ascii_graphic()), "{name:?}");
    }
}
