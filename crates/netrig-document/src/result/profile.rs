//! `profile`: where each end's CPU time went over the measured window (`--profile`,
//! docs/PROFILE.md), or why it is withheld. The types are the wire's (an agent sends its end's
//! profile in its report): netrig-proto's, re-exported here under the result's path.

pub use netrig_proto::report::profile::*;
