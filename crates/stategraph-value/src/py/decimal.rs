//! Python's `decimal.Decimal`, kept as its exact text.

use std::fmt;
use std::str::FromStr;

use super::{PyType, object_data, shape};
use crate::SerdeError;
use crate::{Ext, ExtCode, Value};

/// A Python `decimal.Decimal`: exact decimal text, checked on construction (digits with an
/// optional sign, point and exponent, or `NaN`, `sNaN`, `Infinity`). Kept as text, so no digit
/// is ever lost; `-12.3400` stays `-12.3400`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyDecimal(String);

impl PyDecimal {
    /// Checks `text` is a decimal Python's `Decimal(text)` accepts in its canonical form.
    pub fn new(text: &str) -> Result<Self, SerdeError> {
        text.parse()
    }

    /// The decimal's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The nearest `f64` (lossy).
    pub fn to_f64(&self) -> f64 {
        let t = self.0.trim_start_matches(['+', '-']);
        let neg = self.0.starts_with('-');
        let v = match t {
            "NaN" | "sNaN" => f64::NAN,
            "Infinity" | "Inf" => f64::INFINITY,
            _ => t.parse().unwrap_or(f64::NAN),
        };
        if neg { -v } else { v }
    }
}

impl FromStr for PyDecimal {
    type Err = SerdeError;

    fn from_str(text: &str) -> Result<Self, SerdeError> {
        let bad = || shape(format!("`{text}` is not a decimal number"));
        let body = text.strip_prefix(['+', '-']).unwrap_or(text);
        if matches!(body, "NaN" | "sNaN" | "Infinity" | "Inf") {
            return Ok(Self(text.to_owned()));
        }
        let (mantissa, exponent) = match body.split_once(['e', 'E']) {
            Some((m, e)) => (m, Some(e)),
            None => (body, None),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
            return Err(bad());
        }
        if let Some(e) = exponent {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            if e.is_empty() || !digits(e) {
                return Err(bad());
            }
        }
        Ok(Self(text.to_owned()))
    }
}

impl fmt::Display for PyDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PyType for PyDecimal {
    fn to_py(&self) -> Result<Value, SerdeError> {
        Ok(Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "decimal",
            "Decimal",
            Value::from(self.0.as_str()),
        )))
    }

    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        match object_data(
            value,
            ExtCode::ConstructorSingleArg,
            &[("decimal", "Decimal")],
        )? {
            Value::Str(s) => s.parse(),
            data => Err(shape(format!("a Decimal's data is its text, not {data}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_is_checked_and_kept() {
        for ok in ["-12.3400", "0", ".5", "1e-7", "+3E+10", "NaN", "-Infinity"] {
            assert_eq!(PyDecimal::new(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "1.2.3", "abc", "1e", "--1", "."] {
            assert!(PyDecimal::new(bad).is_err(), "{bad}");
        }
        assert_eq!(PyDecimal::new("-2.5").unwrap().to_f64(), -2.5);
    }
}
