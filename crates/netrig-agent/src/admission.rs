//! Who gets the agent's sessions (docs/SECURITY.md, "Admission").
//!
//! A control connection passes two stages:
//!
//! 1. **Pre-session**: its preamble read, welcomed, until its hello is
//!    complete (and, on an agent with `--authorized-keys`, authenticated).
//!    It holds no place among `--max-sessions`: it lives in a pool of its
//!    own ([`PrePool`], `max_presessions`), each within the greeting's
//!    deadline (5 s) of its welcome. One client (an IPv4 address or an IPv6
//!    /64) holds at most an eighth of the pool; when the pool is full, a new
//!    connection closes the oldest of the client holding the most.
//! 2. **Session**: its hello accepted, it takes one of `--max-sessions`
//!    ([`Slots`], and its client's `--max-sessions-per-client`). When all
//!    are taken, a session that is idle (no test, no watch) is closed to
//!    make room, if its client holds more sessions than the newcomer's would
//!    (the oldest idle one of the client holding the most); an
//!    authenticated newcomer first takes the place of a session that did not
//!    authenticate. Otherwise the newcomer is told `busy`.
//!
//! So sessions that never finish their hello cost a pool slot for 5 s and
//! no session place, and whoever holds many places can lose idle ones to a
//! client that holds fewer.

use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A client's key as [`crate::peer::client_key`] makes it, written for people.
pub(crate) fn whose(key: IpAddr) -> String {
    match key {
        IpAddr::V6(_) => format!("{key}/64"),
        IpAddr::V4(_) => key.to_string(),
    }
}

/// Of `candidates` (id, client, since), the one to close for a newcomer
/// from `newcomer`: the oldest of the client holding the most (`held`:
/// places held by client). `fair`: only if that client holds more than
/// the newcomer does (so the newcomer never ends with more than that
/// client had, and the most any client holds never grows).
pub(crate) fn victim(
    candidates: impl Iterator<Item = (u64, IpAddr, Instant)>,
    held: &HashMap<IpAddr, u32>,
    newcomer: IpAddr,
    fair: bool,
) -> Option<u64> {
    let mine = held.get(&newcomer).copied().unwrap_or(0);
    candidates
        .filter(|(_, k, _)| !fair || held.get(k).copied().unwrap_or(0) > mine)
        // The most held, then the oldest.
        .max_by(|a, b| {
            let (ha, hb) = (held.get(&a.1), held.get(&b.1));
            ha.cmp(&hb).then(b.2.cmp(&a.2))
        })
        .map(|(id, _, _)| id)
}

struct PreEntry {
    key: IpAddr,
    since: Instant,
    /// A handle on the connection, to close it from the accept loop.
    stream: TcpStream,
}

/// Connections welcomed whose hello is not complete yet.
pub(crate) struct PrePool {
    cap: usize,
    per_client: usize,
    inner: Mutex<PreInner>,
}

#[derive(Default)]
struct PreInner {
    entries: HashMap<u64, PreEntry>,
    held: HashMap<IpAddr, u32>,
    next: u64,
}

impl PreInner {
    fn remove(&mut self, id: u64) -> Option<PreEntry> {
        let e = self.entries.remove(&id)?;
        if let Some(n) = self.held.get_mut(&e.key) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&e.key);
            }
        }
        Some(e)
    }
}

/// A place in the [`PrePool`]; dropping it gives it back.
pub(crate) struct PreSlot {
    pool: Arc<PrePool>,
    id: u64,
}

impl Drop for PreSlot {
    fn drop(&mut self) {
        self.pool.inner.lock().expect("pre-session lock").remove(self.id);
    }
}

impl PrePool {
    pub(crate) fn new(cap: usize) -> PrePool {
        let cap = cap.max(1);
        PrePool {
            cap,
            per_client: (cap / 8).max(2),
            inner: Mutex::default(),
        }
    }

    /// How many wait for their hello now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().expect("pre-session lock").entries.len()
    }

    /// Takes a place for a connection from `key` (`stream`: a handle on it),
    /// closing one to make room if need be: the client's own oldest when it
    /// holds its share already, or the oldest of the client holding the most
    /// when the pool is full. Returns the place and whom it closed.
    pub(crate) fn enter(
        self: &Arc<Self>,
        key: IpAddr,
        stream: TcpStream,
        now: Instant,
    ) -> (PreSlot, Option<IpAddr>) {
        let mut inner = self.inner.lock().expect("pre-session lock");
        let mine = inner.held.get(&key).copied().unwrap_or(0) as usize;
        let evict = if mine >= self.per_client {
            victim(
                inner
                    .entries
                    .iter()
                    .filter(|(_, e)| e.key == key)
                    .map(|(&id, e)| (id, e.key, e.since)),
                &inner.held,
                key,
                false,
            )
        } else if inner.entries.len() >= self.cap {
            let held = inner.held.clone();
            victim(
                inner.entries.iter().map(|(&id, e)| (id, e.key, e.since)),
                &held,
                key,
                false,
            )
        } else {
            None
        };
        let evicted = evict.and_then(|id| inner.remove(id)).map(|e| {
            let _ = e.stream.shutdown(Shutdown::Both);
            e.key
        });
        let id = inner.next;
        inner.next += 1;
        inner.entries.insert(
            id,
            PreEntry {
                key,
                since: now,
                stream,
            },
        );
        *inner.held.entry(key).or_default() += 1;
        (
            PreSlot {
                pool: self.clone(),
                id,
            },
            evicted,
        )
    }
}

struct SlotEntry {
    key: IpAddr,
    authenticated: bool,
    /// Since when it is idle; `None` while a test or a watch runs.
    idle_since: Option<Instant>,
    /// It asked for a test or a watch at least once.
    ever_busy: bool,
    stream: TcpStream,
}

/// The sessions' places: `--max-sessions`, `--max-sessions-per-client`.
#[derive(Default)]
pub(crate) struct Slots {
    inner: Mutex<SlotsInner>,
    /// Sessions holding a place (a mirror of `inner`'s count, read without the lock).
    count: AtomicUsize,
}

impl Slots {
    /// Sessions holding a place.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct SlotsInner {
    entries: HashMap<u64, SlotEntry>,
    held: HashMap<IpAddr, u32>,
    next: u64,
}

impl SlotsInner {
    fn remove(&mut self, id: u64) -> Option<SlotEntry> {
        let e = self.entries.remove(&id)?;
        if let Some(n) = self.held.get_mut(&e.key) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&e.key);
            }
        }
        Some(e)
    }
}

/// Why a session place was not given.
pub(crate) type Busy = String;

/// A session's place; dropping it gives it back (unless it was taken
/// from it to make room: [`Admission::evicted`]).
pub(crate) struct Admission {
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut inner = self.slots.inner.lock().expect("slots lock");
        if inner.remove(self.id).is_some() {
            self.slots.count.store(inner.entries.len(), Ordering::Relaxed);
        }
    }
}

impl Admission {
    /// Marks the session idle (waiting for a request) or busy (a test or a
    /// watch). Err when its place was taken to make room for another client
    /// (its connection is closed for reading): the session must end.
    pub(crate) fn set_idle(&self, idle: bool) -> Result<(), ()> {
        let mut inner = self.slots.inner.lock().expect("slots lock");
        let e = inner.entries.get_mut(&self.id).ok_or(())?;
        e.idle_since = idle.then(Instant::now);
        e.ever_busy |= !idle;
        Ok(())
    }

    /// Whether it is marked idle.
    pub(crate) fn is_idle(&self) -> bool {
        let inner = self.slots.inner.lock().expect("slots lock");
        inner
            .entries
            .get(&self.id)
            .is_some_and(|e| e.idle_since.is_some())
    }

    /// Whether its place was taken to make room for another client.
    pub(crate) fn evicted(&self) -> bool {
        !self
            .slots
            .inner
            .lock()
            .expect("slots lock")
            .entries
            .contains_key(&self.id)
    }
}

/// Gives a session of `key` (authenticated or not; `stream`: a handle on
/// its connection) a place, closing an idle session to make room if that is
/// fair (see the module's documentation); or says why not. `max`: the
/// agent's `--max-sessions`; `per_client`: its `--max-sessions-per-client`.
pub(crate) fn take_slot(
    slots: &Arc<Slots>,
    (max, per_client): (usize, u32),
    key: IpAddr,
    authenticated: bool,
    stream: TcpStream,
) -> Result<(Admission, Option<IpAddr>), Busy> {
    let mut inner = slots.inner.lock().expect("slots lock");
    let mine = inner.held.get(&key).copied().unwrap_or(0);
    if mine >= per_client {
        return Err(format!(
            "{} has {per_client} sessions with the agent already (its --max-sessions-per-client); end one \
             or try again later",
            whose(key)
        ));
    }
    let mut evicted = None;
    if inner.entries.len() >= max {
        // Idle sessions; `unauthenticated`: only those that did not
        // authenticate; `never_busy`: only those that never asked for anything.
        let idle = |unauthenticated: bool, never_busy: bool| {
            inner
                .entries
                .iter()
                .filter(move |(_, e)| {
                    e.idle_since.is_some()
                        && (!unauthenticated || !e.authenticated)
                        && (!never_busy || !e.ever_busy)
                })
                .map(|(&id, e)| (id, e.key, e.idle_since.expect("idle")))
        };
        // An authenticated client first takes the place of one that is not;
        // then, fairly, sessions that never asked for a test go first. One
        // that did not authenticate never takes the place of one that did.
        let held = &inner.held;
        let pick = authenticated
            .then(|| victim(idle(true, false), held, key, false))
            .flatten()
            .or_else(|| victim(idle(!authenticated, true), held, key, true))
            .or_else(|| victim(idle(!authenticated, false), held, key, true));
        match pick.and_then(|id| inner.remove(id)) {
            Some(e) => {
                // Its thread reads end of file and tells its client why.
                let _ = e.stream.shutdown(Shutdown::Read);
                evicted = Some(e.key);
            }
            None => {
                return Err(format!(
                    "the agent serves {max} sessions at once already (its --max-sessions), none of them \
                     idle from a client that holds more than this one; try again later"
                ))
            }
        }
    }
    let id = inner.next;
    inner.next += 1;
    inner.entries.insert(
        id,
        SlotEntry {
            key,
            authenticated,
            idle_since: Some(Instant::now()),
            ever_busy: false,
            stream,
        },
    );
    *inner.held.entry(key).or_default() += 1;
    slots.count.store(inner.entries.len(), Ordering::Relaxed);
    Ok((
        Admission {
            slots: slots.clone(),
            id,
        },
        evicted,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_victim_is_the_oldest_of_the_client_holding_the_most_and_only_if_fair() {
        let t = Instant::now();
        let (a, b, c) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
        let held: HashMap<IpAddr, u32> = [(a, 3), (b, 2)].into();
        let cands = || {
            vec![
                (1, a, t + Duration::from_secs(2)),
                (2, a, t + Duration::from_secs(1)),
                (3, b, t),
                (4, a, t + Duration::from_secs(3)),
            ]
            .into_iter()
        };
        assert_eq!(victim(cands(), &held, c, true), Some(2), "a's oldest");
        assert_eq!(victim(cands(), &held, c, false), Some(2));
        // b holds 2, a 3: b may take one of a's (3 and 2 become 2 and 3).
        assert_eq!(victim(cands(), &held, b, true), Some(2));
        assert_eq!(victim(cands(), &held, a, true), None, "a cannot take its own");
        // Equal shares: one each, a newcomer with none takes the oldest.
        let even: HashMap<IpAddr, u32> = [(a, 1), (b, 1)].into();
        let two = || vec![(7, a, t + Duration::from_secs(1)), (8, b, t)].into_iter();
        assert_eq!(victim(two(), &even, c, true), Some(8));
        assert_eq!(victim(two(), &even, a, true), None, "one each is fair");
        assert_eq!(victim(std::iter::empty(), &held, c, true), None);
    }

    #[test]
    fn the_pre_session_pool_keeps_each_client_to_its_share_and_evicts_the_greediest() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let conn = || TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let pool = Arc::new(PrePool::new(16)); // 2 per client
        let t = Instant::now();
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let mut held = Vec::new();
        for i in 0..2 {
            let (s, ev) = pool.enter(a, conn(), t + Duration::from_millis(i));
            assert_eq!(ev, None);
            held.push(s);
        }
        // A third from a closes a's oldest.
        let (s, ev) = pool.enter(a, conn(), t + Duration::from_millis(5));
        assert_eq!(ev, Some(a));
        held.push(s);
        assert_eq!(pool.len(), 2);
        // Fill the pool from other clients, two each.
        for n in 0..7u8 {
            for _ in 0..2 {
                let k = IpAddr::from([10, 1, 0, n]);
                let (s, ev) = pool.enter(k, conn(), t + Duration::from_millis(10 + u64::from(n)));
                assert_eq!(ev, None);
                held.push(s);
            }
        }
        assert_eq!(pool.len(), 16);
        // Full: b's first closes the oldest of a client holding the most (2 each: a's, the oldest).
        let (s, ev) = pool.enter(b, conn(), t + Duration::from_millis(50));
        assert_eq!(ev, Some(a));
        held.push(s);
        assert_eq!(pool.len(), 16);
        drop(held);
        assert_eq!(pool.len(), 0, "every place given back");
    }
}
