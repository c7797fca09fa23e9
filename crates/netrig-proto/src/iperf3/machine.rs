//! The control connection's order of states, for both ends, without I/O:
//! what each end may send next, and what it does on what the other sends.
//! The agent drives [`ServerMachine`], the client [`ClientMachine`]; the
//! fuzz target drives both with arbitrary bytes.
//!
//! The order (iperf_client_api.c, iperf_server_api.c): the client sends its
//! cookie; the server PARAM_EXCHANGE, the client its parameters; the server
//! CREATE_STREAMS, the client connects the streams; the server TEST_START
//! and TEST_RUNNING; the client TEST_END when its test is over; the server
//! EXCHANGE_RESULTS, both send results (the client first); the server
//! DISPLAY_RESULTS, the client IPERF_DONE. Either may give up: the client
//! with CLIENT_TERMINATE, the server with SERVER_TERMINATE, ACCESS_DENIED
//! or SERVER_ERROR.

use super::{Iperf3Error, State};

/// Where a control connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The client has sent (or the server waits for) the cookie.
    Cookie,
    /// PARAM_EXCHANGE sent: the parameters are due.
    Params,
    /// CREATE_STREAMS sent: the client connects its streams.
    Streams,
    /// TEST_START sent.
    Starting,
    /// TEST_RUNNING sent: the test runs until the client's TEST_END.
    Running,
    /// TEST_END sent.
    Ended,
    /// EXCHANGE_RESULTS sent: results cross.
    Exchanging,
    /// DISPLAY_RESULTS sent: IPERF_DONE is due.
    Displayed,
    /// IPERF_DONE: the test is over.
    Done,
    /// One end gave up.
    Terminated,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Cookie => "cookie",
            Phase::Params => "parameters",
            Phase::Streams => "stream set-up",
            Phase::Starting => "test start",
            Phase::Running => "test",
            Phase::Ended => "test end",
            Phase::Exchanging => "results exchange",
            Phase::Displayed => "results display",
            Phase::Done => "done",
            Phase::Terminated => "terminated",
        }
    }

    fn is_over(self) -> bool {
        matches!(self, Phase::Done | Phase::Terminated)
    }
}

fn unexpected(s: State, phase: Phase) -> Iperf3Error {
    Iperf3Error::Unexpected {
        byte: s.byte(),
        name: s.name(),
        phase: phase.name(),
    }
}

/// What a server does on a client's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAction {
    /// TEST_END: stop the test, send EXCHANGE_RESULTS, read the client's
    /// results and send its own, send DISPLAY_RESULTS.
    EndTest,
    /// IPERF_DONE: the test is over.
    Done,
    /// CLIENT_TERMINATE: the client gave up; stop and close.
    ClientTerminated,
    /// A state iperf3's server reads and ignores (TEST_START).
    Ignore,
}

/// The server's end of a control connection.
#[derive(Debug, Clone)]
pub struct ServerMachine {
    phase: Phase,
}

impl Default for ServerMachine {
    fn default() -> Self {
        ServerMachine::new()
    }
}

impl ServerMachine {
    /// A connection whose cookie is due.
    pub fn new() -> Self {
        ServerMachine { phase: Phase::Cookie }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Checks the server's own next state against the order, and moves on.
    pub fn send(&mut self, s: State) -> Result<(), Iperf3Error> {
        let next = match (self.phase, s) {
            (p, _) if p.is_over() => return Err(unexpected(s, p)),
            (_, State::AccessDenied | State::ServerError | State::ServerTerminate) => Phase::Terminated,
            (Phase::Cookie, State::ParamExchange) => Phase::Params,
            (Phase::Params, State::CreateStreams) => Phase::Streams,
            (Phase::Streams, State::TestStart) => Phase::Starting,
            (Phase::Starting, State::TestRunning) => Phase::Running,
            (Phase::Ended, State::ExchangeResults) => Phase::Exchanging,
            (Phase::Exchanging, State::DisplayResults) => Phase::Displayed,
            (p, _) => return Err(unexpected(s, p)),
        };
        self.phase = next;
        Ok(())
    }

    /// A state the client sent.
    pub fn on_client_state(&mut self, s: State) -> Result<ServerAction, Iperf3Error> {
        let (next, action) = match (self.phase, s) {
            (p, _) if p.is_over() => return Err(unexpected(s, p)),
            (_, State::ClientTerminate) => (Phase::Terminated, ServerAction::ClientTerminated),
            (p, State::TestStart) => (p, ServerAction::Ignore),
            (Phase::Running, State::TestEnd) => (Phase::Ended, ServerAction::EndTest),
            (Phase::Displayed, State::IperfDone) => (Phase::Done, ServerAction::Done),
            (p, _) => return Err(unexpected(s, p)),
        };
        self.phase = next;
        Ok(action)
    }
}

/// What a client does on a server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAction {
    /// PARAM_EXCHANGE: send the parameters.
    SendParams,
    /// CREATE_STREAMS: connect the streams.
    CreateStreams,
    /// TEST_START: start the test's clocks.
    StartTest,
    /// TEST_RUNNING: the test runs; send TEST_END when it is over.
    Running,
    /// EXCHANGE_RESULTS: send the client's results, read the server's.
    ExchangeResults,
    /// DISPLAY_RESULTS: report, then send IPERF_DONE.
    Display,
    /// SERVER_TERMINATE: the server gave up.
    ServerTerminated,
    /// ACCESS_DENIED: the server is busy with another test.
    AccessDenied,
    /// SERVER_ERROR: read the error's number and errno, then stop.
    ServerError,
}

/// The client's end of a control connection.
#[derive(Debug, Clone)]
pub struct ClientMachine {
    phase: Phase,
}

impl Default for ClientMachine {
    fn default() -> Self {
        ClientMachine::new()
    }
}

impl ClientMachine {
    /// A connection whose cookie has been sent.
    pub fn new() -> Self {
        ClientMachine { phase: Phase::Cookie }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// A state the server sent.
    pub fn on_server_state(&mut self, s: State) -> Result<ClientAction, Iperf3Error> {
        let (next, action) = match (self.phase, s) {
            (p, _) if p.is_over() => return Err(unexpected(s, p)),
            (_, State::AccessDenied) => (Phase::Terminated, ClientAction::AccessDenied),
            (_, State::ServerError) => (Phase::Terminated, ClientAction::ServerError),
            (_, State::ServerTerminate) => (Phase::Terminated, ClientAction::ServerTerminated),
            (Phase::Cookie, State::ParamExchange) => (Phase::Params, ClientAction::SendParams),
            (Phase::Params, State::CreateStreams) => (Phase::Streams, ClientAction::CreateStreams),
            (Phase::Streams, State::TestStart) => (Phase::Starting, ClientAction::StartTest),
            (Phase::Starting, State::TestRunning) => (Phase::Running, ClientAction::Running),
            (Phase::Ended, State::ExchangeResults) => (Phase::Exchanging, ClientAction::ExchangeResults),
            (Phase::Exchanging, State::DisplayResults) => (Phase::Displayed, ClientAction::Display),
            (p, _) => return Err(unexpected(s, p)),
        };
        self.phase = next;
        Ok(action)
    }

    /// Checks the client's own next state against the order, and moves on.
    pub fn send(&mut self, s: State) -> Result<(), Iperf3Error> {
        let next = match (self.phase, s) {
            (p, _) if p.is_over() => return Err(unexpected(s, p)),
            (_, State::ClientTerminate) => Phase::Terminated,
            (Phase::Running, State::TestEnd) => Phase::Ended,
            (Phase::Displayed, State::IperfDone) => Phase::Done,
            (p, _) => return Err(unexpected(s, p)),
        };
        self.phase = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both machines walk a whole test, each the other's mirror.
    #[test]
    fn a_whole_test_in_both_machines() {
        let (mut s, mut c) = (ServerMachine::new(), ClientMachine::new());
        let steps = [
            (State::ParamExchange, ClientAction::SendParams),
            (State::CreateStreams, ClientAction::CreateStreams),
            (State::TestStart, ClientAction::StartTest),
            (State::TestRunning, ClientAction::Running),
        ];
        for (state, action) in steps {
            s.send(state).unwrap();
            assert_eq!(c.on_server_state(state).unwrap(), action);
        }
        c.send(State::TestEnd).unwrap();
        assert_eq!(s.on_client_state(State::TestEnd).unwrap(), ServerAction::EndTest);
        s.send(State::ExchangeResults).unwrap();
        assert_eq!(
            c.on_server_state(State::ExchangeResults).unwrap(),
            ClientAction::ExchangeResults
        );
        s.send(State::DisplayResults).unwrap();
        assert_eq!(
            c.on_server_state(State::DisplayResults).unwrap(),
            ClientAction::Display
        );
        c.send(State::IperfDone).unwrap();
        assert_eq!(s.on_client_state(State::IperfDone).unwrap(), ServerAction::Done);
        assert_eq!((s.phase(), c.phase()), (Phase::Done, Phase::Done));
        assert!(s.on_client_state(State::TestEnd).is_err());
        assert!(c.on_server_state(State::ServerError).is_err());
    }

    #[test]
    fn out_of_order_states_are_errors_and_giving_up_is_final() {
        let mut s = ServerMachine::new();
        assert!(s.on_client_state(State::TestEnd).is_err());
        assert!(s.send(State::TestRunning).is_err());
        assert_eq!(s.on_client_state(State::TestStart).unwrap(), ServerAction::Ignore);
        assert_eq!(
            s.on_client_state(State::ClientTerminate).unwrap(),
            ServerAction::ClientTerminated
        );
        assert!(s.send(State::ParamExchange).is_err());
        let mut c = ClientMachine::new();
        assert!(c.on_server_state(State::TestRunning).is_err());
        assert_eq!(
            c.on_server_state(State::AccessDenied).unwrap(),
            ClientAction::AccessDenied
        );
        assert!(c.send(State::TestEnd).is_err());
        let mut early = ClientMachine::new();
        assert!(early.send(State::TestEnd).is_err());
    }
}
