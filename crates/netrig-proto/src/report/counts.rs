//! A kind's own figures: counts the kind names itself (tcp-crr: its failed
//! transactions by reason), which the engine, the wire and the result carry
//! without knowing the names, and sum by name where they sum flows. A kind
//! with counts of its own defines them in its folder; nothing here, in the
//! engine or in the result changes for it.
//!
//! On the wire and in the result the slot is flattened into its owner
//! (`#[serde(flatten)]`): each group is a key of its own, an object of
//! counts (`"connect_errors": {"refused": 0, ...}`), in the kind's order.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// The group of a kind's failed transactions by reason, the one group
/// readers outside the kind know by name (the CSV's `failed` column, the
/// experiments' error rate): its counts' total is the transactions that
/// failed.
pub const FAILURES: &str = "connect_errors";

/// Bounds on what a peer's report may carry in the slot (a kind has a
/// handful of each): summing goes name by name, so unbounded names from a
/// hostile peer would cost time as their square. Beyond them a report is
/// refused, naming the bound.
pub const MAX_GROUPS: usize = 8;
/// Counts in one group, at most.
pub const MAX_COUNTS: usize = 32;
/// Bytes of a group's or a count's name, at most.
pub const MAX_NAME_BYTES: usize = 64;

/// Counts by name, in the order the kind gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(Vec<(String, u64)>);

impl Counts {
    /// Each of `names` at zero, in that order: a kind's counts before any
    /// happened (so that the result shows every name, zero or not).
    pub fn zeroed(names: &[&str]) -> Counts {
        Counts(names.iter().map(|n| (n.to_string(), 0)).collect())
    }

    /// The counts `pairs` give, in their order.
    pub fn of<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Counts {
        Counts(pairs.into_iter().map(|(n, v)| (n.to_string(), v)).collect())
    }

    /// The count of `name`; zero for a name never counted.
    pub fn get(&self, name: &str) -> u64 {
        self.0.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
    }

    /// Adds `n` to the count of `name` (after the others if it is new).
    pub fn bump(&mut self, name: &str, n: u64) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            // Saturating: a peer's counts are its own to state, never a panic here.
            Some((_, v)) => *v = v.saturating_add(n),
            None => self.0.push((name.to_string(), n)),
        }
    }

    /// Adds `other`'s counts, name by name.
    pub fn add(&mut self, other: &Counts) {
        for (n, v) in &other.0 {
            self.bump(n, *v);
        }
    }

    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |t, (_, v)| t.saturating_add(*v))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(n, v)| (n.as_str(), *v))
    }
}

/// The slot: a kind's groups of named counts, each group under the kind's
/// name for it; empty for a kind without counts of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindCounts(Vec<(String, Counts)>);

impl KindCounts {
    /// One group, `name`.
    pub fn one(name: &str, counts: Counts) -> KindCounts {
        KindCounts(vec![(name.to_string(), counts)])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The group `name`, if the kind has it.
    pub fn group(&self, name: &str) -> Option<&Counts> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// Adds `other`'s groups, count by count (a group new here is added
    /// after the others).
    pub fn add(&mut self, other: &KindCounts) {
        for (name, counts) in &other.0 {
            match self.0.iter_mut().find(|(n, _)| n == name) {
                Some((_, c)) => c.add(counts),
                None => self.0.push((name.clone(), counts.clone())),
            }
        }
    }

    /// The sum of `all`.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a KindCounts>) -> KindCounts {
        let mut sum = KindCounts::default();
        for k in all {
            sum.add(k);
        }
        sum
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Counts)> {
        self.0.iter().map(|(n, c)| (n.as_str(), c))
    }
}

/// Named values as a JSON object, in their order.
fn serialize_named<S: Serializer, V: Serialize>(s: S, named: &[(String, V)]) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(named.len()))?;
    for (n, v) in named {
        m.serialize_entry(n, v)?;
    }
    m.end()
}

impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_named(s, &self.0)
    }
}

/// Reads a JSON object's entries in order, keeping those `keep` takes: at
/// most `max` of them (`what` names them in the error), names of at most
/// [`MAX_NAME_BYTES`].
struct Named<V, F>(F, usize, &'static str, PhantomData<V>);

impl<'de, V: Deserialize<'de>, T, F: Fn(V) -> Option<T>> Visitor<'de> for Named<V, F> {
    type Value = Vec<(String, T)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        while let Some((n, v)) = map.next_entry::<String, V>()? {
            let Some(t) = (self.0)(v) else { continue };
            if kept.len() == self.1 || n.len() > MAX_NAME_BYTES {
                return Err(serde::de::Error::custom(format!(
                    "a kind's counts: more than {} {} or a name over {MAX_NAME_BYTES} bytes \
                     (netrig's bound on a report's counts)",
                    self.1, self.2
                )));
            }
            kept.push((n, t));
        }
        Ok(kept)
    }
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Named(Some::<u64>, MAX_COUNTS, "counts in a group", PhantomData))
            .map(Counts)
    }
}

/// Flattened, its groups are the keys its owner does not know itself.
impl Serialize for KindCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_named(s, &self.0)
    }
}

/// Flattened, it is offered every key its owner does not know: it keeps
/// those whose value is an object of counts (within [`MAX_COUNTS`]), at most
/// [`MAX_GROUPS`] of them, and passes over the rest (a
/// `null` of an older result's `"connect_errors": null`, a field of a later
/// version).
impl<'de> Deserialize<'de> for KindCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Entry {
            Counts(Counts),
            Other(IgnoredAny),
        }
        let counts = |e| match e {
            Entry::Counts(c) => Some(c),
            Entry::Other(_) => None,
        };
        d.deserialize_map(Named(counts, MAX_GROUPS, "groups", PhantomData))
            .map(KindCounts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Owner {
        id: u32,
        #[serde(flatten)]
        counts: KindCounts,
    }

    #[test]
    fn groups_are_keys_of_their_owner_in_the_kinds_order() {
        let mut c = Counts::zeroed(&["refused", "timed_out", "addr_not_available"]);
        c.bump("timed_out", 2);
        let o = Owner {
            id: 1,
            counts: KindCounts::one(FAILURES, c),
        };
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(
            json,
            r#"{"id":1,"connect_errors":{"refused":0,"timed_out":2,"addr_not_available":0}}"#
        );
        assert_eq!(serde_json::from_str::<Owner>(&json).unwrap(), o);
    }

    #[test]
    fn nulls_and_foreign_keys_are_passed_over() {
        let o: Owner = serde_json::from_str(r#"{"id":1,"connect_errors":null,"later":"x","n":3}"#).unwrap();
        assert!(o.counts.is_empty());
        let o: Owner = serde_json::from_str(r#"{"id":1}"#).unwrap();
        assert!(o.counts.is_empty());
    }

    /// A hostile peer's report: too many counts or groups, or a long name, is
    /// refused naming the bound; counts at the top saturate, never panic.
    #[test]
    fn a_peers_counts_are_bounded() {
        // A group of too many counts is not one: passed over, as any other value.
        let many: String = (0..=MAX_COUNTS)
            .map(|i| format!("\"c{i}\":1"))
            .collect::<Vec<_>>()
            .join(",");
        let o = serde_json::from_str::<Owner>(&format!(r#"{{"id":1,"g":{{{many}}}}}"#)).unwrap();
        assert!(o.counts.group("g").is_none());
        let e =
            Counts::deserialize(serde_json::from_str::<serde_json::Value>(&format!("{{{many}}}")).unwrap())
                .unwrap_err();
        assert!(e.to_string().contains("more than 32 counts in a group"), "{e}");
        let groups: String = (0..=MAX_GROUPS)
            .map(|i| format!("\"g{i}\":{{}}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = serde_json::from_str::<Owner>(&format!(r#"{{"id":1,{groups}}}"#)).unwrap_err();
        assert!(e.to_string().contains("more than 8 groups"), "{e}");
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(serde_json::from_str::<Owner>(&format!(r#"{{"id":1,"{long}":{{"a":1}}}}"#)).is_err());
        let top = KindCounts::one("g", Counts::of([("a", u64::MAX), ("b", 1)]));
        let s = KindCounts::sum([&top, &top]);
        assert_eq!(s.group("g").unwrap().get("a"), u64::MAX);
        assert_eq!(s.group("g").unwrap().total(), u64::MAX);
    }

    #[test]
    fn sums_go_by_name() {
        let a = KindCounts::one("e", Counts::of([("x", 1), ("y", 2)]));
        let b = KindCounts::one("e", Counts::of([("y", 3), ("z", 4)]));
        let s = KindCounts::sum([&a, &b]);
        let e = s.group("e").unwrap();
        assert_eq!(e.iter().collect::<Vec<_>>(), [("x", 1), ("y", 5), ("z", 4)]);
        assert_eq!(e.total(), 10);
        assert_eq!(e.get("w"), 0);
    }
}
