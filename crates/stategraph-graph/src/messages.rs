//! LangGraph's `add_messages` reducer on stored message values.
//!
//! Messages are maps (`{"type": "human", "content": …, "id": …}`) or LangChain message objects
//! (ext values, as Python stores them). The merge is by id: an incoming message whose id is
//! already present replaces it in place, a `RemoveMessage` removes it (the id
//! `__remove_all__` clears everything before it), anything else is appended. Messages without
//! an id get a fresh uuid4, as in LangGraph.

use stategraph_checkpoint::{Ext, ExtCode, Value, uuid4};

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

/// `add_messages(left, right)`. Each message's id is read once (from the stored bytes, for
/// LangChain message objects).
pub(crate) fn add_messages(left: Value, right: Value) -> Result<Value, String> {
    let mut right: Vec<(Value, String)> = as_list(right).into_iter().map(with_ensured_id).collect();
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
    let left = as_list(left);
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
        assert_eq!(
            out,
            value!([{"type": "human", "content": "hi", "id": "1"}, {"type": "ai", "content": "hello", "id": "2"}, {"type": "human", "content": "new", "id": "3"}])
        );
        let out = add_messages(out, value!([{"type": "remove", "id": "1"}])).unwrap();
        assert_eq!(out.as_list().unwrap().len(), 2);
        assert!(add_messages(out.clone(), value!({"type": "remove", "id": "nope"})).is_err());
        let cleared = add_messages(out, value!([{"type": "remove", "id": "__remove_all__"}, {"type": "human", "content": "x", "id": "9"}])).unwrap();
        assert_eq!(
            cleared,
            value!([{"type": "human", "content": "x", "id": "9"}])
        );
    }

    #[test]
    fn missing_ids_are_assigned() {
        let out = add_messages(value!([]), value!({"type": "human", "content": "hi"})).unwrap();
        let id = message_id(&out.as_list().unwrap()[0]).unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
    }
}
