//! Graph state: a schema of channels, typed or dynamic.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use stategraph_checkpoint::{Map, Value};

use crate::channel::{ChannelSpec, Reducer};
use crate::error::GraphError;

/// The state channels' current values, by key (keys without a value are absent).
pub type Values = BTreeMap<String, Value>;

/// The state schema: one channel per key, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    pub(crate) keys: Vec<(String, ChannelSpec)>,
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

    /// Adds a key with any channel kind.
    pub fn key(mut self, key: impl Into<String>, spec: ChannelSpec) -> Self {
        let key = key.into();
        self.keys.retain(|(k, _)| *k != key);
        self.keys.push((key, spec));
        self
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

    /// Turns an update into `(channel, value)` writes, in the order LangGraph writes them.
    fn into_writes(update: Self::Update) -> Result<Vec<(String, Value)>, GraphError>;

    /// Turns graph input into `(channel, value)` writes.
    fn input_writes(input: Self::Update) -> Result<Vec<(String, Value)>, GraphError> {
        Self::into_writes(input)
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

impl State for DynState {
    type Update = Map;

    fn schema() -> Schema {
        Schema::new()
    }

    fn from_values(values: &Values) -> Result<Self, GraphError> {
        Ok(DynState(values.clone()))
    }

    fn into_writes(update: Map) -> Result<Vec<(String, Value)>, GraphError> {
        update
            .into_iter()
            .map(|(k, v)| match k {
                Value::Str(k) => Ok((k, v)),
                other => Err(GraphError::InvalidUpdate {
                    channel: other.to_string(),
                    message: "state keys must be strings".into(),
                }),
            })
            .collect()
    }
}

/// Converts a serializable Rust value into a [`Value`] (structs become maps with their field
/// names, as Python would store the same data).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, GraphError> {
    let bytes = rmp_serde::to_vec_named(value).map_err(|e| GraphError::Encode {
        what: std::any::type_name::<T>().to_owned(),
        message: e.to_string(),
    })?;
    stategraph_checkpoint::value::decode(&bytes).map_err(|e| GraphError::Encode {
        what: std::any::type_name::<T>().to_owned(),
        message: e.to_string(),
    })
}

/// Converts a [`Value`] into a Rust value; the error names `key`.
pub fn from_value<T: DeserializeOwned>(key: &str, value: &Value) -> Result<T, GraphError> {
    let bytes = stategraph_checkpoint::value::encode(value);
    rmp_serde::from_slice(&bytes).map_err(|e| GraphError::Decode {
        key: key.to_owned(),
        message: e.to_string(),
    })
}
