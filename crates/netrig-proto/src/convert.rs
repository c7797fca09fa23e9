//! One macro for the conversions between netrig's three sets of types: what
//! the engine measures (netrig-metrics), what travels (this crate's
//! [`report::measure`](crate::report::measure)), and what the result document
//! holds (netrig-report's model). Each set is written out in its own crate;
//! the conversion from one to the next is this macro over one field list.

/// Writes `impl From<&Src> for Dst` from a list of `Dst`'s fields: each is
/// cloned from the field of the same name in `Src`, or from the one named
/// after `=` (`rtt_us = srtt_us`) when the source calls it something else.
///
/// The list must name every field of `Dst` (a struct literal, so one left
/// out does not compile), and every source field it reads must exist (so a
/// field renamed in `Src` does not compile until the list says where it
/// went). Fields `Src` has beyond the list are not carried.
///
/// ```
/// #[derive(Default)]
/// struct Measured { rtt_us: u32, note: String }
/// struct Sent { rtt: u32, note: String }
/// netrig_proto::from_fields!(Measured => Sent { rtt = rtt_us, note });
/// let s = Sent::from(&Measured { rtt_us: 7, note: "x".into() });
/// assert_eq!((s.rtt, s.note.as_str()), (7, "x"));
/// ```
#[macro_export]
macro_rules! from_fields {
    (@field $src:ident, $field:ident) => {
        ::core::clone::Clone::clone(&$src.$field)
    };
    (@field $src:ident, $field:ident, $from:ident) => {
        ::core::clone::Clone::clone(&$src.$from)
    };
    ($src:ty => $dst:ident { $($field:ident $(= $from:ident)?),+ $(,)? }) => {
        impl ::core::convert::From<&$src> for $dst {
            fn from(src: &$src) -> Self {
                $dst { $($field: $crate::from_fields!(@field src, $field $(, $from)?)),+ }
            }
        }
    };
}
