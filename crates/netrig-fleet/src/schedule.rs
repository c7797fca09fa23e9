//! Which pairs of hosts test when: rounds of tests that run at once, no host in two tests of a
//! round (but a star's server, which is the point of a star).
//!
//! Round counts, for N hosts and a concurrency of c tests per round at most:
//!
//! | plan | rounds | tests per round |
//! | --- | --- | --- |
//! | full mesh, even N | N − 1 | N/2 |
//! | full mesh, odd N | N | (N − 1)/2 (one host sits out each round) |
//! | full mesh, both directions | 2(N − 1) even N, 2N odd N | as above |
//! | pairs | at least the busiest host's pairs (first fit, in the order given) | at most ⌊N/2⌋ |
//! | star | 1 | N − 1, every client against the one server at once |
//! | any, concurrency c | each round above split into ⌈tests / c⌉ | at most c |
//!
//! So 5 hosts take 5 rounds of 2 tests; 1,000 hosts 999 rounds of 500; a full mesh of 5 with
//! c = 1 takes 10 rounds of one test. The full mesh is the circle method of round-robin
//! tournaments (one host fixed, the others rotated one place a round), the fewest rounds
//! possible; [`full_round`] computes one round of it on its own, so that a large mesh need not
//! hold every pair (a 10,000-host mesh has 49,995,000 of them, 800 MB as [`rounds`] returns them).

use crate::matrix::Pattern;
use std::collections::BTreeSet;

/// The most hosts a plan may have.
pub const MAX_HOSTS: usize = 10_000;

/// The most pairs `--pairs` may give.
pub const MAX_PAIRS: usize = 1_000_000;

/// One test: `client` (an index into the hosts) against `server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    pub client: usize,
    pub server: usize,
}

impl Pair {
    pub fn new(client: usize, server: usize) -> Pair {
        Pair { client, server }
    }

    /// The same hosts, the other way round.
    pub fn reversed(self) -> Pair {
        Pair {
            client: self.server,
            server: self.client,
        }
    }
}

/// Which pairs a plan tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Every unordered pair once, or with `both_directions` every ordered pair once.
    Full { both_directions: bool },
    /// These pairs, in the order given (a pair given twice is tested twice).
    Pairs(Vec<Pair>),
    /// Every other host as a client of `server`.
    Star { server: usize },
}

impl Shape {
    /// The document's name for it.
    pub fn pattern(&self) -> Pattern {
        match self {
            Shape::Full { .. } => Pattern::Full,
            Shape::Pairs(_) => Pattern::Pairs,
            Shape::Star { .. } => Pattern::Star,
        }
    }
}

/// A plan: the pairs and how many tests may run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub shape: Shape,
    /// Tests per round, at most (`--concurrency`); `None`: as many as the shape allows.
    pub concurrency: Option<usize>,
}

/// A plan that cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("a mesh needs at least 2 hosts, found {0}")]
    TooFewHosts(usize),
    #[error("{hosts} hosts: a mesh takes {max} at most")]
    TooManyHosts { hosts: usize, max: usize },
    #[error("--concurrency must be at least 1")]
    ZeroConcurrency,
    #[error("--pairs is empty")]
    NoPairs,
    #[error("--pairs: {pairs} pairs, {max} at most")]
    TooManyPairs { pairs: usize, max: usize },
    #[error("--pairs: pair {index} ({client}>{server}) names host {client} twice")]
    SameHost {
        index: usize,
        client: usize,
        server: usize,
    },
    #[error("--pairs: pair {index} names host {host}, but there are {hosts} hosts (0 to {})", hosts - 1)]
    PairOutOfRange { index: usize, host: usize, hosts: usize },
    #[error("--server: host {server}, but there are {hosts} hosts (0 to {})", hosts - 1)]
    ServerOutOfRange { server: usize, hosts: usize },
    #[error("{option}: {word:?} is none of the hosts (give a host as listed, or its index from 0)")]
    UnknownHost { option: &'static str, word: String },
    #[error("--pairs: {0:?} is not CLIENT>SERVER")]
    BadPair(String),
}

/// The host `word` names, for `option` (`--server`, `--pairs`): a host's name as listed
/// (`names`), else its index.
pub fn host_index(option: &'static str, word: &str, names: &[&str]) -> Result<usize, ScheduleError> {
    let word = word.trim();
    if let Some(i) = names.iter().position(|n| *n == word) {
        return Ok(i);
    }
    match word.parse::<usize>() {
        Ok(i) if i < names.len() => Ok(i),
        _ => Err(ScheduleError::UnknownHost {
            option,
            word: word.to_string(),
        }),
    }
}

/// `--pairs A>B,C>D`: each pair's client and server, named as [`host_index`] takes them. At
/// most [`MAX_PAIRS`]; a pair of one host twice is refused by [`rounds`].
pub fn parse_pairs(text: &str, names: &[&str]) -> Result<Vec<Pair>, ScheduleError> {
    let items: Vec<&str> = text.split(',').filter(|s| !s.trim().is_empty()).collect();
    if items.len() > MAX_PAIRS {
        return Err(ScheduleError::TooManyPairs {
            pairs: items.len(),
            max: MAX_PAIRS,
        });
    }
    items
        .into_iter()
        .map(|item| {
            let (a, b) = item
                .split_once('>')
                .ok_or_else(|| ScheduleError::BadPair(item.to_string()))?;
            Ok(Pair::new(
                host_index("--pairs", a, names)?,
                host_index("--pairs", b, names)?,
            ))
        })
        .collect()
}

/// Checks the host count and the concurrency, which every shape needs.
fn check_common(n_hosts: usize, concurrency: Option<usize>) -> Result<(), ScheduleError> {
    if n_hosts < 2 {
        return Err(ScheduleError::TooFewHosts(n_hosts));
    }
    if n_hosts > MAX_HOSTS {
        return Err(ScheduleError::TooManyHosts {
            hosts: n_hosts,
            max: MAX_HOSTS,
        });
    }
    if concurrency == Some(0) {
        return Err(ScheduleError::ZeroConcurrency);
    }
    Ok(())
}

/// The rounds of `plan` over `n_hosts` hosts (indexes 0 to `n_hosts` − 1): every round's tests
/// run at once; no host is in two tests of a round but a star's server; no round has more than
/// the plan's concurrency. Round counts: the module's documentation.
pub fn rounds(n_hosts: usize, plan: &Plan) -> Result<Vec<Vec<Pair>>, ScheduleError> {
    check_common(n_hosts, plan.concurrency)?;
    let unsplit: Vec<Vec<Pair>> = match &plan.shape {
        Shape::Full { both_directions } => {
            let count = full_round_count(n_hosts, *both_directions);
            (0..count)
                .map(|r| full_round(n_hosts, *both_directions, r))
                .collect()
        }
        Shape::Pairs(pairs) => return pack_pairs(n_hosts, pairs, plan.concurrency),
        Shape::Star { server } => {
            if *server >= n_hosts {
                return Err(ScheduleError::ServerOutOfRange {
                    server: *server,
                    hosts: n_hosts,
                });
            }
            vec![(0..n_hosts)
                .filter(|c| c != server)
                .map(|c| Pair::new(c, *server))
                .collect()]
        }
    };
    Ok(match plan.concurrency {
        None => unsplit,
        Some(c) => unsplit
            .into_iter()
            .flat_map(|round| round.chunks(c).map(<[Pair]>::to_vec).collect::<Vec<_>>())
            .collect(),
    })
}

/// The full mesh's rounds before any concurrency splits them: N − 1 for even N, N for odd N,
/// twice that with both directions.
pub fn full_round_count(n_hosts: usize, both_directions: bool) -> usize {
    if n_hosts < 2 {
        return 0;
    }
    let one_way = if n_hosts.is_multiple_of(2) {
        n_hosts - 1
    } else {
        n_hosts
    };
    if both_directions {
        2 * one_way
    } else {
        one_way
    }
}

/// Round `round` of the full mesh of `n_hosts` (0 ≤ `round` < [`full_round_count`]), by the
/// circle method: with M = N rounded up to even (a host M − 1 = N that does not exist makes
/// its partner sit out when N is odd), host M − 1 is fixed and meets host r in round r, and
/// hosts r + k and r − k (mod M − 1) meet for k = 1 to M/2 − 1. With both directions the rounds
/// after the first half are the first half's, each pair reversed.
///
/// Which end is the client: of hosts a < b, a when a + b is odd, else b. Host a is then the
/// client of its partners above it of the other parity and below it of the same parity: about
/// half its tests (within one).
///
/// # Panics
/// When `round` is out of range.
pub fn full_round(n_hosts: usize, both_directions: bool, round: usize) -> Vec<Pair> {
    let count = full_round_count(n_hosts, both_directions);
    assert!(
        round < count,
        "round {round} of a full mesh of {n_hosts} hosts with {count} rounds"
    );
    let one_way = full_round_count(n_hosts, false);
    let (r, reverse) = if round >= one_way {
        (round - one_way, true)
    } else {
        (round, false)
    };
    let m = n_hosts + n_hosts % 2;
    let ring = m - 1;
    let mut pairs = Vec::with_capacity(m / 2);
    let mut meet = |a: usize, b: usize| {
        if a < n_hosts && b < n_hosts {
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            let p = if (lo + hi) % 2 == 1 {
                Pair::new(lo, hi)
            } else {
                Pair::new(hi, lo)
            };
            pairs.push(if reverse { p.reversed() } else { p });
        }
    };
    meet(m - 1, r);
    for k in 1..m / 2 {
        meet((r + k) % ring, (r + ring - k) % ring);
    }
    pairs
}

/// The given pairs, first fit: each into the earliest round where neither of its hosts is
/// busy and that has fewer than `concurrency` tests.
fn pack_pairs(
    n_hosts: usize,
    pairs: &[Pair],
    concurrency: Option<usize>,
) -> Result<Vec<Vec<Pair>>, ScheduleError> {
    if pairs.is_empty() {
        return Err(ScheduleError::NoPairs);
    }
    if pairs.len() > MAX_PAIRS {
        return Err(ScheduleError::TooManyPairs {
            pairs: pairs.len(),
            max: MAX_PAIRS,
        });
    }
    for (index, p) in pairs.iter().enumerate() {
        for host in [p.client, p.server] {
            if host >= n_hosts {
                return Err(ScheduleError::PairOutOfRange {
                    index,
                    host,
                    hosts: n_hosts,
                });
            }
        }
        if p.client == p.server {
            return Err(ScheduleError::SameHost {
                index,
                client: p.client,
                server: p.server,
            });
        }
    }
    let cap = concurrency.unwrap_or(usize::MAX);
    let mut busy: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n_hosts];
    let mut rounds: Vec<Vec<Pair>> = Vec::new();
    // Rounds before this one are all full (at the cap): a cheap start for the search.
    let mut first_open = 0;
    for p in pairs {
        let mut r = first_open;
        while busy[p.client].contains(&r)
            || busy[p.server].contains(&r)
            || rounds.get(r).is_some_and(|round| round.len() >= cap)
        {
            r += 1;
        }
        if r == rounds.len() {
            rounds.push(Vec::new());
        }
        rounds[r].push(*p);
        busy[p.client].insert(r);
        busy[p.server].insert(r);
        while rounds.get(first_open).is_some_and(|round| round.len() >= cap) {
            first_open += 1;
        }
    }
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn full(both_directions: bool, concurrency: Option<usize>) -> Plan {
        Plan {
            shape: Shape::Full { both_directions },
            concurrency,
        }
    }

    /// No host twice in a round.
    fn assert_disjoint(rounds: &[Vec<Pair>]) {
        for (i, round) in rounds.iter().enumerate() {
            let mut seen = BTreeSet::new();
            for p in round {
                assert_ne!(p.client, p.server, "round {i}: {p:?}");
                assert!(seen.insert(p.client), "round {i}: host {} twice", p.client);
                assert!(seen.insert(p.server), "round {i}: host {} twice", p.server);
            }
        }
    }

    #[test]
    fn full_mesh_every_pair_once_in_the_fewest_rounds() {
        for n in 2..=12 {
            let rounds = rounds(n, &full(false, None)).unwrap();
            let want_rounds = if n.is_multiple_of(2) { n - 1 } else { n };
            assert_eq!(rounds.len(), want_rounds, "{n} hosts");
            assert_disjoint(&rounds);
            let mut unordered = BTreeMap::new();
            let mut as_client = vec![0usize; n];
            for p in rounds.iter().flatten() {
                let key = (p.client.min(p.server), p.client.max(p.server));
                *unordered.entry(key).or_insert(0) += 1;
                as_client[p.client] += 1;
            }
            assert_eq!(unordered.len(), n * (n - 1) / 2, "{n} hosts: every pair");
            assert!(unordered.values().all(|&c| c == 1), "{n} hosts: once");
            // Each round is as full as it can be: ⌊N/2⌋ tests.
            assert!(rounds.iter().all(|r| r.len() == n / 2), "{n} hosts");
            // Each host is the client of about half its N − 1 tests.
            for (h, &c) in as_client.iter().enumerate() {
                assert!(
                    c >= (n - 1) / 2 && c <= n / 2,
                    "{n} hosts: host {h} is the client of {c} of {} tests",
                    n - 1
                );
            }
        }
    }

    #[test]
    fn five_hosts_take_five_rounds_of_two() {
        let rounds = rounds(5, &full(false, None)).unwrap();
        assert_eq!(rounds.len(), 5);
        assert!(rounds.iter().all(|r| r.len() == 2), "{rounds:?}");
        // Each host sits out exactly one round.
        for h in 0..5 {
            let out = rounds
                .iter()
                .filter(|r| r.iter().all(|p| p.client != h && p.server != h))
                .count();
            assert_eq!(out, 1, "host {h}");
        }
    }

    #[test]
    fn both_directions_every_ordered_pair_once() {
        for n in 2..=12 {
            let rounds = rounds(n, &full(true, None)).unwrap();
            let want = if n.is_multiple_of(2) { 2 * (n - 1) } else { 2 * n };
            assert_eq!(rounds.len(), want, "{n} hosts");
            assert_disjoint(&rounds);
            let ordered: BTreeSet<Pair> = rounds.iter().flatten().copied().collect();
            assert_eq!(ordered.len(), n * (n - 1), "{n} hosts");
            assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), n * (n - 1));
        }
    }

    #[test]
    fn concurrency_splits_rounds() {
        let one = rounds(5, &full(false, Some(1))).unwrap();
        assert_eq!(one.len(), 10);
        assert!(one.iter().all(|r| r.len() == 1));
        let three = rounds(8, &full(false, Some(3))).unwrap();
        // 7 rounds of 4, each split into 3 + 1.
        assert_eq!(three.len(), 14);
        assert!(three.iter().all(|r| r.len() <= 3));
        assert_eq!(three.iter().map(Vec::len).sum::<usize>(), 28);
        // A cap above the round's size changes nothing.
        assert_eq!(
            rounds(6, &full(false, Some(100))).unwrap(),
            rounds(6, &full(false, None)).unwrap()
        );
    }

    #[test]
    fn star_is_one_round_unless_capped() {
        let star = |server, concurrency| Plan {
            shape: Shape::Star { server },
            concurrency,
        };
        let one = rounds(6, &star(2, None)).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].len(), 5);
        assert!(one[0].iter().all(|p| p.server == 2 && p.client != 2));
        let clients: BTreeSet<usize> = one[0].iter().map(|p| p.client).collect();
        assert_eq!(clients, [0, 1, 3, 4, 5].into_iter().collect());
        let capped = rounds(6, &star(0, Some(2))).unwrap();
        assert_eq!(capped.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        assert_eq!(
            rounds(3, &star(3, None)),
            Err(ScheduleError::ServerOutOfRange { server: 3, hosts: 3 })
        );
    }

    #[test]
    fn pairs_packed_first_fit() {
        let p = |s: &str| -> Vec<Pair> {
            s.split(',')
                .map(|ab| {
                    let (a, b) = ab.split_once('>').unwrap();
                    Pair::new(a.parse().unwrap(), b.parse().unwrap())
                })
                .collect()
        };
        let plan = |pairs, concurrency| Plan {
            shape: Shape::Pairs(pairs),
            concurrency,
        };
        let r = rounds(5, &plan(p("0>1,2>3,1>2,3>4,0>4"), None)).unwrap();
        assert_eq!(r, vec![p("0>1,2>3"), p("1>2,3>4"), p("0>4")]);
        assert_disjoint(&r);
        let capped = rounds(5, &plan(p("0>1,2>3,1>2,3>4,0>4"), Some(1))).unwrap();
        assert_eq!(capped.len(), 5);
        // A pair given twice is tested twice, in two rounds.
        let twice = rounds(3, &plan(p("0>1,0>1"), None)).unwrap();
        assert_eq!(twice, vec![p("0>1"), p("0>1")]);
        // Disjoint pairs fill one round; a later pair goes back to an earlier round with room.
        let back = rounds(6, &plan(p("0>1,0>2,3>4,1>5"), None)).unwrap();
        assert_eq!(back, vec![p("0>1,3>4"), p("0>2,1>5")]);
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let pairs = |v: Vec<Pair>| Plan {
            shape: Shape::Pairs(v),
            concurrency: None,
        };
        assert_eq!(rounds(1, &full(false, None)), Err(ScheduleError::TooFewHosts(1)));
        assert_eq!(rounds(0, &full(false, None)), Err(ScheduleError::TooFewHosts(0)));
        let too_many = rounds(10_001, &full(false, None)).unwrap_err();
        assert!(too_many.to_string().contains("10000 at most"), "{too_many}");
        let zero = rounds(4, &full(false, Some(0))).unwrap_err();
        assert_eq!(zero.to_string(), "--concurrency must be at least 1");
        let same = rounds(4, &pairs(vec![Pair::new(0, 1), Pair::new(2, 2)])).unwrap_err();
        assert_eq!(same.to_string(), "--pairs: pair 1 (2>2) names host 2 twice");
        let out = rounds(4, &pairs(vec![Pair::new(0, 4)])).unwrap_err();
        assert_eq!(
            out.to_string(),
            "--pairs: pair 0 names host 4, but there are 4 hosts (0 to 3)"
        );
        assert_eq!(rounds(4, &pairs(vec![])), Err(ScheduleError::NoPairs));
    }

    #[test]
    fn pairs_and_servers_by_name_or_index() {
        let names = ["10.0.0.1", "agent-1.example", "[::1]:6390"];
        assert_eq!(
            parse_pairs("10.0.0.1>agent-1.example, 2>0,agent-1.example>[::1]:6390", &names),
            Ok(vec![Pair::new(0, 1), Pair::new(2, 0), Pair::new(1, 2)])
        );
        assert_eq!(host_index("--server", "agent-1.example", &names), Ok(1));
        assert_eq!(host_index("--server", "2", &names), Ok(2));
        let e = host_index("--server", "3", &names).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--server: \"3\" is none of the hosts (give a host as listed, or its index from 0)"
        );
        assert_eq!(
            parse_pairs("0>1,2", &names),
            Err(ScheduleError::BadPair("2".into()))
        );
        assert!(matches!(
            parse_pairs("0>nobody", &names),
            Err(ScheduleError::UnknownHost {
                option: "--pairs",
                ..
            })
        ));
    }

    #[test]
    fn a_large_mesh_round_by_round() {
        // 1,000 hosts: 999 rounds of 500, each round computed alone; a sample of rounds is
        // disjoint and each round's partners of host 0 differ.
        assert_eq!(full_round_count(1000, false), 999);
        let mut partners_of_0 = BTreeSet::new();
        for r in 0..999 {
            let round = full_round(1000, false, r);
            assert_eq!(round.len(), 500);
            if r % 97 == 0 {
                assert_disjoint(std::slice::from_ref(&round));
            }
            let p = round.iter().find(|p| p.client == 0 || p.server == 0).unwrap();
            partners_of_0.insert(p.client + p.server);
        }
        assert_eq!(partners_of_0.len(), 999);
    }
}
