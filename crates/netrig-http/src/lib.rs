//! netrig's HTTP/1.1 test server (the "userver" of the IA64 study): `GET /bytes/N` answers a body
//! of exactly N bytes, `?delay_ms=M` answers M ms late (a timer on the event loop), the whole
//! server can be stalled ([`Server::stall`]), and its own counts are read in process
//! ([`Server::stats`]) or at `GET /.netrig/stats`. Bounded against abuse: head bytes and time,
//! idle keep-alive time, connections in total. docs/HTTP.md.
//!
//! HTTP/2 is not served; its seam is the TLS configuration's ALPN list (tls.rs) and the
//! version refusal in parse.rs (505 to the HTTP/2 preface).

pub mod parse;
pub mod server;
pub mod stats;
pub mod tls;

pub use server::{body_byte, Bounds, Handle, Listener, Server, ServerConfig, ServerError};
pub use stats::{Close, Refusal, Snapshot};
