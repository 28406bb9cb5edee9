//! Store timestamps: microseconds since the Unix epoch, UTC.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time, UTC, with microsecond precision (what Python's `datetime` holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

static LAST: AtomicI64 = AtomicI64::new(0);

impl Timestamp {
    /// The current time. Strictly increasing within a process, so that writes made one after
    /// the other in one process order the same way by time as they were made.
    pub fn now() -> Self {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let mut prev = LAST.load(Ordering::Relaxed);
        loop {
            let next = wall.max(prev + 1);
            match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Self(next),
                Err(p) => prev = p,
            }
        }
    }

    /// The timestamp `micros` microseconds after the Unix epoch.
    pub const fn from_unix_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn unix_micros(self) -> i64 {
        self.0
    }

    /// This time plus `minutes` (fractional minutes allowed, as LangGraph's TTLs are).
    pub fn plus_minutes(self, minutes: f64) -> Self {
        let delta = (minutes * 60_000_000.0).round();
        let delta = if delta.is_finite() {
            delta as i64
        } else {
            i64::MAX
        };
        Self(self.0.saturating_add(delta))
    }

    /// The time as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + std::time::Duration::from_micros(self.0.unsigned_abs())
        } else {
            UNIX_EPOCH - std::time::Duration::from_micros(self.0.unsigned_abs())
        }
    }

    /// The time of a [`SystemTime`], truncated to microseconds.
    pub fn from_system_time(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Self(i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
            Err(e) => Self(-i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX)),
        }
    }

    /// ISO 8601 as Python's `datetime.isoformat()` writes an aware UTC time
    /// (`2026-11-22T10:07:00.334735+00:00`).
    pub fn to_iso(self) -> String {
        crate::iso_from_unix_micros(self.0)
    }

    /// SQL text form, `YYYY-MM-DD HH:MM:SS.ffffff` (UTC, like SQLite's `CURRENT_TIMESTAMP`
    /// with a fraction; Python's `datetime.fromisoformat` reads it).
    pub fn to_sql_text(self) -> String {
        let iso = self.to_iso();
        let base = iso.trim_end_matches("+00:00").replacen('T', " ", 1);
        if base.len() == 19 {
            format!("{base}.000000")
        } else {
            base
        }
    }

    /// Parses `YYYY-MM-DD[T| ]HH:MM:SS[.f…][Z|±HH:MM]` (a missing offset means UTC).
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let num = |s: &str| -> Option<i64> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        let (y, mo, d) = (num(t.get(0..4)?)?, num(t.get(5..7)?)?, num(t.get(8..10)?)?);
        if t.get(4..5)? != "-" || t.get(7..8)? != "-" || !matches!(t.get(10..11)?, "T" | " ") {
            return None;
        }
        let (hh, mm, ss) = (
            num(t.get(11..13)?)?,
            num(t.get(14..16)?)?,
            num(t.get(17..19)?)?,
        );
        if t.get(13..14)? != ":" || t.get(16..17)? != ":" {
            return None;
        }
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
            return None;
        }
        let mut rest = &t[19..];
        let mut frac = 0i64;
        if let Some(r) = rest.strip_prefix('.') {
            let digits = r.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let mut f = r[..digits.min(6)].to_owned();
            while f.len() < 6 {
                f.push('0');
            }
            frac = num(&f)?;
            rest = &r[digits..];
        }
        let offset_secs = match rest {
            "" | "Z" | "z" => 0,
            o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
                let s = num(&o[1..3])? * 3600 + num(&o[4..6])? * 60;
                if o.starts_with('-') { -s } else { s }
            }
            _ => return None,
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_secs;
        Some(Self(secs * 1_000_000 + frac))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso())
    }
}

/// (year, month, day) → days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_round_trip() {
        let t = Timestamp::parse("2026-11-22T10:07:00.334735+00:00").unwrap();
        assert_eq!(t.to_iso(), "2026-11-22T10:07:00.334735+00:00");
        assert_eq!(t.to_sql_text(), "2026-11-22 10:07:00.334735");
        assert_eq!(Timestamp::parse(&t.to_sql_text()), Some(t));
        let whole = Timestamp::parse("2024-02-29 23:59:59").unwrap();
        assert_eq!(whole.to_iso(), "2024-02-29T23:59:59+00:00");
        let shifted = Timestamp::parse("2024-03-01T01:59:59.5+02:00").unwrap();
        assert_eq!(shifted.to_iso(), "2024-02-29T23:59:59.500000+00:00");
        assert_eq!(
            Timestamp::parse("1970-01-01T00:00:00Z")
                .unwrap()
                .unix_micros(),
            0
        );
        for bad in [
            "",
            "2024-13-01 00:00:00",
            "2024-01-01",
            "2024-01-01 00:00:00+0200",
            "x",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn now_is_strictly_increasing() {
        let a = Timestamp::now();
        let b = Timestamp::now();
        assert!(b > a);
        assert_eq!(
            a.plus_minutes(1.5).unix_micros() - a.unix_micros(),
            90_000_000
        );
        assert_eq!(Timestamp::from_system_time(b.to_system_time()), b);
    }
}
