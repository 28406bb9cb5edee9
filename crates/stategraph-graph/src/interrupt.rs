//! Dynamic interrupts: a node asks a human, the run stops, a later run resumes with the answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stategraph_checkpoint::{Ext, ExtCode, Map, Value, channels};

/// An interrupt raised by a node: the value shown to the human, and its id (LangGraph's, so
/// clients can resume it by id).
#[derive(Clone, Debug, PartialEq)]
pub struct Interrupt {
    /// What the node asked.
    pub value: Value,
    /// xxh3-128 of the task's namespace (plus `|n` for the n-th answered interrupt).
    pub id: String,
}

impl Interrupt {
    /// The stored form: `langgraph.types.Interrupt` (ext 2, `{value, id, response_schema}`).
    pub fn to_value(&self) -> Value {
        let mut data = Map::new();
        data.insert("value", self.value.clone());
        data.insert("id", self.id.as_str());
        data.insert("response_schema", Value::Null);
        Value::Ext(Ext::python(
            ExtCode::ConstructorKwArgs,
            "langgraph.types",
            "Interrupt",
            Value::Map(data),
        ))
    }

    /// Reads a stored interrupt (the ext form, or a `{value, id}` map).
    pub fn from_value(v: &Value) -> Option<Self> {
        let data = match v {
            Value::Ext(e) => e.py_object().ok().flatten()?.data,
            other => other.clone(),
        };
        let m = data.as_map()?;
        Some(Self {
            value: m.get("value").cloned().unwrap_or_default(),
            id: m
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// All interrupts in a stored `__interrupt__` write (a list, or a single one).
    pub(crate) fn all_from(v: &Value) -> Vec<Self> {
        match v {
            Value::List(l) => l.iter().filter_map(Self::from_value).collect(),
            other => Self::from_value(other).into_iter().collect(),
        }
    }

    /// `{"value": …, "id": …}`, as LangGraph's snapshots and streams show it (the value as
    /// [`value_json`](crate::stream::value_json) renders state values).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"value": crate::stream::value_json(&self.value), "id": self.id})
    }

    /// The interrupt with all the fields of LangGraph's `Interrupt` object —
    /// `{"value", "id", "response_schema"}` (never set here: `null`) — as Python's
    /// `asdict(interrupt)` and LangGraph's server render it (a `tasks` stream's results, a
    /// run's output).
    pub fn to_object_json(&self) -> serde_json::Value {
        serde_json::json!({
            "value": crate::stream::value_json(&self.value),
            "id": self.id,
            "response_schema": null,
        })
    }
}

/// LangGraph's interrupt id: xxh3-128 hex of the task namespace, with `|n` appended once the
/// task already has `n` answers.
pub(crate) fn interrupt_id(task_ns: &str, answered: usize) -> String {
    let key = if answered == 0 {
        task_ns.to_owned()
    } else {
        format!("{task_ns}|{answered}")
    };
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
}

/// How a run answers pending interrupts (LangGraph's `Command(resume=…)`).
#[derive(Clone, Debug, PartialEq)]
pub enum Resume {
    /// One answer, for the single pending interrupt.
    Value(Value),
    /// Answers by interrupt id, for several pending interrupts.
    ById(BTreeMap<String, Value>),
}

/// The answers a step's tasks can draw from.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResumeSource {
    /// The answer written without a task (`NULL_TASK_ID`), taken by the first interrupt that
    /// asks; shared by a step's tasks and the subgraphs they run.
    pub(crate) null: Arc<Mutex<Option<Value>>>,
    /// Answers by interrupt id.
    pub(crate) by_id: Option<Arc<BTreeMap<String, Value>>>,
}

/// A task's interrupt bookkeeping (LangGraph's scratchpad).
#[derive(Debug)]
pub(crate) struct Scratchpad {
    /// The task's namespace (`node:task_id`), from which interrupt ids derive.
    pub(crate) ns: String,
    /// Answers this task already has, in order.
    pub(crate) resume: Vec<Value>,
    /// Interrupts asked so far in this execution.
    pub(crate) counter: usize,
    /// Tasks called so far in this execution (a call's id derives from its position).
    pub(crate) calls: usize,
    /// Where answers not yet consumed come from.
    pub(crate) source: ResumeSource,
    /// `__resume__` writes made while running.
    pub(crate) writes: Vec<(String, Value)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Scratchpad {
    /// A new try of the task: it asks its interrupts and makes its calls from the first
    /// again (answers already given stay).
    pub(crate) fn restart(&mut self) {
        self.counter = 0;
        self.calls = 0;
        self.writes.clear();
    }

    /// LangGraph's `interrupt()`: the answer for this interrupt if there is one, else the
    /// interrupt to raise.
    pub(crate) fn interrupt(pad: &Mutex<Scratchpad>, value: Value) -> Result<Value, Interrupt> {
        Self::interrupt_as(pad, value, None)
    }

    /// [`interrupt`](Self::interrupt), the interrupt carrying `id` if given (one raised
    /// elsewhere, e.g. by a remote graph): a resume map answers it by that id.
    pub(crate) fn interrupt_as(
        pad: &Mutex<Scratchpad>,
        value: Value,
        id: Option<String>,
    ) -> Result<Value, Interrupt> {
        let mut sp = lock(pad);
        let idx = sp.counter;
        sp.counter += 1;
        if let Some(id) = &id
            && sp.resume.len() <= idx
            && let Some(v) = sp.source.by_id.as_ref().and_then(|m| m.get(id)).cloned()
        {
            sp.resume.push(v);
        }
        // The answers up to this interrupt's, which is their last.
        if let Some(answered) = sp.resume.get(..=idx).map(<[Value]>::to_vec)
            && let Some(v) = answered.last().cloned()
        {
            sp.writes
                .push((channels::RESUME.to_owned(), Value::from(answered)));
            return Ok(v);
        }
        let null = lock(&sp.source.null).take();
        if let Some(v) = null {
            sp.resume.push(v.clone());
            let answered = Value::from(sp.resume.clone());
            sp.writes.push((channels::RESUME.to_owned(), answered));
            return Ok(v);
        }
        Err(Interrupt {
            value,
            id: id.unwrap_or_else(|| interrupt_id(&sp.ns, sp.resume.len())),
        })
    }
}

/// An `Interrupt` in a typed state or value is stored as Python stores
/// `langgraph.types.Interrupt`.
impl stategraph_value::py::PyType for Interrupt {
    fn to_py(&self) -> Result<Value, stategraph_checkpoint::SerdeError> {
        Ok(self.to_value())
    }

    fn from_py(value: &Value) -> Result<Self, stategraph_checkpoint::SerdeError> {
        stategraph_value::py::object_data(
            value,
            ExtCode::ConstructorKwArgs,
            &[("langgraph.types", "Interrupt")],
        )?;
        Self::from_value(value).ok_or_else(|| stategraph_checkpoint::SerdeError::Shape {
            path: String::new(),
            message: format!("an Interrupt needs a value and an id: {value}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_id_matches_langgraph() {
        // From the fixture written by Python: task `ask` of thread `hitl`.
        assert_eq!(
            interrupt_id("ask:a5a665f3-2b4e-2aea-5b16-c62d8a079579", 0),
            "e61ec96bf4872f00e37cec98fd0b2a7f"
        );
    }
}
