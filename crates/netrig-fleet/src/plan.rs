//! A mesh plan in TOML (`netrig mesh --plan FILE`): the hosts (listed, found in DNS, or both),
//! the pattern and its schedule, and one or more tests, each run over the whole schedule in
//! turn (a matrix each), as a nightly run or a Kubernetes CronJob keeps them in a file rather
//! than on a command line. The keys mirror `netrig mesh`'s options; the tests are written as an
//! experiment plan's (`kind`, `args`). Every list and string is bounded: a plan may come from
//! someone else.
//!
//! ```toml
//! name = "nightly"
//! discover = "_netrig._tcp.netrig-agents.netrig.svc.cluster.local"
//! pattern = "full"
//!
//! [[test]]
//! kind = "tcp-stream"
//! args = ["-l", "10"]
//!
//! [[test]]
//! kind = "tcp-rr"
//! args = ["-l", "10"]
//! ```

use serde::{Deserialize, Serialize};

/// The most tests a plan may hold (each is a whole mesh).
pub const MAX_TESTS: usize = 64;
/// The most words a test's `args` may hold.
pub const MAX_ARGS: usize = 256;
/// The most hosts a plan may list (as `netrig mesh` takes at most).
pub const MAX_HOSTS: usize = 10_000;
/// The most pairs a plan may list.
pub const MAX_PAIRS: usize = 1_000_000;
/// The longest string a plan may hold anywhere (a host, a name, an argument), bytes.
pub const MAX_STRING: usize = 1024;
/// The largest plan file read, bytes.
pub const MAX_FILE: u64 = 16 << 20;

/// `pattern = ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanPattern {
    #[default]
    Full,
    Pairs,
    Star,
}

/// One test of the plan: a kind and its options, as `netrig KIND` takes them (no `-H`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanTest {
    pub kind: String,
    #[serde(default)]
    pub args: Vec<String>,
}

impl PlanTest {
    /// The words after `--` on a command line: the kind, then its options.
    pub fn words(&self) -> Vec<String> {
        std::iter::once(self.kind.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// A mesh plan, as read from TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshPlan {
    /// The plan's name (the documents and the HTML say it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The agents: HOST or HOST:PORT, as `netrig mesh HOST...` (hosts given there join these;
    /// a plan may leave them all to the command line or DNS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Find agents in DNS, as `--discover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<String>,
    /// As `--dns-server` (the command line's wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_server: Option<String>,
    /// As `--port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default)]
    pub pattern: PlanPattern,
    /// A star's server, as `--server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The pairs of `pattern = "pairs"`: `CLIENT>SERVER` each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<String>,
    /// As `--both-directions`.
    #[serde(default)]
    pub both_directions: bool,
    /// As `--concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The tests, each run over the whole schedule in turn.
    #[serde(rename = "test", default)]
    pub tests: Vec<PlanTest>,
}

/// Why a plan was refused.
#[derive(Debug, thiserror::Error)]
#[error("mesh plan {file}: {why}")]
pub struct PlanError {
    pub file: String,
    pub why: String,
}

impl MeshPlan {
    /// Reads and checks a plan file (at most [`MAX_FILE`] bytes).
    pub fn read(path: &std::path::Path) -> Result<MeshPlan, PlanError> {
        use std::io::Read;
        let err = |why: String| PlanError {
            file: path.display().to_string(),
            why,
        };
        let f = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
        let mut text = String::new();
        f.take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| err(e.to_string()))?;
        if text.len() as u64 > MAX_FILE {
            return Err(err(format!("larger than {} MiB", MAX_FILE >> 20)));
        }
        MeshPlan::from_toml(&text).map_err(err)
    }

    /// Parses and checks a plan's text.
    pub fn from_toml(text: &str) -> Result<MeshPlan, String> {
        let plan: MeshPlan = toml::from_str(text).map_err(|e| e.to_string())?;
        plan.check()?;
        Ok(plan)
    }

    /// The plan's bounds, and what the pattern needs.
    pub fn check(&self) -> Result<(), String> {
        if self.tests.is_empty() {
            return Err("no [[test]]: give at least one (kind = \"tcp-stream\", args = [...])".into());
        }
        if self.tests.len() > MAX_TESTS {
            return Err(format!(
                "{} tests; a plan holds at most {MAX_TESTS}",
                self.tests.len()
            ));
        }
        if self.hosts.len() > MAX_HOSTS {
            return Err(format!(
                "{} hosts; a plan lists at most {MAX_HOSTS}",
                self.hosts.len()
            ));
        }
        if self.pairs.len() > MAX_PAIRS {
            return Err(format!(
                "{} pairs; a plan lists at most {MAX_PAIRS}",
                self.pairs.len()
            ));
        }
        if self.concurrency == Some(0) || self.concurrency.is_some_and(|c| c > 10_000) {
            return Err("concurrency must be 1 to 10000".into());
        }
        match self.pattern {
            PlanPattern::Pairs if self.pairs.is_empty() => {
                return Err("pattern = \"pairs\" needs pairs = [\"A>B\", ...]".into())
            }
            PlanPattern::Full | PlanPattern::Star if !self.pairs.is_empty() => {
                return Err("pairs are for pattern = \"pairs\"".into())
            }
            PlanPattern::Full | PlanPattern::Pairs if self.server.is_some() => {
                return Err("server is for pattern = \"star\"".into())
            }
            _ => {}
        }
        for (i, t) in self.tests.iter().enumerate() {
            if t.kind.is_empty() {
                return Err(format!("test {}: kind is empty", i + 1));
            }
            if t.args.len() > MAX_ARGS {
                return Err(format!(
                    "test {} ({}): {} args; a test takes at most {MAX_ARGS}",
                    i + 1,
                    t.kind,
                    t.args.len()
                ));
            }
        }
        let strings = self
            .name
            .iter()
            .chain(&self.hosts)
            .chain(&self.discover)
            .chain(&self.dns_server)
            .chain(&self.server)
            .chain(&self.pairs)
            .chain(
                self.tests
                    .iter()
                    .flat_map(|t| std::iter::once(&t.kind).chain(&t.args)),
            );
        for s in strings {
            if s.len() > MAX_STRING {
                return Err(format!(
                    "a string of {} bytes (it begins {:?}); a plan's strings are at most {MAX_STRING}",
                    s.len(),
                    s.chars().take(20).collect::<String>()
                ));
            }
            if s.chars().any(char::is_control) {
                return Err(format!("{s:?} holds a control character"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_with_its_hosts_pattern_and_tests() {
        let p = MeshPlan::from_toml(
            r#"
            name = "nightly"
            hosts = ["10.0.0.1", "10.0.0.2:6400"]
            discover = "_netrig._tcp.netrig-agents.netrig.svc.cluster.local"
            pattern = "star"
            server = "10.0.0.1"
            concurrency = 2
            [[test]]
            kind = "tcp-stream"
            args = ["-l", "10"]
            [[test]]
            kind = "tcp-rr"
            "#,
        )
        .unwrap();
        assert_eq!(p.name.as_deref(), Some("nightly"));
        assert_eq!(p.pattern, PlanPattern::Star);
        assert_eq!(p.tests.len(), 2);
        assert_eq!(p.tests[0].words(), ["tcp-stream", "-l", "10"]);
        assert_eq!(p.tests[1].words(), ["tcp-rr"]);
        assert_eq!(p.concurrency, Some(2));
        let again = MeshPlan::from_toml(&toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(again, p);
    }

    #[test]
    fn plans_that_cannot_run_are_refused_saying_why() {
        let t = "\n[[test]]\nkind = \"tcp-stream\"\n";
        for (text, why) in [
            ("hosts = [\"a\", \"b\"]", "no [[test]]"),
            (&format!("hosts = [\"a\"]\npattern = \"pairs\"{t}"), "needs pairs"),
            (&format!("hosts = [\"a\"]\npairs = [\"a>b\"]{t}"), "pairs are for"),
            (&format!("hosts = [\"a\"]\nserver = \"a\"{t}"), "server is for"),
            (
                &format!("hosts = [\"a\"]\nconcurrency = 0{t}"),
                "concurrency must be",
            ),
            (
                &format!("hosts = [\"a\"]\nhost = [\"b\"]{t}"),
                "unknown field `host`",
            ),
            (
                &format!("hosts = [\"a\"]\npattern = \"ring\"{t}"),
                "unknown variant `ring`",
            ),
            (&format!("hosts = [\"a\\nb\"]{t}"), "control character"),
            (&format!("hosts = [\"{}\"]{t}", "a".repeat(1025)), "at most 1024"),
            ("hosts = [\"a\"]\n[[test]]\nkind = \"\"\n", "kind is empty"),
        ] {
            let e = MeshPlan::from_toml(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let many = format!("hosts = [\"a\"]\n{}", t.repeat(MAX_TESTS + 1));
        assert!(MeshPlan::from_toml(&many).unwrap_err().contains("at most 64"));
    }
}
