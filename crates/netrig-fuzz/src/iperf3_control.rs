//! An iperf3 control connection from either end, as netrig reads it: the
//! peer's bytes through `netrig_proto::iperf3::Control` and the state
//! machine of the end netrig plays (the agent's [`ServerMachine`], the
//! client's [`ClientMachine`]), with the reads each state calls for
//! (parameters, results, a server's error).
//!
//! Invariants: no panic; no read allocates more than its bound (a length of
//! 4 GB is refused unread); a machine's phase never goes back, and once a
//! test is done or given up every further state is an error.

use arbitrary::Arbitrary;
use netrig_proto::iperf3::{
    ClientAction, ClientMachine, Control, Params, Phase, Results, ServerAction, ServerMachine, State,
    MAX_PARAMS_JSON, MAX_RESULTS_JSON,
};
use std::io::Cursor;

#[derive(Arbitrary, Debug)]
struct Input {
    /// netrig plays the server (the agent) or the client.
    server: bool,
    /// The peer's bytes.
    bytes: Vec<u8>,
}

fn rank(p: Phase) -> u8 {
    p as u8
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let mut c = Control::new(Cursor::new(input.bytes));
    if input.server {
        as_server(&mut c);
    } else {
        as_client(&mut c);
    }
}

/// The agent's side: what it sends moves its machine; what it reads is the input.
fn as_server(c: &mut Control<Cursor<Vec<u8>>>) {
    let mut m = ServerMachine::new();
    m.send(State::ParamExchange).expect("the first state");
    let Ok(json) = c.read_json(MAX_PARAMS_JSON) else {
        return;
    };
    assert!(json.len() <= MAX_PARAMS_JSON);
    let _ = Params::decode(&json).map(|p| p.check());
    for s in [State::CreateStreams, State::TestStart, State::TestRunning] {
        m.send(s).expect("the server's own order");
    }
    for _ in 0..64 {
        let before = rank(m.phase());
        let Ok(state) = c.read_state() else { return };
        match m.on_client_state(state) {
            Ok(ServerAction::EndTest) => {
                m.send(State::ExchangeResults).expect("after TEST_END");
                let Ok(json) = c.read_json(MAX_RESULTS_JSON) else {
                    return;
                };
                let _ = Results::decode(&json);
                m.send(State::DisplayResults).expect("after the exchange");
            }
            Ok(_) => {}
            Err(_) => return,
        }
        assert!(rank(m.phase()) >= before, "{:?} went back", m.phase());
        if matches!(m.phase(), Phase::Done | Phase::Terminated) {
            assert!(m.on_client_state(State::TestEnd).is_err());
            assert!(m.send(State::ExchangeResults).is_err());
            return;
        }
    }
}

/// The client's side: netrig sends TEST_END once the server says it runs.
fn as_client(c: &mut Control<Cursor<Vec<u8>>>) {
    let mut m = ClientMachine::new();
    for _ in 0..64 {
        let before = rank(m.phase());
        let Ok(state) = c.read_state() else { return };
        match m.on_server_state(state) {
            Ok(ClientAction::Running) => m.send(State::TestEnd).expect("TEST_END while running"),
            Ok(ClientAction::ExchangeResults) => {
                let Ok(json) = c.read_json(MAX_RESULTS_JSON) else {
                    return;
                };
                let _ = Results::decode(&json);
            }
            Ok(ClientAction::Display) => m.send(State::IperfDone).expect("IPERF_DONE after display"),
            Ok(ClientAction::ServerError) => {
                let _ = c.read_server_error();
            }
            Ok(_) => {}
            Err(_) => return,
        }
        assert!(rank(m.phase()) >= before, "{:?} went back", m.phase());
        if matches!(m.phase(), Phase::Done | Phase::Terminated) {
            assert!(m.on_server_state(State::ParamExchange).is_err());
            return;
        }
    }
}
