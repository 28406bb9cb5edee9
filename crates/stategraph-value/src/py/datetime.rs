//! chrono's dates, times and durations as Python's `datetime`, `date`, `time` and
//! `timedelta` (feature `chrono`).

use chrono::{
    DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Timelike, Utc,
};

use super::{PyType, object_data, shape};
use crate::SerdeError;
use crate::{Ext, ExtCode, Map, PyObject, Value};

const DATETIME: [(&str, &str); 1] = [("datetime", "datetime")];

fn micros(nanos: u32, what: &str) -> Result<u32, SerdeError> {
    if nanos >= 1_000_000_000 {
        return Err(shape(format!("{what}: Python has no leap seconds")));
    }
    if !nanos.is_multiple_of(1000) {
        return Err(shape(format!(
            "{what} has {nanos} ns: Python keeps microseconds; truncate first \
             (chrono::SubsecRound::trunc_subsecs(6))"
        )));
    }
    Ok(nanos / 1000)
}

/// Python's `isoformat()` of a naive datetime.
fn iso_naive(dt: &NaiveDateTime) -> Result<String, SerdeError> {
    if !(1..=9999).contains(&dt.year()) {
        return Err(shape(format!(
            "year {} is outside Python's 1..=9999",
            dt.year()
        )));
    }
    let us = micros(dt.nanosecond(), "the datetime")?;
    let mut s = dt.format("%Y-%m-%dT%H:%M:%S").to_string();
    if us != 0 {
        s.push_str(&format!(".{us:06}"));
    }
    Ok(s)
}

/// Python's `+HH:MM[:SS]` form of an offset.
fn iso_offset(offset: &FixedOffset) -> String {
    let total = offset.local_minus_utc();
    let sign = if total < 0 { '-' } else { '+' };
    let t = total.unsigned_abs();
    let (h, m, s) = (t / 3600, t / 60 % 60, t % 60);
    if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

fn datetime_value(iso: String) -> Value {
    Value::Ext(Ext::from_py_object(
        ExtCode::MethodSingleArg,
        &PyObject::new("datetime", "datetime", Value::from(iso)).with_method("fromisoformat"),
    ))
}

fn datetime_text(value: &Value) -> Result<String, SerdeError> {
    match object_data(value, ExtCode::MethodSingleArg, &DATETIME)? {
        Value::Str(s) => Ok(s.to_string()),
        data => Err(shape(format!(
            "a datetime's data is its ISO text, not {data}"
        ))),
    }
}

impl PyType for DateTime<FixedOffset> {
    fn to_py(&self) -> Result<Value, SerdeError> {
        let iso = iso_naive(&self.naive_local())? + &iso_offset(self.offset());
        Ok(datetime_value(iso))
    }

    /// Reads an aware `datetime`; a naive one is an error (read it as `NaiveDateTime`).
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let text = datetime_text(value)?;
        DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%:z")
            .or_else(|_| DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%::z"))
            .map_err(|_| {
                shape(format!(
                    "`{text}` is not an aware datetime (naive ones read as NaiveDateTime)"
                ))
            })
    }
}

impl PyType for DateTime<Utc> {
    fn to_py(&self) -> Result<Value, SerdeError> {
        self.fixed_offset().to_py()
    }

    /// Reads an aware `datetime` at any offset, as the same instant in UTC.
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        Ok(DateTime::<FixedOffset>::from_py(value)?.to_utc())
    }
}

impl PyType for NaiveDateTime {
    fn to_py(&self) -> Result<Value, SerdeError> {
        Ok(datetime_value(iso_naive(self)?))
    }

    /// Reads a naive `datetime`; an aware one is an error (read it as `DateTime`).
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let text = datetime_text(value)?;
        NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f").map_err(|_| {
            shape(format!(
                "`{text}` is not a naive datetime (aware ones read as DateTime)"
            ))
        })
    }
}

fn int(v: &Value, what: &str) -> Result<i64, SerdeError> {
    v.as_i64()
        .ok_or_else(|| shape(format!("{what} is not an integer: {v}")))
}

impl PyType for NaiveDate {
    fn to_py(&self) -> Result<Value, SerdeError> {
        if !(1..=9999).contains(&self.year()) {
            return Err(shape(format!(
                "year {} is outside Python's 1..=9999",
                self.year()
            )));
        }
        Ok(Value::Ext(Ext::python(
            ExtCode::ConstructorPosArgs,
            "datetime",
            "date",
            Value::from(vec![
                Value::Int(self.year().into()),
                Value::Int(self.month().into()),
                Value::Int(self.day().into()),
            ]),
        )))
    }

    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let data = object_data(value, ExtCode::ConstructorPosArgs, &[("datetime", "date")])?;
        let Value::List(parts) = &data else {
            return Err(shape(format!("a date's data is [y, m, d], not {data}")));
        };
        let [y, m, d] = parts.as_slice() else {
            return Err(shape(format!("a date's data is [y, m, d], not {data}")));
        };
        let (y, m, d) = (int(y, "year")?, int(m, "month")?, int(d, "day")?);
        i32::try_from(y)
            .ok()
            .zip(u32::try_from(m).ok().zip(u32::try_from(d).ok()))
            .and_then(|(y, (m, d))| NaiveDate::from_ymd_opt(y, m, d))
            .ok_or_else(|| shape(format!("no such date: {y}-{m}-{d}")))
    }
}

impl PyType for NaiveTime {
    fn to_py(&self) -> Result<Value, SerdeError> {
        let us = micros(self.nanosecond(), "the time")?;
        let mut m = Map::new();
        m.insert("hour", Value::Int(self.hour().into()));
        m.insert("minute", Value::Int(self.minute().into()));
        m.insert("second", Value::Int(self.second().into()));
        m.insert("microsecond", Value::Int(us.into()));
        m.insert("tzinfo", Value::Null);
        m.insert("fold", Value::Int(0));
        Ok(Value::Ext(Ext::python(
            ExtCode::ConstructorKwArgs,
            "datetime",
            "time",
            Value::Map(m),
        )))
    }

    /// Reads a `time` without tzinfo.
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let data = object_data(value, ExtCode::ConstructorKwArgs, &[("datetime", "time")])?;
        let Some(m) = data.as_map() else {
            return Err(shape(format!("a time's data is its fields, not {data}")));
        };
        if m.get("tzinfo").is_some_and(|t| !t.is_null()) {
            return Err(shape("a time with a tzinfo has no Rust NaiveTime form"));
        }
        let field = |k: &str| match m.get(k) {
            Some(v) => int(v, k),
            None => Ok(0),
        };
        let (h, mi, s, us) = (
            field("hour")?,
            field("minute")?,
            field("second")?,
            field("microsecond")?,
        );
        u32::try_from(h)
            .ok()
            .zip(u32::try_from(mi).ok())
            .zip(u32::try_from(s).ok().zip(u32::try_from(us).ok()))
            .and_then(|((h, mi), (s, us))| NaiveTime::from_hms_micro_opt(h, mi, s, us))
            .ok_or_else(|| shape(format!("no such time: {h}:{mi}:{s}.{us:06}")))
    }
}

const DAY_MICROS: i128 = 86_400_000_000;

impl PyType for TimeDelta {
    fn to_py(&self) -> Result<Value, SerdeError> {
        let nanos =
            i128::from(self.num_seconds()) * 1_000_000_000 + i128::from(self.subsec_nanos());
        if nanos % 1000 != 0 {
            return Err(shape(format!(
                "the timedelta has {} ns: Python keeps microseconds",
                nanos % 1_000_000_000
            )));
        }
        let total = nanos / 1000;
        let days = total.div_euclid(DAY_MICROS);
        let rest = total.rem_euclid(DAY_MICROS);
        if days.abs() > 999_999_999 {
            return Err(shape("the timedelta exceeds Python's ±999999999 days"));
        }
        let as_value = |n: i128| Value::Int(i64::try_from(n).unwrap_or_default());
        Ok(Value::Ext(Ext::python(
            ExtCode::ConstructorPosArgs,
            "datetime",
            "timedelta",
            Value::from(vec![
                as_value(days),
                as_value(rest / 1_000_000),
                as_value(rest % 1_000_000),
            ]),
        )))
    }

    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let data = object_data(
            value,
            ExtCode::ConstructorPosArgs,
            &[("datetime", "timedelta")],
        )?;
        let Value::List(parts) = &data else {
            return Err(shape(format!(
                "a timedelta's data is [days, seconds, microseconds], not {data}"
            )));
        };
        let mut total: i128 = 0;
        for (i, unit) in [DAY_MICROS, 1_000_000, 1].into_iter().enumerate() {
            if let Some(v) = parts.get(i) {
                total += i128::from(int(v, "a timedelta part")?) * unit;
            }
        }
        i64::try_from(total)
            .ok()
            .map(TimeDelta::microseconds)
            .ok_or_else(|| shape("the timedelta is too large"))
    }
}
