//! LangGraph's `add_messages` reducer on stored message values.
//!
//! Messages are maps (`{"type": "human", "content": …, "id": …}`) or LangChain message objects
//! (ext values, as Python stores them). The merge is by id: an incoming message whose id is
//! already present replaces it in place, a `RemoveMessage` removes it (the id
//! `__remove_all__` clears everything before it), anything else is appended. Messages without
//! an id get a fresh uuid4, as in LangGraph.
//!
//! As LangGraph's reducer does, it first turns message-like values into LangChain messages:
//! a string is a human message, a `[role, content]` pair or a map with `role` (or `type`) and
//! `content` a message of that role (`user`/`human`, `assistant`/`ai`, `system`/`developer`,
//! `tool`), its other keys becoming the message's fields — so a client's
//! `{"role": "user", "content": "hi"}` is stored as Python stores a `HumanMessage`.

use stategraph_checkpoint::{Ext, ExtCode, Map, Value, uuid4};
use stategraph_messages::Message;

/// The id that makes a `RemoveMessage` clear the whole history.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// The id of a message value, if it has one.
pub(crate) fn message_id(m: &Value) -> Option<String> {
    match m {
        Value::Map(map) => map.get("id").and_then(Value::as_str).map(str::to_owned),
        Value::Ext(e) => e.py_data_str("id").map(str::to_owned),
        _ => None,
    }
}

fn is_remove(m: &Value) -> bool {
    match m {
        Value::Map(map) => map.get("type").and_then(Value::as_str) == Some("remove"),
        Value::Ext(e) => e.py_class() == Some("RemoveMessage"),
        _ => false,
    }
}

fn with_id(m: Value, id: String) -> Value {
    match m {
        Value::Map(mut map) => {
            map.insert("id", id);
            Value::Map(map)
        }
        Value::Ext(e) => match e.py_object() {
            Ok(Some(mut obj)) => {
                if let Value::Map(data) = &mut obj.data {
                    data.insert("id", id);
                }
                let code = e.ext_code().unwrap_or(ExtCode::PydanticV2);
                Value::Ext(Ext::from_py_object(code, &obj))
            }
            _ => Value::Ext(e),
        },
        other => other,
    }
}

fn as_list(v: Value) -> Vec<Value> {
    match v {
        Value::List(l) => l.into_vec(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// The message with its id, giving it a fresh uuid4 if it has none.
fn with_ensured_id(m: Value) -> (Value, String) {
    match message_id(&m) {
        Some(id) => (m, id),
        None => {
            let id = uuid4();
            (with_id(m, id.clone()), id)
        }
    }
}

/// LangChain's `convert_to_messages` for one value (see the module doc).
fn coerce(m: Value) -> Result<Value, String> {
    let from_role = |role: &str, mut fields: Map| -> Result<Value, String> {
        let kind = match role {
            "human" | "user" => "human",
            "ai" | "assistant" => "ai",
            "system" => "system",
            "developer" => {
                let mut extra = fields
                    .get("additional_kwargs")
                    .and_then(Value::as_map)
                    .cloned()
                    .unwrap_or_default();
                extra.insert("__openai_role__", "developer");
                fields.insert("additional_kwargs", Value::Map(extra));
                "system"
            }
            "tool" => "tool",
            "remove" => return Ok(Value::Map(fields)),
            other => {
                return Err(format!(
                    "unexpected message type: '{other}'; use one of 'human', 'user', 'ai', \
                     'assistant', 'tool', 'system' or 'developer'"
                ));
            }
        };
        if kind == "tool" && fields.get("tool_call_id").and_then(Value::as_str).is_none() {
            return Err("a tool message needs a `tool_call_id`".into());
        }
        if fields.get("content").is_none_or(Value::is_null) {
            fields.insert("content", "");
        }
        fields.insert("type", kind);
        Message::from_value(&Value::Map(fields))
            .map(|m| m.to_value())
            .map_err(|e| e.to_string())
    };
    match m {
        Value::Ext(_) => Ok(m),
        Value::Str(s) => Ok(Message::human(s.to_string()).to_value()),
        Value::List(pair) => match pair.as_slice() {
            [Value::Str(role), content] => {
                let mut fields = Map::new();
                fields.insert("content", content.clone());
                from_role(role, fields)
            }
            _ => Err("a message as a list must be a [role, content] pair".into()),
        },
        Value::Map(map) => {
            let role = map
                .get("role")
                .or_else(|| map.get("type"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let Some(role) = role else {
                return Err("a message map must have `role` (or `type`) and `content` keys".into());
            };
            if role == "remove" {
                return Ok(Value::Map(map));
            }
            if map.get("content").is_none() {
                return Err(format!("the `{role}` message has no `content`"));
            }
            let fields: Map = map
                .into_iter()
                .filter(|(k, _)| k.as_str() != Some("role"))
                .collect();
            from_role(&role, fields)
        }
        other => Err(format!("expected a message, found {}", other.kind())),
    }
}

fn coerce_all(v: Value) -> Result<Vec<Value>, String> {
    as_list(v).into_iter().map(coerce).collect()
}

/// A streamed piece as the whole message (LangChain's `message_chunk_to_message`); other
/// values as they are. Applied to what is merged in only: the merged list never holds pieces.
fn whole(m: Value) -> Result<Value, String> {
    match &m {
        Value::Ext(e) if e.py_class() == Some("AIMessageChunk") => {
            match Message::from_value(&m).map_err(|e| e.to_string())? {
                Message::AiChunk(c) => Ok(c.into_message().to_value()),
                other => Ok(other.to_value()),
            }
        }
        _ => Ok(m),
    }
}

/// `add_messages(left, right)`. Each message's id is read once (from the stored bytes, for
/// LangChain message objects).
pub(crate) fn add_messages(left: Value, right: Value) -> Result<Value, String> {
    let mut right: Vec<(Value, String)> = coerce_all(right)?
        .into_iter()
        .map(|m| whole(m).map(with_ensured_id))
        .collect::<Result<_, _>>()?;
    if let Some(pos) = right
        .iter()
        .rposition(|(m, id)| is_remove(m) && id == REMOVE_ALL_MESSAGES)
    {
        return Ok(Value::List(
            right
                .split_off(pos + 1)
                .into_iter()
                .map(|(m, _)| m)
                .collect(),
        ));
    }
    let left = coerce_all(left)?;
    let mut merged = Vec::with_capacity(left.len() + right.len());
    // Where each id is (the first message with it, as a linear search would find).
    let mut index: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(left.len() + right.len());
    for (m, id) in left.into_iter().map(with_ensured_id) {
        index.entry(id).or_insert(merged.len());
        merged.push(m);
    }
    let mut remove = Vec::new();
    for (m, id) in right {
        match index.get(&id).copied() {
            Some(i) if is_remove(&m) => remove.push(i),
            Some(i) => {
                // `index` holds positions in `merged` only.
                if let Some(slot) = merged.get_mut(i) {
                    *slot = m;
                }
            }
            None if is_remove(&m) => {
                return Err(format!(
                    "attempting to delete a message with an id that doesn't exist ('{id}')"
                ));
            }
            None => {
                index.insert(id, merged.len());
                merged.push(m);
            }
        }
    }
    let out = merged
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !remove.contains(i))
        .map(|(_, m)| m)
        .collect();
    Ok(Value::List(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::value;

    #[test]
    fn merge_replace_remove() {
        let left = value!([{"type": "human", "content": "hi", "id": "1"}, {"type": "ai", "content": "yo", "id": "2"}]);
        let right = value!([{"type": "ai", "content": "hello", "id": "2"}, {"type": "human", "content": "new", "id": "3"}]);
        let out = add_messages(left, right).unwrap();
        let messages = Value::from(
            coerce_all(value!([{"type": "human", "content": "hi", "id": "1"}, {"type": "ai", "content": "hello", "id": "2"}, {"type": "human", "content": "new", "id": "3"}]))
                .unwrap(),
        );
        assert_eq!(out, messages);
        let out = add_messages(out, value!([{"type": "remove", "id": "1"}])).unwrap();
        assert_eq!(out.as_list().unwrap().len(), 2);
        assert!(add_messages(out.clone(), value!({"type": "remove", "id": "nope"})).is_err());
        let cleared = add_messages(out, value!([{"type": "remove", "id": "__remove_all__"}, {"type": "human", "content": "x", "id": "9"}])).unwrap();
        assert_eq!(
            cleared,
            Value::from(vec![Message::human("x").with_id("9").to_value()])
        );
    }

    #[test]
    fn message_likes_become_langchain_messages() {
        let out = add_messages(
            value!([]),
            value!([
                "plain",
                ["assistant", "pair"],
                {"role": "user", "content": "hi", "id": "u1", "name": "ada"},
                {"role": "developer", "content": "rules"},
                {"role": "tool", "content": "42", "tool_call_id": "c1"}
            ]),
        )
        .unwrap();
        let got: Vec<Message> = out
            .as_list()
            .unwrap()
            .iter()
            .map(|m| Message::from_value(m).unwrap())
            .collect();
        assert!(matches!(&got[0], Message::Human(f) if f.content == value!("plain")));
        assert!(matches!(&got[1], Message::Ai { fields, .. } if fields.content == value!("pair")));
        assert!(
            matches!(&got[2], Message::Human(f) if f.id.as_deref() == Some("u1") && f.name.as_deref() == Some("ada"))
        );
        assert!(matches!(&got[3], Message::System(f)
            if f.additional_kwargs.get("__openai_role__") == Some(&value!("developer"))));
        assert!(matches!(&got[4], Message::Tool { tool_call_id, .. } if tool_call_id == "c1"));
        for (bad, says) in [
            (
                value!({"role": "robot", "content": "x"}),
                "unexpected message type: 'robot'",
            ),
            (value!({"role": "user"}), "no `content`"),
            (value!({"content": "x"}), "`role` (or `type`)"),
            (value!({"role": "tool", "content": "x"}), "tool_call_id"),
            (value!([1, 2, 3]), "[role, content]"),
            (value!(7), "expected a message"),
        ] {
            let err = add_messages(value!([]), Value::from(vec![bad])).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn streamed_pieces_are_stored_whole() {
        let piece = stategraph_messages::AiMessageChunk::text_piece("hi").with_id("p1");
        let out = add_messages(value!([]), Value::from(vec![piece.to_value()])).unwrap();
        let m = Message::from_value(&out.as_list().unwrap()[0]).unwrap();
        assert!(matches!(&m, Message::Ai { fields, .. } if fields.id.as_deref() == Some("p1")));
    }

    #[test]
    fn missing_ids_are_assigned() {
        let out = add_messages(value!([]), value!({"type": "human", "content": "hi"})).unwrap();
        let id = message_id(&out.as_list().unwrap()[0]).unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
    }
}
