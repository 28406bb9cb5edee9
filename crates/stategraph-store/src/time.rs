//! Store timestamps: microseconds since the Unix epoch, UTC.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

    /// This time plus `by`, rounded to the microsecond (saturating at the largest
    /// timestamp).
    pub fn plus(self, by: Duration) -> Self {
        let micros = by.as_nanos().saturating_add(500) / 1_000;
        Self(
            self.0
                .saturating_add(i64::try_from(micros).unwrap_or(i64::MAX)),
        )
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
        stategraph_value::iso_from_unix_micros(self.0)
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

    /// Parses `YYYY-MM-DD[T| ]HH:MM:SS[.f…][Z|±HH:MM]` (a missing offset means UTC); `None`
    /// for any other text (never a panic, whatever the text).
    pub fn parse(text: &str) -> Option<Self> {
        // Every accepted form is ASCII; checking first lets the rest work on bytes.
        let t = text.trim();
        if !t.is_ascii() {
            return None;
        }
        let t = t.as_bytes();
        let num = |s: &[u8]| -> Option<i64> {
            if s.is_empty() || s.len() > 9 || !s.iter().all(u8::is_ascii_digit) {
                return None;
            }
            Some(s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
        };
        let at = |i: usize| t.get(i).copied();
        let (y, mo, d) = (num(t.get(0..4)?)?, num(t.get(5..7)?)?, num(t.get(8..10)?)?);
        if at(4)? != b'-' || at(7)? != b'-' || !matches!(at(10)?, b'T' | b' ') {
            return None;
        }
        let (hh, mm, ss) = (
            num(t.get(11..13)?)?,
            num(t.get(14..16)?)?,
            num(t.get(17..19)?)?,
        );
        if at(13)? != b':' || at(16)? != b':' {
            return None;
        }
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
            return None;
        }
        let mut rest = t.get(19..)?;
        let mut frac = 0i64;
        if let Some(r) = rest.strip_prefix(b".") {
            let digits = r.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            // Microseconds: the first six digits, padded with zeros.
            let kept = r.get(..digits.min(6))?;
            frac = num(kept)? * 10i64.pow(6 - u32::try_from(kept.len()).ok()?);
            rest = r.get(digits..)?;
        }
        let offset_secs = match rest {
            b"" | b"Z" | b"z" => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let s = num(&[*h1, *h2])? * 3600 + num(&[*m1, *m2])? * 60;
                if *sign == b'-' { -s } else { s }
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

    /// Stored text is not always ASCII (a corrupt row, a hand-edited file): parsing it is a
    /// `None`, never a panic from slicing inside a multi-byte character.
    #[test]
    fn parse_non_ascii_is_none() {
        for text in [
            "2024-01-01 00:00:00é1234",
            "2024-01-01 00:00:00+0é:00",
            "2024-01-01 00:00:00.5é123",
            "2024-01-01 00:00:00ü",
            "２０２４-01-01 00:00:00",
            "2024-01-01 00:00:0é",
            "2024-01-01T00:00:00Z🍕",
        ] {
            assert_eq!(Timestamp::parse(text), None, "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(text in proptest::arbitrary::any::<String>()) {
            let _ = Timestamp::parse(&text);
        }

        /// Valid heads with arbitrary tails reach the fraction and offset parsing.
        #[test]
        fn parse_never_panics_after_a_valid_head(
            head in "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}",
            tail in ".{0,10}",
        ) {
            let _ = Timestamp::parse(&format!("{head}{tail}"));
        }

        #[test]
        fn parse_reads_what_is_written(micros in 0i64..253_402_300_799_999_999) {
            let t = Timestamp::from_unix_micros(micros);
            proptest::prop_assert_eq!(Timestamp::parse(&t.to_iso()), Some(t));
            proptest::prop_assert_eq!(Timestamp::parse(&t.to_sql_text()), Some(t));
        }
    }

    #[test]
    fn now_is_strictly_increasing() {
        let a = Timestamp::now();
        let b = Timestamp::now();
        assert!(b > a);
        assert_eq!(
            a.plus(Duration::from_secs(90)).unix_micros() - a.unix_micros(),
            90_000_000
        );
        assert_eq!(
            a.plus(Duration::from_nanos(1_499)).unix_micros() - a.unix_micros(),
            1
        );
        assert_eq!(
            a.plus(Duration::from_nanos(1_500)).unix_micros() - a.unix_micros(),
            2
        );
        assert_eq!(a.plus(Duration::MAX).unix_micros(), i64::MAX);
        assert_eq!(Timestamp::from_system_time(b.to_system_time()), b);
    }
}
