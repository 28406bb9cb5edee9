use super::*;

#[test]
fn added_messages_start_after_the_input_checkpoints() {
    let m = |id: &str| json!({"id": id});
    assert_eq!(added_from(&[m("a")], &[m("a"), m("b")]), Some(1));
    // The run rewrote an earlier message: the last one it kept is the boundary.
    assert_eq!(
        added_from(&[m("a"), m("b")], &[m("a"), m("x"), m("b"), m("c")]),
        Some(3)
    );
    assert_eq!(added_from(&[json!({"content": "no id"})], &[m("a")]), None);
}

#[test]
fn history_lengths_are_bounded() {
    assert_eq!(history_length(None).unwrap(), None);
    assert_eq!(history_length(Some(&json!(3))).unwrap(), Some(3));
    let e = history_length(Some(&json!(11))).unwrap_err();
    assert_eq!(e.message, "historyLength cannot exceed 10");
    assert!(history_length(Some(&json!(-1))).is_err());
    assert!(history_length(Some(&json!("2"))).is_err());
}

#[test]
fn times_are_read_as_iso_8601() {
    let t = |s| parse_time(s).map(|t| t.timestamp());
    assert_eq!(t("2026-11-27T00:00:00Z"), Some(1_795_737_600));
    assert_eq!(t("2026-11-27T00:00:00.5+00:00"), Some(1_795_737_600));
    assert_eq!(t("2026-11-27T00:00:00"), Some(1_795_737_600));
    assert_eq!(t("2026-11-27"), Some(1_795_737_600));
    assert_eq!(t("yesterday"), None);
}
