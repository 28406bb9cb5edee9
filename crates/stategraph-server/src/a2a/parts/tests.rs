use super::*;

fn obj(v: Json) -> Object {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn roles_follow_type_or_role_and_refuse_disagreement() {
    assert_eq!(role_of(&obj(json!({"type": "human"}))), Some(Role::User));
    assert_eq!(
        role_of(&obj(json!({"type": "AIMessageChunk"}))),
        Some(Role::Agent)
    );
    assert_eq!(
        role_of(&obj(json!({"role": "assistant"}))),
        Some(Role::Agent)
    );
    assert_eq!(role_of(&obj(json!({"type": "tool"}))), None);
    assert_eq!(role_of(&obj(json!({"type": "ai", "role": "user"}))), None);
    assert_eq!(
        role_of(&obj(json!({"type": "chat", "role": "user"}))),
        Some(Role::User)
    );
}

#[test]
fn the_answer_is_the_last_agent_message_of_the_turn() {
    let result = json!({"messages": [
        {"type": "human", "content": "hi"},
        {"type": "ai", "content": "first"},
        {"type": "human", "content": "again"},
        {"type": "ai", "content": [{"type": "text", "text": "sec"}, "ond"]},
        {"type": "ai", "content": ""},
    ]});
    assert_eq!(answer(&result, None).unwrap(), vec![text_part("second")]);
    let only_human = json!({"messages": [{"type": "human", "content": "hi"}]});
    assert_eq!(answer(&only_human, None).unwrap(), vec![text_part("")]);
    let no_messages = json!({"x": 1});
    assert_eq!(
        answer(&no_messages, None).unwrap(),
        vec![text_part(r#"{"x":1}"#)]
    );
}

#[test]
fn media_blocks_become_file_parts_and_bad_ones_are_named() {
    let parts = content_parts(&json!([
            "look: ",
            {"type": "image", "base64": "aGk", "mime_type": "image/png", "extras": {"filename": "a.png"}},
            {"type": "file", "url": "https://example.com/x.pdf"},
        ]))
        .unwrap();
    assert_eq!(parts[0], text_part("look: "));
    assert_eq!(
        parts[1],
        json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "image/png", "name": "a.png"}})
    );
    assert_eq!(parts[2]["file"]["uri"], "https://example.com/x.pdf");
    let e = content_parts(&json!([{"type": "image", "base64": "!!"}])).unwrap_err();
    assert!(e.contains("valid base64"), "{e}");
}

#[test]
fn parts_become_input() {
    let stamp = obj(json!({"task_start_id": "s1"}));
    let input = input_of(
        &[json!({"text": "hi"}), json!({"data": {"k": 1}})],
        Role::User,
        "m1",
        &stamp,
    )
    .unwrap();
    assert_eq!(
        Json::Object(input),
        json!({
            "messages": [{"role": "human", "content": "hi", "id": "m1",
                          "additional_kwargs": {"a2a": {"task_start_id": "s1"}}}],
            "k": 1,
        })
    );
    let with_file = input_of(
        &[
            json!({"text": "see"}),
            json!({"raw": "aGk=", "mediaType": "image/png"}),
        ],
        Role::User,
        "m2",
        &Object::new(),
    )
    .unwrap();
    assert_eq!(
        with_file["messages"][0]["content"],
        json!([{"type": "text", "text": "see"},
                   {"type": "image", "base64": "aGk=", "mime_type": "image/png"}])
    );
    let both = input_of(
        &[json!({"text": "a", "data": {}})],
        Role::User,
        "m",
        &Object::new(),
    );
    assert!(both.unwrap_err().contains("exactly one"));
    let none = input_of(&[json!({"data": {}})], Role::User, "m", &Object::new());
    assert!(none.unwrap_err().contains("at least one"));
    let not_object = input_of(&[json!({"data": [1]})], Role::User, "m", &Object::new());
    assert!(not_object.unwrap_err().contains("JSON object"));
}

#[test]
fn history_follows_task_stamps() {
    let messages = vec![
        json!({"type": "human", "content": "a", "id": "h1",
                   "additional_kwargs": {"a2a": {"task_start_id": "s1"}}}),
        json!({"type": "ai", "content": "A", "id": "a1"}),
        json!({"type": "system", "content": "rules"}),
        json!({"type": "human", "content": "b", "id": "h2",
                   "additional_kwargs": {"a2a": {"task_start_id": "s2"}}}),
        json!({"type": "tool", "content": "42", "tool_call_id": "c1", "name": "calc"}),
        json!({"type": "ai", "content": "B", "id": "a2"}),
    ];
    let ids = HashMap::from([
        ("s1".to_owned(), "t1".to_owned()),
        ("s2".to_owned(), "t2".to_owned()),
    ]);
    let all = HistoryOptions {
        length: None,
        scope: Scope::Context,
    };
    let h = history(&messages, "t2", "c", all, Some(&ids)).unwrap();
    let tasks: Vec<&str> = h.iter().map(|m| m["taskId"].as_str().unwrap()).collect();
    assert_eq!(tasks, ["t1", "t1", "t2", "t2", "t2"]);
    assert_eq!(
        h[3]["parts"][0]["data"]["tool_results"][0]["toolCallId"],
        "c1"
    );
    let own = HistoryOptions {
        length: Some(2),
        scope: Scope::Task,
    };
    let h = history(&messages, "t1", "c", own, Some(&ids)).unwrap();
    let ids: Vec<&str> = h.iter().map(|m| m["messageId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["h1", "a1"]);
}
