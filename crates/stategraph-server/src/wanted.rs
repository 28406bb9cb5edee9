//! What a run streams: the engine's events its caller asked for (its `stream_mode`),
//! rendered as LangGraph's server renders them.

use serde_json::Value as Json_;
use stategraph_graph::StreamMode;

use crate::events::{EVENTS, Events};
use crate::records::RunRecord;

/// The events a run's caller asked for, rendered as the reference renders them.
pub(crate) struct Wanted {
    modes: Vec<&'static str>,
    messages: Option<crate::messages::Rendering>,
    accumulated: crate::messages::Accumulator,
    /// Whether `events` was asked for.
    events_wanted: bool,
    /// The `events` rendering, once the run has started.
    events: Option<Events>,
}

impl Wanted {
    pub(crate) fn new(modes: &[StreamMode], names: &[String]) -> Self {
        Self {
            modes: modes.iter().map(|m| m.as_str()).collect(),
            messages: crate::messages::Rendering::of(names),
            accumulated: crate::messages::Accumulator::default(),
            events_wanted: names.iter().any(|n| n == EVENTS),
            events: None,
        }
    }

    /// The events to publish when the run `run` (its record) starts: the graph's
    /// `on_chain_start` if `events` was asked for.
    pub(crate) fn begin(&mut self, run: &RunRecord) -> Vec<(String, Json_)> {
        if !self.events_wanted {
            return Vec::new();
        }
        let (events, start) = Events::start(run);
        self.events = Some(events);
        vec![(EVENTS.to_owned(), start)]
    }

    /// The events to publish when the run ended without error, with its last `values`.
    pub(crate) fn end(&self, values: &Json_) -> Vec<(String, Json_)> {
        self.events
            .as_ref()
            .map(|e| (EVENTS.to_owned(), e.end(values)))
            .into_iter()
            .collect()
    }

    /// The events to publish for one engine event: none if its mode was not asked for;
    /// `messages` events as `messages-tuple` or `messages` asked; `events` from the root
    /// graph's `debug` events.
    pub(crate) fn render(&mut self, name: String, data: Json_) -> Vec<(String, Json_)> {
        let mut out = Vec::new();
        if name == "debug"
            && let Some(events) = &mut self.events
        {
            out.extend(
                events
                    .debug(&data)
                    .into_iter()
                    .map(|e| (EVENTS.to_owned(), e)),
            );
        }
        let base = name.split('|').next().unwrap_or_default();
        if !self.modes.contains(&base) {
            return out;
        }
        match (base, self.messages) {
            ("messages", Some(crate::messages::Rendering::Accumulated)) => {
                out.extend(self.accumulated.events(&data));
            }
            _ => out.push((name, data)),
        }
        out
    }
}

/// The modes the engine streams for a run that asked for `modes` (named `names`): those,
/// `values` (the run's outcome is its last values) and, for `events`, `debug`.
pub(crate) fn engine_modes(modes: &[StreamMode], names: &[String]) -> Vec<StreamMode> {
    let mut engine = modes.to_vec();
    if !engine.contains(&StreamMode::Values) {
        engine.push(StreamMode::Values);
    }
    if names.iter().any(|n| n == EVENTS) && !engine.contains(&StreamMode::Debug) {
        engine.push(StreamMode::Debug);
    }
    engine
}
