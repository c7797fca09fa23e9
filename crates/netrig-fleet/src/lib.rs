//! netrig across many hosts (issue #43, docs/FLEET.md): which pairs of agents test when
//! (schedule.rs: a full mesh in the fewest rounds by the circle method, pairs, a star of many
//! clients to one server, each under a stated concurrency), where the agents are (discover.rs:
//! the SRV, A and AAAA records a Kubernetes headless Service publishes, asked of a DNS server),
//! and what a mesh found (matrix.rs: the document, one cell per pair; render.rs: its table, CSV
//! and HTML heat map; plan.rs: a mesh plan in TOML, several tests over one schedule). The
//! orchestration itself (asking agent A to test agent B) is the
//! client's and the agent's; this crate holds no I/O but the DNS exchange.

pub mod discover;
pub mod matrix;
pub mod orchestrate;
pub mod plan;
pub mod render;
pub mod schedule;
