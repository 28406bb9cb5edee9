//! [`Overwrite`]: a write that replaces a reducer channel's value instead of going through
//! its reducer (LangGraph's `langgraph.types.Overwrite`).

use stategraph_checkpoint::{Ext, ExtCode, Map, Value};

/// The channel tag LangGraph gives an overwrite (`Overwrite.type`, and the key of its dict
/// form).
const TAG: &str = "__overwrite__";

/// A value written to a channel with a reducer *as it is*, bypassing the reducer: the
/// channel holds exactly this value after the step (LangGraph's `Overwrite`). At most one
/// overwrite per channel and step: a second fails the step with
/// [`GraphError::InvalidUpdate`](crate::GraphError::InvalidUpdate). Writes of the same step
/// before it are replaced by it; writes after it are dropped, as LangGraph does.
///
/// It is stored as Python stores `langgraph.types.Overwrite`, so either side reads the
/// other's pending writes; the dict forms LangGraph also recognises
/// (`{"__overwrite__": value}`, `{"type": "__overwrite__", "value": value}`, what a JSON
/// client sends) are overwrites too.
///
/// ```
/// # async fn demo() -> Result<(), stategraph_graph::GraphError> {
/// use stategraph_checkpoint::{Map, value};
/// use stategraph_graph::{DynState, Overwrite, Reducer, RunConfig, START, Schema, StateGraph};
/// let mut g = StateGraph::<DynState>::with_schema(Schema::new().reducer("log", Reducer::append()));
/// g.add_node("reset", |_s, _c| async {
///     Ok(Map::from_iter([("log", Overwrite::new(value!(["fresh"])).to_value())]))
/// });
/// g.add_edge(START, "reset");
/// let out = g.compile()?
///     .invoke_values(Map::from_iter([("log", value!(["old"]))]), RunConfig::default())
///     .await?;
/// assert_eq!(out["log"], value!(["fresh"]));
/// # Ok(()) }
/// # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Overwrite {
    /// The value the channel takes.
    pub value: Value,
}

impl Overwrite {
    /// An overwrite with `value`.
    pub fn new(value: impl Into<Value>) -> Self {
        Self {
            value: value.into(),
        }
    }

    /// The stored form: `langgraph.types.Overwrite` (ext 2, `{value, type}`).
    pub fn to_value(&self) -> Value {
        let mut data = Map::new();
        data.insert("value", self.value.clone());
        data.insert("type", TAG);
        Value::Ext(Ext::python(
            ExtCode::ConstructorKwArgs,
            "langgraph.types",
            "Overwrite",
            Value::Map(data),
        ))
    }

    /// The value `v` overwrites with, if `v` is an overwrite in any of its forms. Called on
    /// every write to a reducer channel: other values are told apart without copying them
    /// or decoding a stored object past its class name.
    pub fn of(v: &Value) -> Option<Value> {
        match v {
            Value::Ext(e) if e.py_class() == Some("Overwrite") => {
                let object = e.py_object().ok().flatten()?;
                if object.module != "langgraph.types" {
                    return None;
                }
                object.data.as_map().and_then(Self::of_map)
            }
            Value::Map(m) => Self::of_map(m),
            _ => None,
        }
    }

    /// The value a map form overwrites with: `{"__overwrite__": v}` or
    /// `{"type": "__overwrite__", "value": v}` (also the object's own fields).
    fn of_map(m: &Map) -> Option<Value> {
        if m.len() == 1
            && let Some(inner) = m.get(TAG)
        {
            return Some(inner.clone());
        }
        if m.get("type").and_then(Value::as_str) == Some(TAG) {
            return m.get("value").cloned();
        }
        None
    }
}

impl From<Overwrite> for Value {
    fn from(o: Overwrite) -> Self {
        o.to_value()
    }
}
