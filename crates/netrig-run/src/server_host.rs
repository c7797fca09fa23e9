//! `--server-agent`: a control session with the agent on the host of the
//! server a kind with one end loads, watching that host around the run.

use crate::{RunError, Session, Target};
use netrig_client::Watching;
use netrig_proto::report::host::HostView;
use std::time::Duration;

pub(crate) struct Watch {
    session: Session,
    watching: Watching,
}

impl Watch {
    /// Opens a session with `agent` and starts the watch.
    pub(crate) fn start(agent: &Target, connect_timeout: Duration) -> Result<Watch, RunError> {
        let local = crate::LocalOptions {
            connect_timeout,
            ..Default::default()
        };
        let mut session = Session::open(agent, local)?;
        let watching = session.client.start_watch()?;
        Ok(Watch { session, watching })
    }

    /// Ends the watch: the agent's name as messages give it, and its view.
    pub(crate) fn end(mut self) -> Result<(String, HostView), RunError> {
        let agent = self.session.client.agent_name();
        let view = self.session.client.end_watch(self.watching);
        self.session.close();
        Ok((agent, view?))
    }

    /// Leaves without asking for the view (the agent ends the watch when
    /// the session closes).
    pub(crate) fn abandon(self) {
        drop(self.watching);
        self.session.close();
    }
}
