//! A remote run's streamed events as the engine's [`StreamEvent`]s, to pass on to a local
//! run's stream.

use serde_json::Value as Json;
use stategraph_checkpoint::{Map, Value};
use stategraph_graph::{
    DynState, Interrupt, MessageEvent, StreamEvent, StreamMode, UpdatesEvent, Values, ValuesEvent,
};
use stategraph_messages::Message;

use crate::types::StreamPart;

/// The modes passed on.
pub(crate) const FORWARDED: [StreamMode; 4] = [
    StreamMode::Values,
    StreamMode::Updates,
    StreamMode::Custom,
    StreamMode::Messages,
];

/// `part` as an engine event, if its mode is one of `modes` and it reads as one.
pub(crate) fn event(part: &StreamPart, modes: &[StreamMode]) -> Option<StreamEvent<DynState>> {
    let mode = match part.mode() {
        "messages" | "messages-tuple" => StreamMode::Messages,
        other => StreamMode::from_name(other)?,
    };
    if !modes.contains(&mode) {
        return None;
    }
    match mode {
        StreamMode::Values => {
            let mut values = values(&part.data)?;
            let interrupts = values
                .remove("__interrupt__")
                .map(|v| interrupts(&v))
                .unwrap_or_default();
            Some(StreamEvent::Values(ValuesEvent::new(values, interrupts)))
        }
        StreamMode::Updates => {
            let object = part.data.as_object()?;
            let cached = object
                .get("__metadata__")
                .and_then(|m| m.get("cached"))
                .and_then(Json::as_bool)
                .unwrap_or(false);
            let (node, update) = object.iter().find(|(k, _)| k.as_str() != "__metadata__")?;
            Some(StreamEvent::Updates(if node == "__interrupt__" {
                UpdatesEvent::Interrupt(interrupts(&Value::from(update.clone())))
            } else {
                UpdatesEvent::Node {
                    node: node.clone(),
                    update: values(update),
                    cached,
                }
            }))
        }
        StreamMode::Custom => Some(StreamEvent::Custom(Value::from(part.data.clone()))),
        StreamMode::Messages => {
            let pair = part.data.as_array()?;
            let message = Message::from_value(&Value::from(pair.first()?.clone())).ok()?;
            let metadata = match pair.get(1).map(|m| Value::from(m.clone())) {
                Some(Value::Map(m)) => m,
                _ => Map::new(),
            };
            Some(StreamEvent::Messages(MessageEvent { message, metadata }))
        }
        _ => None,
    }
}

/// A JSON object as state values.
fn values(json: &Json) -> Option<Values> {
    Some(
        json.as_object()?
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect(),
    )
}

/// A list of `{value, id}` as interrupts.
fn interrupts(list: &Value) -> Vec<Interrupt> {
    list.as_list()
        .unwrap_or_default()
        .iter()
        .filter_map(|i| {
            let m = i.as_map()?;
            Some(Interrupt {
                value: m.get("value").cloned().unwrap_or(Value::Null),
                id: m
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
        })
        .collect()
}
