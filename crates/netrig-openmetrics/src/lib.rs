//! netrig's figures in Prometheus' formats (docs/FLEET.md, "Metrics and the Pushgateway").
//!
//! A caller hands over [`Family`]s of values read at that instant (the agent's counters at a
//! scrape, a run's summary at a push); [`openmetrics`] writes them as OpenMetrics text with
//! prometheus-client's encoder, and [`classic`] as Prometheus' classic text format (0.0.4),
//! which a Pushgateway takes and scrapers that do not ask for OpenMetrics get. Nothing here
//! holds state: the values live where they are counted (atomics on the agent), so a scrape
//! takes no lock on the data path.

pub mod scrape;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::TypedMetric;

/// The content type of [`openmetrics`]'s text.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`classic`]'s text.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a family's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (its samples are named `NAME_total`).
    Counter,
    /// A value at an instant.
    Gauge,
    /// Labels with the value 1 (its sample is named `NAME_info`): what a build is.
    Info,
}

/// A sample's value: an integer count, or a measured figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

/// One series of a family: its labels (names as [`label_name`] makes them) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

/// A metric family: a name (without `_total` or `_info`, which the formats add), what it
/// counts, its kind, and its samples. A family without samples is left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: &str, help: &str, kind: Kind) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample (labels as `(name, value)`; names made valid, values escaped).
    pub fn with(mut self, labels: &[(&str, &str)], value: Value) -> Family {
        self.push(labels, value);
        self
    }

    pub fn push(&mut self, labels: &[(&str, &str)], value: Value) {
        let labels = labels
            .iter()
            .map(|(k, v)| (label_name(k), escape_label_value(v)))
            .collect();
        self.samples.push(Sample { labels, value });
    }
}

/// `text` as a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`): every other character
/// becomes `_`, and a leading digit gets a `_` before it; names beginning `__` are
/// Prometheus' own, so a leading run of `_` is made one.
pub fn label_name(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    while out.starts_with("__") {
        out.remove(0);
    }
    out
}

/// A label value as both text formats write it between quotes: backslash, double quote and
/// line feed escaped (prometheus-client writes values as given).
fn escape_label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// HELP text on one line, escaped as both formats want it.
fn escape_help(h: &str) -> String {
    h.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The families as OpenMetrics text, ending in `# EOF`.
pub fn openmetrics(families: &[Family]) -> String {
    let mut out = String::new();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Snapshot(families.to_vec())));
    // Writing to a String cannot fail; a family's own error (none here) would cut it short.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// The families in Prometheus' classic text format (0.0.4): what a Pushgateway reads, and
/// what a scraper that does not ask for OpenMetrics gets. It is [`openmetrics`]'s text with a
/// counter's HELP and TYPE named as its samples (`NAME_total`), an info family a gauge
/// (`NAME_info`), and no `# EOF`.
pub fn classic(families: &[Family]) -> String {
    let om = openmetrics(families);
    let renamed = |name: &str| {
        families.iter().find(|f| f.name == name).map(|f| match f.kind {
            Kind::Counter => (format!("{name}_total"), "counter"),
            Kind::Info => (format!("{name}_info"), "gauge"),
            Kind::Gauge => (name.to_string(), "gauge"),
        })
    };
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let head = ["# HELP ", "# TYPE "].into_iter().find(|p| line.starts_with(p));
        match head {
            Some(prefix) => {
                let rest = &line[prefix.len()..];
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                match renamed(name) {
                    Some((new, kind)) if prefix == "# TYPE " => out.push_str(&format!("# TYPE {new} {kind}")),
                    Some((new, _)) => out.push_str(&format!("# HELP {new} {tail}")),
                    None => out.push_str(line),
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Whether an HTTP `Accept` header asks for OpenMetrics text (version 1.0.0, or no version)
/// with a quality above 0, as Prometheus' scrapes do; otherwise the classic text is sent.
pub fn accepts_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        if !parts
            .next()
            .is_some_and(|t| t.eq_ignore_ascii_case("application/openmetrics-text"))
        {
            return false;
        }
        let mut ok = true;
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            match k.trim().to_ascii_lowercase().as_str() {
                "version" => ok &= v.trim() == "1.0.0",
                "q" => ok &= v.trim().parse::<f64>().is_ok_and(|q| q > 0.0),
                _ => {}
            }
        }
        ok
    })
}

/// The families, encoded at one instant by prometheus-client.
#[derive(Debug)]
struct Snapshot(Vec<Family>);

impl prometheus_client::collector::Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for f in self.0.iter().filter(|f| !f.samples.is_empty()) {
            let help = escape_help(&f.help);
            let kind = match f.kind {
                Kind::Counter => ConstCounter::<u64>::TYPE,
                Kind::Gauge => ConstGauge::<i64>::TYPE,
                Kind::Info => Info::<Vec<(String, String)>>::TYPE,
            };
            let mut metric = encoder.encode_descriptor(&f.name, &help, None, kind)?;
            // A family of one sample without labels is written without braces (`name{} 1` is
            // valid, but not what a reader expects); a family has one such sample at most.
            if let [one] = f.samples.as_slice() {
                if one.labels.is_empty() && f.kind != Kind::Info {
                    encode_value(f.kind, one.value, metric)?;
                    continue;
                }
            }
            for s in &f.samples {
                if f.kind == Kind::Info {
                    Info::new(s.labels.clone())
                        .encode(metric.encode_family(&Vec::<(String, String)>::new())?)?;
                    continue;
                }
                encode_value(f.kind, s.value, metric.encode_family(&s.labels)?)?;
            }
        }
        Ok(())
    }
}

fn encode_value(kind: Kind, value: Value, to: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
    match (kind, value) {
        (Kind::Counter, Value::Int(v)) => ConstCounter::new(v).encode(to),
        (Kind::Counter, Value::Float(v)) => ConstCounter::new(v).encode(to),
        (_, Value::Int(v)) => ConstGauge::new(v as i64).encode(to),
        (_, Value::Float(v)) => ConstGauge::new(v).encode(to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Family> {
        vec![
            Family::new("netrig_tests", "Tests run.", Kind::Counter)
                .with(&[("kind", "tcp-stream")], Value::Int(2))
                .with(&[("kind", "tcp-rr")], Value::Int(1)),
            Family::new("netrig_rtt_p99_seconds", "RTT.", Kind::Gauge).with(&[], Value::Float(0.000125)),
            Family::new("netrig_build", "Build.", Kind::Info).with(&[("version", "0.1.0")], Value::Int(1)),
            Family::new("netrig_empty", "Nothing.", Kind::Gauge),
        ]
    }

    #[test]
    fn openmetrics_names_samples_and_ends_in_eof() {
        let t = openmetrics(&sample());
        assert!(t.contains("# TYPE netrig_tests counter\n"), "{t}");
        assert!(t.contains("netrig_tests_total{kind=\"tcp-stream\"} 2\n"), "{t}");
        assert!(t.contains("netrig_rtt_p99_seconds 0.000125\n"), "{t}");
        assert!(t.contains("netrig_build_info{version=\"0.1.0\"} 1\n"), "{t}");
        assert!(
            !t.contains("netrig_empty"),
            "a family without samples is left out: {t}"
        );
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn classic_types_what_its_samples_are_named() {
        let t = classic(&sample());
        assert!(
            t.contains("# HELP netrig_tests_total Tests run.\n# TYPE netrig_tests_total counter\n"),
            "{t}"
        );
        assert!(t.contains("# TYPE netrig_build_info gauge\n"), "{t}");
        assert!(!t.contains("# EOF"), "{t}");
        assert!(t.contains("netrig_tests_total{kind=\"tcp-rr\"} 1\n"), "{t}");
    }

    #[test]
    fn label_names_and_values_cannot_break_the_text() {
        let f =
            Family::new("netrig_x", "X.", Kind::Gauge).with(&[("9 arm-name", "a\"b\\c\nd")], Value::Int(1));
        let t = openmetrics(&[f]);
        assert!(t.contains("netrig_x{_9_arm_name=\"a\\\"b\\\\c\\nd\"} 1\n"), "{t}");
        assert_eq!(label_name("__name__"), "_name__");
    }

    #[test]
    fn accept_headers_as_prometheus_sends_them() {
        let prom =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                    text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(accepts_openmetrics(prom));
        assert!(accepts_openmetrics("application/openmetrics-text"));
        assert!(!accepts_openmetrics(
            "application/openmetrics-text; version=0.0.1"
        ));
        assert!(!accepts_openmetrics("application/openmetrics-text; q=0"));
        assert!(!accepts_openmetrics("text/plain;version=0.0.4"));
        assert!(!accepts_openmetrics("*/*"));
    }
}
