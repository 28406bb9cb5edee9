use super::*;

#[test]
fn task_id_matches_langgraph() {
    // Verified with Python LangGraph.
    let id = task_id(
        "1f1e65c8-9911-650d-8001-38d122a7c1d3",
        &["node_b", "2", "node_b", PULL, "branch:to:node_b"],
    );
    assert_eq!(id, "49072b71-e9e1-2ed4-3868-9a6b0b5622de");
}

#[test]
fn checkpoint_ids_hash_as_their_hex_bytes_or_else_their_text() {
    let mut out = vec![7];
    assert!(super::push_hex("0a-0B", &mut out));
    assert_eq!(out, [7, 0x0a, 0x0b]);
    for foreign in ["abc", "xyz", "0a-0g"] {
        let mut out = vec![7];
        assert!(!super::push_hex(foreign, &mut out), "{foreign}");
        assert_eq!(out, [7], "{foreign}");
    }
    // A UUID's text decodes as its digits without the dashes do.
    let uuid = "1f1e65c8-9911-650D-8001-38d122a7c1d3";
    let (mut fast, mut general) = (vec![7], vec![7]);
    assert!(super::push_hex(uuid, &mut fast));
    assert!(super::push_hex(&uuid.replace('-', ""), &mut general));
    assert_eq!(fast, general);
    assert_eq!(fast.len(), 17);
    for bad in [
        "1f1e65c8-9911-650d-8001-38d122a7c1dg",
        "1f1e65c8-9911-650d-8001+38d122a7c1d3",
    ] {
        let mut out = vec![7];
        assert!(!super::push_hex(bad, &mut out), "{bad}");
        assert_eq!(out, [7], "{bad}");
    }
    // A foreign id's text is hashed as it is.
    assert_eq!(
        task_id("xyz", &["a"]),
        format_uuid(xxhash_rust::xxh3::xxh3_128(b"xyza"))
    );
}

#[test]
fn push_task_id_matches_langgraph() {
    // From the fixture written by Python: Send to `worker`, packet 0, checkpoint step 0.
    let id = task_id(
        "1f1e66f1-c5c8-6784-8000-44fdec84abc5",
        &["worker", "1", "worker", PUSH, "0"],
    );
    assert_eq!(id, "bee19556-3da7-f9ee-cb65-c62735e38e7c");
}

#[test]
fn decimals_are_spelled_as_to_string_does() {
    for n in [0, 7, -1, 10, 99, -100, 12345, i64::MAX, i64::MIN] {
        let mut out = b"x".to_vec();
        super::push_decimal(n, &mut out);
        assert_eq!(out, format!("x{n}").into_bytes(), "{n}");
    }
}

#[test]
fn task_paths() {
    assert_eq!(
        task_path_str(&[PULL.to_owned(), "node_a".to_owned()]),
        "~__pregel_pull, node_a"
    );
}
