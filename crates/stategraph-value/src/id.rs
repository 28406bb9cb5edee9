//! Time-ordered checkpoint ids (UUIDv6, as LangGraph makes them) and ISO-8601 timestamps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// 100-ns intervals between 1582-10-15 (the UUID epoch) and 1970-01-01.
const UUID_EPOCH_OFFSET: u64 = 0x01B2_1DD2_1381_4000;

/// The last timestamp handed out in this process; ids are strictly increasing within it.
static LAST_TIMESTAMP: AtomicU64 = AtomicU64::new(0);

/// A new checkpoint id for `step`: a UUIDv6 whose clock sequence is `step & 0x3FFF`, so the
/// fourth group is `bfff` for step −1 and `8000 + step` otherwise, exactly like LangGraph.
/// Ids compare, as strings, in creation order (strictly, within one process).
pub fn checkpoint_id(step: i64) -> String {
    uuid6(Some(step))
}

/// A UUIDv6 with the given clock sequence (14 random bits when `None`) and a random node.
pub fn uuid6(clock_seq: Option<i64>) -> String {
    let timestamp = next_timestamp();
    // Two's complement masking, as Python's `clock_seq & 0x3FFF` does for negative steps.
    let clock_seq = clock_seq.map_or_else(|| fastrand::u64(..) & 0x3FFF, |s| (s as u64) & 0x3FFF);
    let node = fastrand::u64(..) & 0xFFFF_FFFF_FFFF;
    format_uuid(
        uuid6_time_bits(timestamp)
            | (0b10u128 << 62)
            | (u128::from(clock_seq) << 48)
            | u128::from(node),
    )
}

/// The time and version fields of a UUIDv6 for `timestamp` (100-ns ticks since the UUID
/// epoch); the low 64 bits are left zero.
fn uuid6_time_bits(timestamp: u64) -> u128 {
    let time_high = (timestamp >> 12) & 0xFFFF_FFFF_FFFF;
    let time_low = timestamp & 0xFFF;
    (u128::from(time_high) << 80) | (6u128 << 76) | (u128::from(time_low) << 64)
}

/// `time` in 100-ns ticks since the UUID epoch.
fn uuid_ticks(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos() / 100).unwrap_or(u64::MAX))
        .saturating_add(UUID_EPOCH_OFFSET)
}

/// The smallest UUIDv6 of `time`: every id made at `time` or later compares (as a string)
/// at least equal to it, every id made before it less.
pub fn first_uuid6_at(time: SystemTime) -> String {
    format_uuid(uuid6_time_bits(uuid_ticks(time)))
}

fn next_timestamp() -> u64 {
    let now = uuid_ticks(SystemTime::now());
    let mut last = LAST_TIMESTAMP.load(Ordering::Relaxed);
    loop {
        let ts = if now <= last { last + 1 } else { now };
        match LAST_TIMESTAMP.compare_exchange_weak(last, ts, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return ts,
            Err(actual) => last = actual,
        }
    }
}

/// Formats 128 bits as `8-4-4-4-12` lowercase hex.
pub fn format_uuid(value: u128) -> String {
    // Hot (every task id of every step and snapshot): the uuid crate encodes into a buffer.
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid::Uuid::from_u128(value)
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}

/// The current UTC time as Python's `datetime.now(timezone.utc).isoformat()` writes it:
/// `2026-11-22T10:07:00.334735+00:00` (no fraction when the microseconds are zero).
pub fn now_iso() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    iso_from_unix_micros(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Formats microseconds since the Unix epoch like Python's `isoformat()` of an aware UTC
/// datetime.
pub fn iso_from_unix_micros(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (sod / 3600, (sod % 3600) / 60, sod % 60);
    if frac == 0 {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}+00:00")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{frac:06}+00:00")
    }
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A random uuid4 in its text form (Python's `str(uuid4())`): the ids LangGraph gives messages
/// that have none.
pub fn uuid4() -> String {
    let raw = fastrand::u128(..);
    let v = (raw & !(0xF_u128 << 76)) | (0x4_u128 << 76);
    let v = (v & !(0x3_u128 << 62)) | (0x2_u128 << 62);
    format_uuid(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_seq_encodes_the_step() {
        assert_eq!(&checkpoint_id(-1)[19..23], "bfff");
        assert_eq!(&checkpoint_id(0)[19..23], "8000");
        assert_eq!(&checkpoint_id(2)[19..23], "8002");
        assert_eq!(&uuid6(Some(-2))[19..23], "bffe");
        assert_eq!(&checkpoint_id(0)[14..15], "6");
    }

    proptest::proptest! {
        #[test]
        fn format_uuid_groups_the_hex_digits(value in proptest::arbitrary::any::<u128>()) {
            let hex = format!("{value:032x}");
            let expected = format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            );
            proptest::prop_assert_eq!(format_uuid(value), expected);
        }
    }

    #[test]
    fn format_uuid_edges() {
        assert_eq!(format_uuid(0), "00000000-0000-0000-0000-000000000000");
        assert_eq!(
            format_uuid(u128::MAX),
            "ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
        assert_eq!(
            format_uuid(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            "01234567-89ab-cdef-0011-223344556677"
        );
    }

    #[test]
    fn iso_format_matches_python() {
        assert_eq!(iso_from_unix_micros(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            iso_from_unix_micros(1_795_860_420_334_735),
            "2026-11-28T10:07:00.334735+00:00"
        );
        assert_eq!(
            iso_from_unix_micros(951_782_400_000_001),
            "2000-02-29T00:00:00.000001+00:00"
        );
    }
}
