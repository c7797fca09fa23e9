//! The clients' summed throughput against the number of client hosts sending at once (a lab
//! plan's arms of `clients = [...]`, the gigabit study's "from how many clients does the server
//! saturate?"): one line per point of the test's sweep, its interval as a band.
//!
//! The arms drawn: those run from several client hosts at once (their place's `clients`), and
//! the single-client arms run from one of those hosts to the same server (a plan's `client =
//! "c1"` beside `clients = ["c1", "c2"]`); other arms (another path, loopback) are left out.

use crate::chart::{Axis, Chart, Series};
use netrig_document::experiment::{ArmOutcome, TestOutcome};

/// How many client hosts `arm` ran from, if it is one of the test's client-count arms.
fn count(arm: &ArmOutcome, hosts: &[&str], server: &str) -> Option<usize> {
    let place = arm.lab.as_ref()?;
    if place.server != server || place.path != "link" {
        return None;
    }
    match place.clients.len() {
        0 | 1 => hosts.contains(&place.client.as_str()).then_some(1),
        n => Some(n),
    }
}

/// The chart, when the test ran at least two different numbers of client hosts.
pub fn chart(test: &TestOutcome) -> Option<Chart> {
    let arms = &test.points.first()?.arms;
    let multi = arms
        .iter()
        .filter_map(|a| a.lab.as_ref())
        .find(|p| p.clients.len() > 1)?;
    let server = multi.server.as_str();
    let hosts: Vec<&str> = arms
        .iter()
        .filter_map(|a| a.lab.as_ref())
        .filter(|p| p.server == server)
        .flat_map(|p| p.clients.iter().map(String::as_str))
        .collect();
    let mut series = Vec::new();
    for (i, p) in test.points.iter().enumerate() {
        let mut s = Series {
            label: if p.point.values.is_empty() {
                "sum over the clients".into()
            } else {
                p.point.to_string()
            },
            colour: i,
            ..Series::default()
        };
        let mut drawn: Vec<(usize, &ArmOutcome)> = p
            .arms
            .iter()
            .filter_map(|a| Some((count(a, &hosts, server)?, a)))
            .collect();
        drawn.sort_by_key(|(n, _)| *n);
        for (n, a) in drawn {
            let Some(e) = a.estimate("throughput") else {
                continue;
            };
            s.points.push((n as f64, e.mean));
            if let (Some(lo), Some(hi)) = (e.ci_low, e.ci_high) {
                s.band.push((n as f64, lo, hi));
            }
        }
        if s.points.len() >= 2 {
            series.push(s);
        }
    }
    let most = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0 as usize))
        .max()?;
    if series.is_empty() {
        return None;
    }
    Some(Chart {
        title: format!(
            "{}: throughput summed over the clients sending to {server} at once (each run's window)",
            test.kind
        ),
        x: Axis {
            label: "client hosts at once".into(),
            log: false,
            ticks: (1..=most).map(|n| (n as f64, n.to_string())).collect(),
        },
        y: Axis {
            label: "throughput, sum (Mbit/s)".into(),
            ..Axis::default()
        },
        series,
        ..Chart::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::experiment::LabPlace;
    use netrig_document::fixtures::experiment;

    fn place(clients: &[&str], server: &str, path: &str) -> LabPlace {
        LabPlace {
            shape: vec![],
            client: clients[0].into(),
            client_ns: format!("nr0-{}", clients[0]),
            server: server.into(),
            path: path.into(),
            address: "198.19.255.1:6387".into(),
            segment: Some("sw".into()),
            clients: if clients.len() > 1 {
                clients.iter().map(|c| c.to_string()).collect()
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn sums_against_client_hosts_one_line_per_point() {
        let arms = ["lan", "clients-1", "clients-2", "clients-3", "loopback"];
        let mut e = experiment("tcp-stream", "-s,-S", &["64K", "1M"], &arms, |_, a, r, run| {
            run.summary.throughput_bps = [950e6, 95e6, 190e6, 285e6, 20e9][a] + 1e5 * r as f64;
        });
        let places = [
            place(&["s2"], "s1", "link"),
            place(&["c1"], "s1", "link"),
            place(&["c1", "c2"], "s1", "link"),
            place(&["c1", "c2", "c3"], "s1", "link"),
            place(&["s1"], "s1", "loopback"),
        ];
        for p in &mut e.tests[0].points {
            for (a, pl) in p.arms.iter_mut().zip(&places) {
                a.lab = Some(pl.clone());
            }
        }
        let c = chart(&e.tests[0]).expect("a chart");
        assert_eq!(c.series.len(), 2, "one line per buffer");
        assert_eq!(c.series[0].label, "-s,-S 64K");
        let xs: Vec<f64> = c.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(
            xs,
            [1.0, 2.0, 3.0],
            "the server-to-server and loopback arms are left out"
        );
        let ys: Vec<f64> = c.series[0].points.iter().map(|p| p.1.round()).collect();
        assert_eq!(ys, [95.0, 190.0, 285.0]);
        assert_eq!(c.series[0].band.len(), 3, "three runs: an interval each");
        assert!(crate::plot("clients", &[c]).is_some());
        // No arm of several clients: no chart.
        for p in &mut e.tests[0].points {
            p.arms.retain(|a| a.arm != "clients-2" && a.arm != "clients-3");
        }
        assert!(chart(&e.tests[0]).is_none());
    }
}
