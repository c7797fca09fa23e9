//! Each end's results, exchanged after TEST_END (iperf_api.c's
//! send_results and get_results): the client's first, then the server's.
//! iperf3 prints the other end's figures as its "receiver" or "sender"
//! line, so what netrig sends here is what an iperf3 user reads as the
//! netrig end's.

use super::num::{self, float, int, Object};
use super::{Iperf3Error, MAX_RESULTS_JSON, MAX_STREAMS};
use serde_json::{json, Map, Value};

/// One stream's figures, from the end that sends them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    /// The stream's id ([`super::stream_ids`]).
    pub id: i32,
    /// A sending stream: bytes sent after the omitted start; a receiving
    /// one: bytes received after it.
    pub bytes: u64,
    /// A sending TCP stream's retransmitted segments; -1 where the end
    /// has none to report (a receiving stream, UDP).
    pub retransmits: i64,
    /// UDP, a receiving stream: RFC 3550 jitter, seconds.
    pub jitter: f64,
    /// UDP, a receiving stream: datagrams lost.
    pub errors: i64,
    pub omitted_errors: Option<i64>,
    /// UDP: datagrams sent or received.
    pub packets: i64,
    pub omitted_packets: Option<i64>,
    /// Seconds from the stream's start (always 0) and to its end.
    pub start_time: f64,
    pub end_time: f64,
}

/// One end's results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// The end's process CPU over the test, percent of one CPU... as iperf3
    /// counts it: (user + system time) / wall time × 100.
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// 1 when the end's sending streams report retransmits, 0 when they
    /// cannot, -1 when it sent nothing.
    pub sender_has_retransmits: i32,
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
    /// The server's own report, when the client asked (`--get-server-output`).
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
}

impl Results {
    /// Reads an end's results, bounded: at most [`MAX_RESULTS_JSON`] bytes
    /// and twice [`MAX_STREAMS`] streams (a `--bidir` test's).
    pub fn decode(json: &[u8]) -> Result<Results, Iperf3Error> {
        if json.len() > MAX_RESULTS_JSON {
            return Err(Iperf3Error::TooLong {
                what: "iperf3 results",
                len: json.len() as u64,
                max: MAX_RESULTS_JSON,
                whose: "netrig's",
            });
        }
        let o = num::object(json, "the iperf3 results")?;
        let missing = |key: &str| Iperf3Error::BadJson {
            what: "the iperf3 results",
            reason: format!("no number `{key}`"),
        };
        let cpu = |key: &'static str| float(&o, key).ok_or_else(|| missing(key));
        let streams = match o.get("streams") {
            Some(Value::Array(a)) if a.len() > 2 * MAX_STREAMS => {
                return Err(Iperf3Error::TooLong {
                    what: "the iperf3 results' streams",
                    len: a.len() as u64,
                    max: 2 * MAX_STREAMS,
                    whose: "iperf3's",
                })
            }
            Some(Value::Array(a)) => a.iter().map(stream).collect::<Result<Vec<_>, _>>()?,
            _ => return Err(missing("streams")),
        };
        Ok(Results {
            cpu_util_total: cpu("cpu_util_total")?,
            cpu_util_user: cpu("cpu_util_user")?,
            cpu_util_system: cpu("cpu_util_system")?,
            sender_has_retransmits: int(&o, "sender_has_retransmits")
                .ok_or_else(|| missing("sender_has_retransmits"))?
                .clamp(-1, 1) as i32,
            congestion_used: num::string(&o, "congestion_used", 64)?,
            streams,
            server_output_text: num::string(&o, "server_output_text", MAX_RESULTS_JSON)?,
            server_output_json: o.get("server_output_json").filter(|v| v.is_object()).cloned(),
        })
    }

    /// The results as iperf3 3.21 sends them.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Map::new();
        o.insert("cpu_util_total".into(), json!(finite(self.cpu_util_total)));
        o.insert("cpu_util_user".into(), json!(finite(self.cpu_util_user)));
        o.insert("cpu_util_system".into(), json!(finite(self.cpu_util_system)));
        o.insert(
            "sender_has_retransmits".into(),
            json!(self.sender_has_retransmits),
        );
        if let Some(c) = &self.congestion_used {
            o.insert("congestion_used".into(), json!(c));
        }
        if let Some(t) = &self.server_output_text {
            o.insert("server_output_text".into(), json!(t));
        }
        if let Some(j) = &self.server_output_json {
            o.insert("server_output_json".into(), j.clone());
        }
        let streams = self.streams.iter().map(|s| {
            json!({
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": s.retransmits,
                "jitter": finite(s.jitter),
                "errors": s.errors,
                "omitted_errors": s.omitted_errors.unwrap_or(0),
                "packets": s.packets,
                "omitted_packets": s.omitted_packets.unwrap_or(0),
                "start_time": finite(s.start_time),
                "end_time": finite(s.end_time),
            })
        });
        o.insert("streams".into(), Value::Array(streams.collect()));
        serde_json::to_vec(&Value::Object(o)).expect("a JSON object always serialises")
    }

    /// The stream of this id.
    pub fn stream(&self, id: i32) -> Option<&StreamResult> {
        self.streams.iter().find(|s| s.id == id)
    }
}

/// JSON has no NaN or infinity: a figure that is not finite is sent as 0.
fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

fn stream(v: &Value) -> Result<StreamResult, Iperf3Error> {
    let bad = |reason: String| Iperf3Error::BadJson {
        what: "an iperf3 stream's results",
        reason,
    };
    let Value::Object(o) = v else {
        return Err(bad("not an object".into()));
    };
    let need = |o: &Object, key: &str| int(o, key).ok_or_else(|| bad(format!("no number `{key}`")));
    let omitted_errors = int(o, "omitted_errors");
    let omitted_packets = int(o, "omitted_packets");
    if omitted_errors.is_some() != omitted_packets.is_some() {
        return Err(bad(
            "`omitted_errors` without `omitted_packets`, or the other way".into(),
        ));
    }
    let id = need(o, "id")?;
    let bytes = need(o, "bytes")?;
    Ok(StreamResult {
        id: i32::try_from(id).map_err(|_| bad(format!("stream id {id}")))?,
        bytes: u64::try_from(bytes).map_err(|_| bad(format!("{bytes} bytes")))?,
        retransmits: need(o, "retransmits")?,
        jitter: float(o, "jitter").ok_or_else(|| bad("no number `jitter`".into()))?,
        errors: need(o, "errors")?,
        omitted_errors,
        packets: need(o, "packets")?,
        omitted_packets,
        start_time: float(o, "start_time").unwrap_or(0.0),
        end_time: float(o, "end_time").unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::super::recorded;
    use super::*;

    #[test]
    fn an_iperf3_3_21_exchange_is_read() {
        let c = Results::decode(recorded::RESULTS_CLIENT).unwrap();
        assert_eq!(c.sender_has_retransmits, 1);
        let ids: Vec<i32> = c.streams.iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![1, 3]);
        assert_eq!(c.stream(1).unwrap().bytes, 1_194_065_920);
        assert_eq!(c.stream(1).unwrap().retransmits, 12);
        let s = Results::decode(recorded::RESULTS_SERVER).unwrap();
        assert_eq!(s.sender_has_retransmits, -1);
        assert!(s.server_output_text.as_deref().unwrap().contains("receiver"));
        assert_eq!(s.streams.len(), 2);
        assert!(s.streams.iter().all(|x| x.retransmits == -1 && x.end_time > 0.9));
    }

    #[test]
    fn what_netrig_sends_reads_back_the_same() {
        let r = Results {
            cpu_util_total: 12.5,
            cpu_util_user: 2.5,
            cpu_util_system: 10.0,
            sender_has_retransmits: 1,
            congestion_used: Some("cubic".into()),
            streams: vec![StreamResult {
                id: 3,
                bytes: 1 << 40,
                retransmits: 7,
                jitter: 0.000_125,
                errors: 2,
                omitted_errors: Some(0),
                packets: 1000,
                omitted_packets: Some(0),
                start_time: 0.0,
                end_time: 10.0,
            }],
            server_output_text: Some("netrig\n".into()),
            server_output_json: None,
        };
        assert_eq!(Results::decode(&r.encode()).unwrap(), r);
    }

    #[test]
    fn hostile_results_are_refused_without_panicking() {
        let many = format!(
            r#"{{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{}]}}"#,
            vec!["{}"; 300].join(",")
        );
        assert!(matches!(
            Results::decode(many.as_bytes()),
            Err(Iperf3Error::TooLong { .. })
        ));
        let negative = br#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":-5,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        assert!(Results::decode(negative).is_err());
        let huge = br#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":1e300,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        assert!(Results::decode(huge).is_err());
        let id = br#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":4294967296,"bytes":1,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        assert!(Results::decode(id).is_err());
        assert!(Results::decode(b"{\"cpu_util_total\":1e999}").is_err());
        assert!(Results::decode(b"[]").is_err());
        assert!(Results::decode(b"{\"streams\":[]}").is_err());
    }
}
