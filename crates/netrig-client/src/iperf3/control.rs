//! The control connection to an iperf3 server, driving iperf3's client
//! state machine ([`ClientMachine`]) with a bound on every wait: its set-up
//! states, a watch over it while the test runs (which sends TEST_END when
//! this end's window closes), and the results exchange.

use crate::ClientError;
use netrig_engine::RunControl;
use netrig_proto::iperf3::{errors, ClientAction, ClientMachine, Control, Iperf3Error, State};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long each set-up state, and the results, may take to come.
pub(crate) const STEP_WAIT: Duration = Duration::from_secs(15);
/// How long the client waits, after IPERF_DONE, for the server to close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long the client gives a server that has closed to listen again.
const RELISTEN_PAUSE: Duration = Duration::from_millis(100);

/// A busy iperf3 server, in words.
pub(crate) fn busy(addr: SocketAddr) -> ClientError {
    ClientError::Iperf3 {
        addr,
        what: "is busy: it answered ACCESS_DENIED, as iperf3 answers every client while it runs another \
               client's test; try again when that test is over"
            .into(),
    }
}

/// A server's SERVER_ERROR, in iperf3's own words.
fn server_error(addr: SocketAddr, code: i32, errno: i32) -> ClientError {
    let errno = if errno != 0 {
        format!(" ({})", std::io::Error::from_raw_os_error(errno))
    } else {
        String::new()
    };
    ClientError::Iperf3 {
        addr,
        what: format!(
            "gave up the test with SERVER_ERROR: {}{errno}",
            errors::describe(code)
        ),
    }
}

/// The control connection and where it is in iperf3's order.
pub(crate) struct Ctl {
    pub control: Control<TcpStream>,
    pub machine: ClientMachine,
    pub addr: SocketAddr,
}

impl Ctl {
    pub fn new(stream: TcpStream, addr: SocketAddr) -> Ctl {
        Ctl {
            control: Control::new(stream),
            machine: ClientMachine::new(),
            addr,
        }
    }

    /// An error of the control connection in words naming the server and
    /// what was waited for.
    pub fn failed(&self, e: Iperf3Error, waiting: &str) -> ClientError {
        let what = if e.is_timeout() {
            format!(
                "sent nothing within {} s while netrig waited for {waiting}",
                STEP_WAIT.as_secs()
            )
        } else {
            format!("(waiting for {waiting}): {e}")
        };
        ClientError::Iperf3 {
            addr: self.addr,
            what,
        }
    }

    /// The server's next state, within [`STEP_WAIT`], through the machine:
    /// the action it asks for, or the error its refusal or failure is.
    pub fn next(&mut self, waiting: &str) -> Result<ClientAction, ClientError> {
        let _ = self.control.get_ref().set_read_timeout(Some(STEP_WAIT));
        let state = self.control.read_state().map_err(|e| self.failed(e, waiting))?;
        self.on_state(state, None)
    }

    /// `state` (with its error numbers, read already, after SERVER_ERROR)
    /// through the machine.
    pub fn on_state(&mut self, state: State, error: Option<(i32, i32)>) -> Result<ClientAction, ClientError> {
        let addr = self.addr;
        match self.machine.on_server_state(state) {
            Ok(ClientAction::AccessDenied) => Err(busy(addr)),
            Ok(ClientAction::ServerError) => {
                let (code, errno) = match error {
                    Some(e) => e,
                    None => {
                        let _ = self.control.get_ref().set_read_timeout(Some(STEP_WAIT));
                        self.control
                            .read_server_error()
                            .map_err(|e| self.failed(e, "the server's error number"))?
                    }
                };
                Err(server_error(addr, code, errno))
            }
            Ok(ClientAction::ServerTerminated) => Err(ClientError::Iperf3 {
                addr,
                what: "ended the test (SERVER_TERMINATE: it was stopped)".into(),
            }),
            Ok(action) => Ok(action),
            Err(e) => Err(ClientError::Iperf3 {
                addr,
                what: format!("broke iperf3's protocol: {e}"),
            }),
        }
    }

    /// After IPERF_DONE: waits (bounded) for the server to close its end,
    /// which it does once it has taken the test down, closes this one, and
    /// gives it [`RELISTEN_PAUSE`] to listen again: iperf3's server closes
    /// its listening socket after each test and opens it anew, so a test
    /// that followed at once (a sweep's next point) would be refused, or
    /// answered ACCESS_DENIED by a server still taking the last one down.
    pub fn close(&mut self) {
        use std::io::Read;
        let mut s = self.control.get_ref();
        let until = Instant::now() + CLOSE_WAIT;
        let mut buf = [0u8; 256];
        let mut read = 0usize;
        while let Some(left) = until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        {
            let _ = s.set_read_timeout(Some(left));
            match s.read(&mut buf) {
                // What a server says after IPERF_DONE is nothing netrig reads; a bounded amount is let by.
                Ok(n) if n > 0 && read < 64 * 1024 => read += n,
                _ => break,
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
        std::thread::sleep(RELISTEN_PAUSE);
    }

    /// Gives the test up, best effort: CLIENT_TERMINATE, as iperf3's client
    /// sends when it stops (a server that has gone or closed already is
    /// not waited for).
    pub fn terminate(&mut self) {
        if self.machine.send(State::ClientTerminate).is_ok() {
            let _ = self
                .control
                .get_ref()
                .set_write_timeout(Some(Duration::from_secs(1)));
            let _ = self.control.write_state(State::ClientTerminate);
        }
    }

    /// Sends `s`, checked against the order.
    pub fn send(&mut self, s: State) -> Result<(), ClientError> {
        let addr = self.addr;
        self.machine
            .send(s)
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let _ = self.control.get_ref().set_write_timeout(Some(STEP_WAIT));
        self.control.write_state(s).map_err(|e| ClientError::Iperf3 {
            addr,
            what: format!("(sending {}): {e}", s.name()),
        })
    }
}

/// What this end's run tells the watch: still running, over, or failed.
pub(crate) const RUNNING: u8 = 0;
pub(crate) const OVER: u8 = 1;
pub(crate) const FAILED: u8 = 2;

/// What the server said after this end's TEST_END (or instead of it).
pub(crate) struct Answer {
    pub state: State,
    /// After SERVER_ERROR: its error number and errno.
    pub error: Option<(i32, i32)>,
    /// Whether TEST_END went (CLIENT_TERMINATE otherwise).
    pub ended: bool,
}

/// The watch over the control connection while the test runs: it sends
/// TEST_END once the test is over here (a timed test: at `end_at`, when the
/// runner takes the window's last sample, once every TCP stream this end
/// sends has been shut down by its worker; otherwise when the run is over:
/// `local`), CLIENT_TERMINATE when the run failed, and gives the run up
/// (`ctl`) when the server speaks or closes first. iperf3's server closes
/// its streams on TEST_END, so a sender still writing would be reset; what
/// it sends stops at TEST_END, as this end's window closes.
pub(crate) struct Watch {
    pub stream: TcpStream,
    pub addr: SocketAddr,
    pub end_at: Option<Instant>,
    /// This end's sending TCP streams (second handles on them).
    pub senders: Vec<TcpStream>,
    pub local: Arc<AtomicU8>,
    pub ctl: Arc<RunControl>,
}

/// The longest the watch waits, once the window is over, for this end's
/// senders to have shut their streams down.
const SENDERS_WAIT: Duration = Duration::from_secs(2);

impl Watch {
    /// What to send now, if anything: TEST_END, CLIENT_TERMINATE, or nothing yet.
    fn due(&self, now: Instant) -> Option<State> {
        let local = self.local.load(Ordering::Relaxed);
        if local == FAILED || self.ctl.abort_reason().is_some() {
            return Some(State::ClientTerminate);
        }
        if local == OVER {
            return Some(State::TestEnd);
        }
        // The window's end on this end's clock, when the runner takes its
        // last sample: the server stops counting when it reads TEST_END.
        let end = self.end_at?;
        if now < end {
            return None;
        }
        // ESTABLISHED (1) until the worker's shutdown(2) sends its FIN.
        let writing = |s: &TcpStream| {
            use std::os::fd::AsFd;
            netrig_metrics::tcp_info::tcp_info(s.as_fd()).is_ok_and(|t| t.state == 1)
        };
        let waited = now.duration_since(end) > SENDERS_WAIT;
        (waited || !self.senders.iter().any(writing)).then_some(State::TestEnd)
    }

    /// Runs until the server's first state after TEST_END (bounded by
    /// [`STEP_WAIT`] after it), or until it fails.
    pub fn run(self) -> Result<Answer, ClientError> {
        let addr = self.addr;
        let fail = |what: String| ClientError::Iperf3 { addr, what };
        let mut control = Control::new(self.stream.try_clone().map_err(|e| fail(e.to_string()))?);
        let mut sent: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if let Some(state) = self.due(now).filter(|_| sent.is_none()) {
                let _ = control.get_ref().set_write_timeout(Some(STEP_WAIT));
                control
                    .write_state(state)
                    .map_err(|e| fail(format!("(sending {}): {e}", state.name())))?;
                if state == State::ClientTerminate {
                    return Ok(Answer {
                        state,
                        error: None,
                        ended: false,
                    });
                }
                sent = Some(now);
            }
            if sent.is_some_and(|at| now.duration_since(at) > STEP_WAIT) {
                return Err(fail(format!(
                    "did not answer TEST_END within {} s (no EXCHANGE_RESULTS)",
                    STEP_WAIT.as_secs()
                )));
            }
            // Short waits: the window's end, the senders' shutdown and this
            // end's failure are seen within a millisecond or two.
            let wait = match (sent, self.end_at) {
                (None, Some(e)) if e > now => (e - now).min(Duration::from_millis(20)),
                (None, _) => Duration::from_millis(1),
                (Some(_), _) => Duration::from_millis(50),
            };
            let _ = control
                .get_ref()
                .set_read_timeout(Some(wait.max(Duration::from_millis(1))));
            match control.read_state() {
                Ok(state) => {
                    let error = if state == State::ServerError {
                        let _ = control.get_ref().set_read_timeout(Some(STEP_WAIT));
                        Some(control.read_server_error().map_err(|e| fail(format!("{e}")))?)
                    } else {
                        None
                    };
                    if sent.is_none() {
                        self.ctl.abort(format!(
                            "the iperf3 server at {addr} sent {} during the test",
                            state.name()
                        ));
                    }
                    return Ok(Answer {
                        state,
                        error,
                        ended: sent.is_some(),
                    });
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => {
                    let why = format!("the iperf3 server at {addr}: the control connection failed: {e}");
                    self.ctl.abort(why.clone());
                    return Err(ClientError::Test(why));
                }
            }
        }
    }
}

impl Ctl {
    /// A state in the machine's order that is not the one this end waits for.
    pub fn out_of_order(&self, got: ClientAction) -> ClientError {
        ClientError::Iperf3 {
            addr: self.addr,
            what: format!("broke iperf3's order: {got:?} where netrig waited for another state"),
        }
    }
}
