//! Integers in requests, read as the API's JSON Schema reads them: an `integer` field takes
//! any JSON number with an integral value (`196` or `196.0`, as LangGraph's server accepts
//! both), a query parameter the same number as text. Anything else, a fraction, a negative
//! count or a number out of range, is refused with the field named (the body's parser
//! prefixes the field's path to the message).

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Unexpected, Visitor};

/// The largest integer a JSON float holds exactly (2^53); integral floats up to it convert
/// to integers without loss.
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;

/// The page size of the searches that LangGraph's schema bounds (`limit` of assistants,
/// threads, assistant versions and thread history): 1 to 1000.
const SEARCH_LIMIT: (u64, u64) = (1, 1000);

/// Reads an integer between `min` and `max` (inclusive) from any integral JSON number, and
/// with `text` from its decimal text (a query parameter; a JSON string is not a number).
#[derive(Clone, Copy)]
struct Integer {
    min: u64,
    max: u64,
    text: bool,
}

impl Integer {
    fn check<E: de::Error>(&self, v: u64) -> Result<u64, E> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(E::invalid_value(Unexpected::Unsigned(v), self))
        }
    }
}

impl Visitor<'_> for Integer {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (0, u64::MAX) => f.write_str("a non-negative integer"),
            (min, u64::MAX) => write!(f, "an integer of at least {min}"),
            (min, max) => write!(f, "an integer from {min} to {max}"),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        self.check(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(v) => self.check(v),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if !v.is_finite() || v.fract() != 0.0 || v < 0.0 {
            return Err(E::invalid_value(Unexpected::Float(v), &self));
        }
        if v > MAX_EXACT_FLOAT {
            // Integral, but beyond what a float holds exactly (a JSON integer too large for
            // 64 bits arrives as one): it counts as the largest integer, as the reference
            // takes any integer, so a huge `offset` is an empty page and a bounded field
            // names its range.
            return self
                .check(u64::MAX)
                .map_err(|_: E| E::invalid_value(Unexpected::Float(v), &self));
        }
        // Exact: `v` is integral, not negative and within the range a float holds exactly.
        let n = v as u64;
        self.check(n)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        if !self.text {
            return Err(E::invalid_type(Unexpected::Str(v), &self));
        }
        let text = v.trim();
        if let Ok(n) = text.parse::<u64>() {
            return self.check(n);
        }
        if let Ok(n) = text.parse::<i64>() {
            return self.visit_i64(n);
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => self.visit_f64(f),
            _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

/// A non-negative integer of any size.
const COUNT: Integer = Integer {
    min: 0,
    max: u64::MAX,
    text: false,
};

/// An optional count of a JSON body (`offset`, `max_depth`, a store search's `limit`): a
/// non-negative integer. For `#[serde(default, deserialize_with = "…")]` on an
/// `Option<usize>`; `null` is `None`.
pub(crate) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    optional_usize(d, COUNT)
}

/// An optional count of a query string, as [`count`] but read from its text.
pub(crate) fn query_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    optional_usize(
        d,
        Integer {
            text: true,
            ..COUNT
        },
    )
}

/// An optional page size of a search the reference bounds (1 to 1000), as [`count`].
pub(crate) fn search_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let (min, max) = SEARCH_LIMIT;
    optional_usize(d, Integer { min, max, ..COUNT })
}

/// An optional version number (an assistant's), as [`count`].
pub(crate) fn version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    optional(d, COUNT)
}

/// [`optional`], as a `usize`.
fn optional_usize<'de, D: Deserializer<'de>>(
    d: D,
    kind: Integer,
) -> Result<Option<usize>, D::Error> {
    optional(d, kind)?.map(|v| to_usize(v, kind)).transpose()
}

/// `v` as a `usize` (a `u64` beyond it on a 32-bit platform is out of range).
fn to_usize<E: de::Error>(v: u64, kind: Integer) -> Result<usize, E> {
    usize::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &kind))
}

/// `null` (`None`) or an integer as `kind` reads it.
fn optional<'de, D: Deserializer<'de>>(d: D, kind: Integer) -> Result<Option<u64>, D::Error> {
    struct Maybe(Integer);
    impl<'de> Visitor<'de> for Maybe {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.expecting(f)?;
            f.write_str(" or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self.0).map(Some)
        }
    }
    d.deserialize_option(Maybe(kind))
}

/// A JSON value read as an integer from `min` up, as [`count`] reads one (for values picked
/// out of a free-form object, such as `config.recursion_limit`); the message names `field`.
pub(crate) fn integer_field(
    v: &serde_json::Value,
    field: &str,
    min: u64,
) -> Result<usize, crate::error::ApiError> {
    let kind = Integer { min, ..COUNT };
    v.deserialize_any(kind)
        .and_then(|n| to_usize(n, kind))
        .map_err(|e: serde_json::Error| {
            crate::error::ApiError::invalid(format!("invalid {field}: {e}"))
        })
}

/// Where a field is, as the reference's schema validator names it: in the schema, and in
/// the request.
fn schema_paths(path: &[&str]) -> (String, String) {
    let schema = path
        .iter()
        .map(|p| format!("[\"properties\"][\"{p}\"]"))
        .collect();
    let instance = path.iter().map(|p| format!("[\"{p}\"]")).collect();
    (schema, instance)
}

/// The answer to a value of the wrong JSON type (`kind`: `object`, `number`, …), worded as
/// LangGraph's server's schema validator words it (422).
pub(crate) fn not_of_type(
    path: &[&str],
    given: &serde_json::Value,
    kind: &str,
) -> crate::error::ApiError {
    let (schema, instance) = schema_paths(path);
    crate::error::ApiError::invalid(format!(
        "{given} is not of type \"{kind}\"\n\nFailed validating \"type\" in schema{schema}\n\n\
         On instance{instance}:\n    {given}"
    ))
}

/// The answer to a value outside its field's enumeration, worded as LangGraph's server's
/// schema validator words it (422): the value, the first candidates, and where in the schema
/// and in the request it failed. `path` is the field's path (`["ttl", "strategy"]`).
pub(crate) fn not_one_of(
    path: &[&str],
    given: &serde_json::Value,
    candidates: &[&str],
) -> crate::error::ApiError {
    let quoted: Vec<String> = candidates.iter().map(|c| format!("\"{c}\"")).collect();
    let listed = match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [first, second] => format!("{first} or {second}"),
        [first, second, rest @ ..] => {
            let n = rest.len();
            let noun = if n == 1 { "candidate" } else { "candidates" };
            format!("{first}, {second} or {n} other {noun}")
        }
    };
    let (schema, instance) = schema_paths(path);
    crate::error::ApiError::invalid(format!(
        "{given} is not one of {listed}\n\nFailed validating \"enum\" in schema{schema}\n\n\
         On instance{instance}:\n    {given}"
    ))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Body {
        #[serde(deserialize_with = "super::count")]
        offset: Option<usize>,
        #[serde(deserialize_with = "super::search_limit")]
        limit: Option<usize>,
    }

    fn parse(v: serde_json::Value) -> Result<Body, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn enumerations_are_refused_as_the_reference_words_it() {
        let e = super::not_one_of(
            &["sort_by"],
            &serde_json::json!("nope"),
            &[
                "thread_id",
                "status",
                "created_at",
                "updated_at",
                "state_updated_at",
            ],
        );
        assert_eq!(
            e.detail,
            "\"nope\" is not one of \"thread_id\", \"status\" or 3 other candidates\n\n\
             Failed validating \"enum\" in schema[\"properties\"][\"sort_by\"]\n\n\
             On instance[\"sort_by\"]:\n    \"nope\""
        );
        let e = super::not_one_of(
            &["ttl", "strategy"],
            &serde_json::json!("later"),
            &["delete", "keep_latest"],
        );
        assert_eq!(
            e.detail,
            "\"later\" is not one of \"delete\" or \"keep_latest\"\n\n\
             Failed validating \"enum\" in schema[\"properties\"][\"ttl\"][\"properties\"][\"strategy\"]\n\n\
             On instance[\"ttl\"][\"strategy\"]:\n    \"later\""
        );
    }

    #[test]
    fn integral_floats_are_integers() {
        let body = parse(json!({"limit": 196.0, "offset": 3})).unwrap();
        assert_eq!((body.limit, body.offset), (Some(196), Some(3)));
        let body = parse(json!({"limit": null})).unwrap();
        assert_eq!(body, Body::default());
    }

    #[test]
    fn fractions_negatives_and_out_of_range_are_refused() {
        for (v, expected) in [
            (json!({"offset": 1.5}), "a non-negative integer"),
            (json!({"offset": -1}), "a non-negative integer"),
            (json!({"limit": 0}), "an integer from 1 to 1000"),
            (json!({"limit": 1001}), "an integer from 1 to 1000"),
            (json!({"limit": "10"}), "an integer from 1 to 1000"),
            (json!({"offset": "3"}), "a non-negative integer"),
        ] {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.contains(expected), "{v}: {e}");
        }
    }

    #[test]
    fn integers_beyond_64_bits_are_the_largest_count() {
        let body = parse(json!({"offset": 1e300})).unwrap();
        assert_eq!(body.offset, Some(usize::MAX));
        let e = parse(json!({"limit": 4.6e21})).unwrap_err();
        assert!(e.contains("an integer from 1 to 1000"), "{e}");
    }

    #[test]
    fn query_text_is_read_as_a_number() {
        #[derive(Deserialize, Debug)]
        struct Query {
            #[serde(default, deserialize_with = "super::query_count")]
            limit: Option<usize>,
        }
        let q: Query = serde_json::from_value(json!({"limit": "196.0"})).unwrap();
        assert_eq!(q.limit, Some(196));
        assert!(serde_json::from_value::<Query>(json!({"limit": "ten"})).is_err());
        let e = serde_json::from_value::<Query>(json!({"limit": "-5"})).unwrap_err();
        assert!(e.to_string().contains("integer `-5`"), "{e}");
    }

    #[test]
    fn a_field_of_a_free_form_object_is_named() {
        assert_eq!(super::integer_field(&json!(5.0), "x", 1).unwrap(), 5);
        let e = super::integer_field(&json!(0), "config.recursion_limit", 1).unwrap_err();
        assert!(e.detail.contains("config.recursion_limit"), "{}", e.detail);
    }
}
