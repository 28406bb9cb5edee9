//! Graph state: a schema of channels, typed or dynamic.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use stategraph_checkpoint::{List, Map, Value};

use crate::channel::{ChannelSpec, Reducer};
use crate::error::GraphError;

/// The state channels' current values, by key (keys without a value are absent).
pub type Values = BTreeMap<String, Value>;

/// The state schema: one channel per key, in declaration order, and the managed keys the
/// engine computes for each step instead of storing.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    pub(crate) keys: Vec<(String, ChannelSpec)>,
    pub(crate) managed: Vec<(String, Managed)>,
}

/// A state key the engine computes for each step instead of storing (LangGraph's managed
/// values): nodes and conditional edges read it like any key; it is never written, stored,
/// or part of the graph's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Managed {
    /// How many more steps the run may take before it hits its recursion limit, counting the
    /// current one (LangGraph's `RemainingSteps`; an integer).
    RemainingSteps,
    /// Whether the current step is the last the recursion limit allows (LangGraph's
    /// `IsLastStep`; a boolean).
    IsLastStep,
}

impl Managed {
    /// Its value in step `step` of a run that fails past step `stop - 1`.
    pub(crate) fn value(self, step: i64, stop: i64) -> Value {
        match self {
            Managed::RemainingSteps => Value::Int(stop - step),
            Managed::IsLastStep => Value::Bool(step == stop - 1),
        }
    }
}

impl Schema {
    /// An empty schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a last-value key.
    pub fn last_value(self, key: impl Into<String>) -> Self {
        self.key(key, ChannelSpec::LastValue)
    }

    /// Adds a key folded with `reducer`.
    pub fn reducer(self, key: impl Into<String>, reducer: Reducer) -> Self {
        self.key(key, ChannelSpec::Reducer(reducer))
    }

    /// A key folded with `reducer` and stored as deltas, with a full snapshot every
    /// `snapshot_frequency` updates (LangGraph's `DeltaChannel`; see [`ChannelSpec::Delta`]).
    pub fn delta(self, key: impl Into<String>, reducer: Reducer, snapshot_frequency: u32) -> Self {
        self.key(key, ChannelSpec::delta(reducer, snapshot_frequency))
    }

    /// Adds a key with any channel kind.
    pub fn key(mut self, key: impl Into<String>, spec: ChannelSpec) -> Self {
        let key = key.into();
        self.keys.retain(|(k, _)| *k != key);
        self.managed.retain(|(k, _)| *k != key);
        self.keys.push((key, spec));
        self
    }

    /// Adds a managed key (`#[managed(remaining_steps)]` on a derived state's field): the
    /// engine hands nodes and conditional edges its value for the step.
    pub fn managed(mut self, key: impl Into<String>, kind: Managed) -> Self {
        let key = key.into();
        self.keys.retain(|(k, _)| *k != key);
        self.managed.retain(|(k, _)| *k != key);
        self.managed.push((key, kind));
        self
    }

    /// Adds the managed keys' values for step `step` (of a run stopping at `stop`) to
    /// `values`.
    pub(crate) fn add_managed(&self, values: &mut Values, step: i64, stop: i64) {
        for (k, kind) in &self.managed {
            values.insert(k.clone(), kind.value(step, stop));
        }
    }

    /// The keys in declaration order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(k, _)| k.as_str())
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.keys.iter().any(|(k, _)| k == key)
    }
}

/// A graph state: how it maps onto channels and how node updates become channel writes.
///
/// Implemented by `#[derive(State)]` structs and by [`DynState`].
pub trait State: Send + Sync + Sized + 'static {
    /// What a node returns: a partial update.
    type Update: Send + 'static;

    /// The channels of this state (for [`DynState`], the schema is given at run time instead).
    fn schema() -> Schema;

    /// Builds the state nodes read from the channels' current values.
    fn from_values(values: &Values) -> Result<Self, GraphError>;

    /// Builds the state from `values` the way [`from_values`](Self::from_values) does,
    /// reusing `previous` — the state built from the values `before` — for what did not
    /// change: a field whose value is the same is taken over as it is, and (for `Vec` fields)
    /// a list that only grew at its end converts just the new items. The engine calls it
    /// from one super-step to the next, and from one run to the next on the same thread, so
    /// a long conversation does not rebuild its whole history for every node.
    /// `#[derive(State)]` implements it; the default builds from scratch.
    fn from_values_reusing(
        values: &Values,
        previous: Option<(Self, &Values)>,
    ) -> Result<Self, GraphError> {
        let _ = previous;
        Self::from_values(values)
    }

    /// Turns an update into `(channel, value)` writes, in the order LangGraph writes them.
    fn into_writes(update: Self::Update) -> Result<Vec<(String, Value)>, GraphError>;

    /// Touches every field (generated by `#[derive(State)]`, so that a field nodes only write
    /// is not reported as dead code). Not meant to be called.
    #[doc(hidden)]
    fn __touch_fields(&self) {}

    /// Turns graph input into `(channel, value)` writes.
    fn input_writes(input: Self::Update) -> Result<Vec<(String, Value)>, GraphError> {
        Self::into_writes(input)
    }

    /// The state's JSON Schema, if it has one: `#[derive(State)]` takes it from the type's
    /// [`schemars::JsonSchema`] implementation when the type derives that too; otherwise
    /// (and by default) `None`, and servers describe the state by its channels' names.
    fn json_schema() -> Option<serde_json::Value> {
        None
    }
}

/// What `#[derive(State)]` uses to find a state's JSON Schema without requiring one: a method
/// call on `&&Probe<T>` resolves to `ViaJsonSchema` when `T: JsonSchema` and to
/// `NoJsonSchema` otherwise (autoref-based specialization). Not meant to be used directly.
#[doc(hidden)]
pub mod __schema {
    use std::marker::PhantomData;

    /// A type-level probe for `T`'s JSON Schema.
    pub struct Probe<T>(PhantomData<T>);

    impl<T> Probe<T> {
        /// The probe for `T`.
        pub fn new() -> Self {
            Self(PhantomData)
        }
    }

    impl<T> Default for Probe<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Chosen when `T: JsonSchema`.
    pub trait ViaJsonSchema {
        /// `T`'s schema.
        fn json_schema(&self) -> Option<serde_json::Value>;
    }

    impl<T: schemars::JsonSchema> ViaJsonSchema for &Probe<T> {
        fn json_schema(&self) -> Option<serde_json::Value> {
            Some(schemars::schema_for!(T).to_value())
        }
    }

    /// Chosen otherwise.
    pub trait NoJsonSchema {
        /// `None`.
        fn json_schema(&self) -> Option<serde_json::Value>;
    }

    impl<T> NoJsonSchema for Probe<T> {
        fn json_schema(&self) -> Option<serde_json::Value> {
            None
        }
    }
}

/// A schema-less state: the values themselves, with reducers registered at run time through a
/// [`Schema`]. Updates are maps of key → value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynState(pub Values);

impl DynState {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }
}

impl std::ops::Index<&str> for DynState {
    type Output = Value;
    /// The value of `key`; panics if the state has none (as map indexing does).
    #[allow(
        clippy::panic,
        reason = "`Index` has no way to fail but panicking, as `HashMap`'s; `DynState::get` is the fallible read"
    )]
    fn index(&self, key: &str) -> &Value {
        match self.0.get(key) {
            Some(v) => v,
            None => panic!("the state has no value for {key:?}"),
        }
    }
}

impl State for DynState {
    type Update = Map;

    fn schema() -> Schema {
        Schema::new()
    }

    fn from_values(values: &Values) -> Result<Self, GraphError> {
        Ok(DynState(values.clone()))
    }

    fn into_writes(update: Map) -> Result<Vec<(String, Value)>, GraphError> {
        map_writes(update)
    }
}

/// A map of state keys to values as channel writes (keys must be strings).
pub(crate) fn map_writes(update: Map) -> Result<Vec<(String, Value)>, GraphError> {
    update
        .into_iter()
        .map(|(k, v)| match k {
            Value::Str(k) => Ok((k.to_string(), v)),
            other => Err(GraphError::InvalidUpdate {
                channel: other.to_string(),
                message: "state keys must be strings".into(),
            }),
        })
        .collect()
}

/// Converts a serializable Rust value into a [`Value`] (structs become maps with their field
/// names, as Python would store the same data). Direct, no bytes in between (see
/// [`stategraph_value::to_value`]).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, GraphError> {
    stategraph_value::to_value(value).map_err(|e| GraphError::Encode {
        what: std::any::type_name::<T>().to_owned(),
        message: e.to_string(),
    })
}

/// Converts a [`Value`] into a Rust value; the error names `key` and the path inside the
/// value where the shape did not fit.
pub fn from_value<T: DeserializeOwned>(key: &str, value: &Value) -> Result<T, GraphError> {
    stategraph_value::from_value(value).map_err(|e| GraphError::Decode {
        key: key.to_owned(),
        message: e.to_string(),
    })
}

/// `value` as a `T`, when `T` is `A` (a move, no conversion).
fn same_type<A: 'static, T: 'static>(value: A) -> Option<T> {
    let mut slot = Some(value);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<T>>()
        .and_then(Option::take)
}

/// What `#[derive(State)]` reads a field with: the value itself when the field holds dynamic
/// data (`Value`, `Vec<Value>`, `Map`, `List`, which share the channel's value instead of
/// converting it), else [`from_value`].
#[doc(hidden)]
pub fn read_field<T: DeserializeOwned + 'static>(
    key: &str,
    value: &Value,
) -> Result<T, GraphError> {
    let wanted = TypeId::of::<T>();
    let shared = if wanted == TypeId::of::<Value>() {
        same_type::<Value, T>(value.clone())
    } else {
        match value {
            Value::List(l) if wanted == TypeId::of::<Vec<Value>>() => same_type(l.to_vec()),
            Value::List(l) if wanted == TypeId::of::<List>() => same_type(l.clone()),
            Value::Map(m) if wanted == TypeId::of::<Map>() => same_type(m.clone()),
            _ => None,
        }
    };
    match shared {
        Some(t) => Ok(t),
        None => from_value(key, value),
    }
}

/// What `#[derive(State)]` rebuilds a field with: `previous` (the field built from `before`)
/// if the value is the same, else the field read afresh.
#[doc(hidden)]
pub fn reuse_field<T: DeserializeOwned + Default + 'static>(
    key: &str,
    now: Option<&Value>,
    before: Option<&Value>,
    previous: T,
) -> Result<T, GraphError> {
    match (now, before) {
        (None, None) => Ok(previous),
        (Some(n), Some(b)) if n == b => Ok(previous),
        (None, Some(_)) => Ok(T::default()),
        (Some(n), _) => read_field(key, n),
    }
}

/// [`reuse_field`] for a `Vec` field: a list that kept every item it had and grew at its end
/// converts only the new items.
#[doc(hidden)]
pub fn reuse_vec_field<E: DeserializeOwned + 'static>(
    key: &str,
    now: Option<&Value>,
    before: Option<&Value>,
    mut previous: Vec<E>,
) -> Result<Vec<E>, GraphError> {
    if let (Some(Value::List(n)), Some(Value::List(b))) = (now, before)
        && n.len() >= b.len()
        && previous.len() == b.len()
        && n.starts_with(b)
    {
        previous.reserve(n.len() - b.len());
        for (i, item) in n.iter().enumerate().skip(b.len()) {
            let item = read_field(key, item).map_err(|e| match e {
                GraphError::Decode { key, message } => GraphError::Decode {
                    key,
                    message: format!("at `[{i}]`: {message}"),
                },
                other => other,
            })?;
            previous.push(item);
        }
        return Ok(previous);
    }
    reuse_field(key, now, before, previous)
}

/// What `#[derive(State)]` writes a field with: dynamic data (`Value`, `Vec<Value>`, `Map`,
/// `List`, `String`) moves into the value as it is, anything else goes through
/// [`to_value`].
#[doc(hidden)]
pub fn write_field<T: Serialize + 'static>(value: T) -> Result<Value, GraphError> {
    // Each check moves the field out only if it is of that type.
    let mut slot = Some(value);
    let any = &mut slot as &mut dyn Any;
    if let Some(v) = any.downcast_mut::<Option<Value>>().and_then(Option::take) {
        return Ok(v);
    }
    if let Some(v) = any
        .downcast_mut::<Option<Vec<Value>>>()
        .and_then(Option::take)
    {
        return Ok(Value::from(v));
    }
    if let Some(v) = any.downcast_mut::<Option<List>>().and_then(Option::take) {
        return Ok(Value::List(v));
    }
    if let Some(v) = any.downcast_mut::<Option<Map>>().and_then(Option::take) {
        return Ok(Value::Map(v));
    }
    if let Some(v) = any.downcast_mut::<Option<String>>().and_then(Option::take) {
        return Ok(Value::from(v));
    }
    match slot {
        Some(v) => to_value(&v),
        None => Ok(Value::Null),
    }
}
