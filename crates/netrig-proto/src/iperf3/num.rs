//! Reading an iperf3 JSON object as iperf3 does: a key holding a value of
//! the wrong type is taken as absent (its iperf_cJSON_GetObjectItemType),
//! and numbers are doubles (cJSON), which netrig bounds before it makes
//! integers of them.

use super::Iperf3Error;
use serde_json::{Map, Value};

pub(crate) type Object = Map<String, Value>;

/// Parses `json` as one JSON object.
pub(crate) fn object(json: &[u8], what: &'static str) -> Result<Object, Iperf3Error> {
    match serde_json::from_slice::<Value>(json) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Iperf3Error::BadJson {
            what,
            reason: "not a JSON object".into(),
        }),
        Err(e) => Err(Iperf3Error::BadJson {
            what,
            reason: e.to_string(),
        }),
    }
}

/// A key iperf3 sends as `true` when on (and leaves out when off).
pub(crate) fn flag(o: &Object, key: &str) -> bool {
    matches!(o.get(key), Some(Value::Bool(true)))
}

/// A key iperf3 sends as a number when on: any number means on, as iperf3
/// reads it (`get_server_output`, `udp_counters_64bit`, ...).
pub(crate) fn number_flag(o: &Object, key: &str) -> bool {
    matches!(o.get(key), Some(Value::Number(_)))
}

/// A number, if the key holds one.
pub(crate) fn float(o: &Object, key: &str) -> Option<f64> {
    o.get(key).and_then(Value::as_f64)
}

/// A whole number in `0..=max`, if the key holds a number; fractions are
/// cut as cJSON's valueint cuts them. Anything else is an error naming
/// iperf3's option for the key.
pub(crate) fn bounded(
    o: &Object,
    key: &str,
    option: &'static str,
    meaning: &'static str,
    max: u64,
    code: i32,
) -> Result<Option<u64>, Iperf3Error> {
    let Some(v) = o.get(key).and_then(Value::as_f64) else {
        return Ok(None);
    };
    if v.is_finite() && v >= 0.0 && v.trunc() <= max as f64 {
        return Ok(Some(v.trunc() as u64));
    }
    Err(Iperf3Error::BadValue {
        option,
        meaning,
        value: format!("{v}"),
        limit: format!("0 to {max}"),
        code,
    })
}

/// A signed whole number (a count iperf3 reports as -1 when it has
/// none); a number outside i64's range is taken as absent.
pub(crate) fn int(o: &Object, key: &str) -> Option<i64> {
    let v = o.get(key)?;
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?.trunc();
    (f.is_finite() && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
}

/// A string of at most `max` bytes, if the key holds a string.
pub(crate) fn string(o: &Object, key: &str, max: usize) -> Result<Option<String>, Iperf3Error> {
    match o.get(key) {
        Some(Value::String(s)) if s.len() > max => Err(Iperf3Error::TooLong {
            what: "a string",
            len: s.len() as u64,
            max,
            whose: "netrig's",
        }),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        _ => Ok(None),
    }
}
