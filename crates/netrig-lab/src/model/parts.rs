//! The parts of a direction's [`Shape`](super::Shape) that are tables of their own: its DSCP
//! classes, its Gilbert–Elliott loss and its RED, as read from TOML (each table refuses fields
//! it does not know).

use crate::pathmodel::GeModel;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// `loss_gemodel`: netem's `loss gemodel p r 1-h 1-k`, in percent. `p`: good → bad; `r`: bad →
/// good; `1-h`: loss in the bad state (default 100); `1-k`: loss in the good state (default 0).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GeSpec {
    pub p: f64,
    pub r: f64,
    #[serde(rename = "1-h", default)]
    pub one_minus_h: Option<f64>,
    #[serde(rename = "1-k", default)]
    pub one_minus_k: Option<f64>,
}

impl GeSpec {
    pub fn model(&self) -> GeModel {
        GeModel {
            p: self.p / 100.0,
            r: self.r / 100.0,
            bad_loss: self.one_minus_h.unwrap_or(100.0) / 100.0,
            good_loss: self.one_minus_k.unwrap_or(0.0) / 100.0,
        }
    }
}

/// One class's RED thresholds (in the queue's unit: packets with `limit_packets`, bytes with
/// `limit_bytes`) and its drop probability at `max` (0..1).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RedClass {
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    #[serde(default)]
    pub probability: Option<f64>,
}

/// `red`: `true` or a table. Thresholds default to a third and a half of the queue's limit,
/// the probability to 0.1, the EWMA weight to 0.002 (Floyd & Jacobson's); `dscp` gives classes
/// thresholds of their own by DSCP name (be, cs0-cs7, af11-af43, ef) or value (0-63).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RedSpec {
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    #[serde(default)]
    pub probability: Option<f64>,
    #[serde(default)]
    pub weight: Option<f64>,
    #[serde(default)]
    pub dscp: BTreeMap<String, RedClass>,
}

/// `red = true`, `red = false` (none) or `red = { ... }`, naming a misspelt field.
pub fn red_or_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RedSpec>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<RedSpec>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("true, false or a table { min, max, probability, weight, dscp }")
        }
        fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
            Ok(b.then(RedSpec::default))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(V)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
            RedSpec::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(Some)
        }
    }
    d.deserialize_any(V)
}

/// One DSCP class on a direction's egress (under its htb rate).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Class {
    /// 1 to 16 of a-z, 0-9, '-'.
    pub name: String,
    /// The DSCP values it takes (0-63 or a name: CS0-CS7, AF11-AF43, EF, LE, BE); absent: the
    /// default class (what no other class matches). Without one, a class "default" is added.
    #[serde(default)]
    pub dscp: Option<Dscp>,
    /// Guaranteed rate: bits/s ("1.5M") or a share of the direction's rate ("1%"). The default
    /// class's defaults to what the others leave.
    #[serde(default)]
    pub rate: Option<String>,
    /// What it may borrow up to when others are idle (default: the direction's rate).
    #[serde(default)]
    pub ceil: Option<String>,
    /// htb priority, 0 (first) to 7; default 1.
    #[serde(default)]
    pub prio: Option<u8>,
    #[serde(default)]
    pub limit_packets: Option<u32>,
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// WRED on this class's queue: `true` (thresholds from its limit) or
    /// `{ min, max, probability, weight, dscp = { ... } }` as a link's `red`. This kernel has no
    /// red qdisc, so a direction with a class asking for it has its classes served by netrig's
    /// path element ([`crate::pathsched`]) instead of htb.
    #[serde(default, deserialize_with = "red_or_bool")]
    pub red: Option<RedSpec>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Dscp {
    One(DscpCode),
    Many(Vec<DscpCode>),
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum DscpCode {
    Num(i64),
    Name(String),
}
