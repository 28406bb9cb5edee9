//! What a run streams: the engine's events its caller asked for (its `stream_mode`),
//! rendered as LangGraph's server renders them.

use serde_json::Value as Json_;
use stategraph_graph::StreamMode;

/// The events a run's caller asked for, rendered as the reference renders them.
pub(crate) struct Wanted {
    modes: Vec<&'static str>,
    messages: Option<crate::messages::Rendering>,
    accumulated: crate::messages::Accumulator,
}

impl Wanted {
    pub(crate) fn new(modes: &[StreamMode], names: &[String]) -> Self {
        Self {
            modes: modes.iter().map(|m| m.as_str()).collect(),
            messages: crate::messages::Rendering::of(names),
            accumulated: crate::messages::Accumulator::default(),
        }
    }

    /// The events to publish for one engine event: none if its mode was not asked for;
    /// `messages` events as `messages-tuple` or `messages` asked.
    pub(crate) fn render(&mut self, name: String, data: Json_) -> Vec<(String, Json_)> {
        let mut out = Vec::new();
        let base = name.split('|').next().unwrap_or_default();
        if !self.modes.contains(&base) {
            return out;
        }
        match (base, self.messages) {
            ("messages", Some(crate::messages::Rendering::Accumulated)) => {
                out.extend(self.accumulated.events(&data));
            }
            // The graph's own chunks are the other modes' business: the reference sends
            // none of them as `events`.
            ("events", _)
                if data.get("event").and_then(Json_::as_str) == Some("on_chain_stream")
                    && data
                        .get("parent_ids")
                        .and_then(Json_::as_array)
                        .is_some_and(Vec::is_empty) => {}
            _ => out.push((name, data)),
        }
        out
    }
}

/// The modes the engine streams for a run that asked for `modes`: those, and `values`
/// (the run's outcome is its last values).
pub(crate) fn engine_modes(modes: &[StreamMode]) -> Vec<StreamMode> {
    let mut engine = modes.to_vec();
    if !engine.contains(&StreamMode::Values) {
        engine.push(StreamMode::Values);
    }
    engine
}
