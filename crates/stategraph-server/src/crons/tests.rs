use super::*;

fn at(s: &str) -> DateTime<Utc> {
    parse_time("t", s).unwrap()
}

#[test]
fn schedules_read_as_croniter_reads_them() {
    let every_5 = Schedule::parse("*/5 * * * *", None).unwrap();
    assert_eq!(
        every_5.next_after(at("2026-01-01T10:03:30+00:00")),
        Some(at("2026-01-01T10:05:00+00:00"))
    );
    // Six fields: the last is the second.
    let at_15s = Schedule::parse("* * * * * 15", None).unwrap();
    assert_eq!(
        at_15s.next_after(at("2026-01-01T10:03:30+00:00")),
        Some(at("2026-01-01T10:04:15+00:00"))
    );
    let every_second = Schedule::parse("* * * * * *", None).unwrap();
    assert_eq!(
        every_second.next_after(at("2026-01-01T10:03:30.5+00:00")),
        Some(at("2026-01-01T10:03:31+00:00"))
    );
    let daily = Schedule::parse("@daily", None).unwrap();
    assert_eq!(
        daily.next_after(at("2026-01-01T10:03:30+00:00")),
        Some(at("2026-01-02T00:00:00+00:00"))
    );
    let weekdays = Schedule::parse("0 9 * * MON-FRI", None).unwrap();
    // 2026-01-03 is a Saturday.
    assert_eq!(
        weekdays.next_after(at("2026-01-03T10:00:00+00:00")),
        Some(at("2026-01-05T09:00:00+00:00"))
    );
}

#[test]
fn schedules_follow_their_time_zone_across_daylight_saving() {
    let nine = Schedule::parse("0 9 * * *", Some("America/New_York")).unwrap();
    // EST (UTC-5) in winter, EDT (UTC-4) after 2026-03-08.
    assert_eq!(
        nine.next_after(at("2026-03-07T15:00:00+00:00")),
        Some(at("2026-03-08T13:00:00+00:00"))
    );
    assert_eq!(
        nine.next_after(at("2026-01-10T00:00:00+00:00")),
        Some(at("2026-01-10T14:00:00+00:00"))
    );
}

#[test]
fn bad_schedules_and_zones_are_422_naming_them() {
    for bad in ["", "* * *", "61 * * * *", "* * * * * * * *", "nonsense"] {
        let e = Schedule::parse(bad, None).unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.detail.contains("Invalid cron schedule"),
            "{bad}: {}",
            e.detail
        );
    }
    let e = Schedule::parse("* * * * *", Some("Mars/Olympus")).unwrap_err();
    assert!(
        e.detail.contains("Invalid timezone: 'Mars/Olympus'"),
        "{}",
        e.detail
    );
}

#[test]
fn a_cron_is_due_once_enabled_unended_and_reached() {
    let schedule = Schedule::parse("* * * * *", None).unwrap();
    let mut cron = CronRecord::new(
        NewCron {
            assistant_id: "a".into(),
            thread_id: None,
            schedule: "* * * * *".into(),
            timezone: None,
            end_time: None,
            enabled: true,
            on_run_completed: None,
            metadata: Object::new(),
            payload: Object::new(),
        },
        &schedule,
    );
    assert_eq!(cron.on_run_completed, Some(OnRunCompleted::Delete));
    assert_eq!(
        cron.payload["config"]["configurable"]["cron_id"],
        Json::String(cron.cron_id.clone())
    );
    let next = at(cron.next_run_date.as_deref().unwrap());
    assert_eq!(cron.due(next - chrono::Duration::seconds(1)).unwrap(), None);
    assert_eq!(cron.due(next).unwrap(), Some(next));
    cron.end_time = Some(iso(next - chrono::Duration::seconds(1)));
    assert_eq!(cron.due(next).unwrap(), None);
    cron.end_time = None;
    cron.enabled = false;
    assert_eq!(cron.due(next).unwrap(), None);
}
