//! netrig's I/O core: every event loop of netrig runs here, the test
//! workers' (crate netrig-engine), the agent's accept loop, the HTTP server's
//! workers and the HTTP load generator's threads. One [`Reactor`] owns the
//! poll, retries an interrupted one, reports readiness by token, keeps the
//! drain's deadline once the loop is told to stop, and may own a [`Timer`]
//! finer than the poll's millisecond; a loop's own logic is a [`Handler`].
//! [`Wake`] is the one place a turn's deadlines become the poll's timeout,
//! and [`thread_cpu_time`] the one reading of a thread's CPU clock.
//!
//! A leaf: it depends on no other netrig crate, so that the HTTP server
//! stays free of netrig's test machinery.

mod clock;
mod reactor;
mod timer;

pub use clock::{cpu_clock, thread_cpu_time};
pub use reactor::{reserved, Handler, Io, LoopError, Now, Reactor, Ready, Wake, IDLE, RESERVED, TIMER};
pub use timer::Timer;
