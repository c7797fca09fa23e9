//! The client end of a test: resolve the agent, shake hands, open the data
//! connections, run this end's flows on the shared engine while the agent
//! runs its own, and merge both reports into one result.

mod error;
pub mod iperf3;
mod link;
mod profile;
mod resolve;
mod run;
mod watch;

pub use error::ClientError;
pub use link::ClientOptions;
pub use resolve::{resolve, Family};
pub use run::{Client, Connected, MAX_START_WAIT};
pub use watch::Watching;
