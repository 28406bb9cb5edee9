//! Channels: where state lives between super-steps, with LangGraph's update semantics.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use stategraph_checkpoint::{Ext, ExtCode, List, Value};

use crate::error::GraphError;

/// Combines the current value of a channel with one update.
pub type ReducerFn = dyn Fn(Value, Value) -> Result<Value, String> + Send + Sync;

/// A named reducer (LangGraph's `BinaryOperatorAggregate` operator).
#[derive(Clone)]
pub struct Reducer {
    name: &'static str,
    op: Arc<ReducerFn>,
    default: Option<Value>,
}

impl fmt::Debug for Reducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reducer({})", self.name)
    }
}

impl Reducer {
    /// A reducer from a function. `default` is the value the channel holds before any write
    /// (Python initialises the aggregate with the type's empty value: `[]`, `{}`, `0`, `""`).
    pub fn new(
        name: &'static str,
        default: Option<Value>,
        op: impl Fn(Value, Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            op: Arc::new(op),
            default,
        }
    }

    /// List concatenation (`operator.add` on lists); starts from `[]`.
    pub fn append() -> Self {
        Self::new(
            "append",
            Some(Value::List(List::new())),
            |cur, upd| match (cur, upd) {
                (Value::List(mut a), Value::List(b)) => {
                    a.extend(b);
                    Ok(Value::List(a))
                }
                (Value::List(_), other) => {
                    Err(format!("append expects a list, got {}", other.kind()))
                }
                (other, _) => Err(format!("append on a non-list value ({})", other.kind())),
            },
        )
    }

    /// Numeric addition (`operator.add` on numbers); starts from `0`.
    pub fn add() -> Self {
        Self::new("add", Some(Value::Int(0)), |cur, upd| match (cur, upd) {
            (Value::Int(a), Value::Int(b)) => a
                .checked_add(b)
                .map(Value::Int)
                .ok_or_else(|| "integer overflow".to_owned()),
            (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
            (Value::Int(a), Value::Float(b)) => Ok(Value::Float(a as f64 + b)),
            (Value::Float(a), Value::Int(b)) => Ok(Value::Float(a + b as f64)),
            (Value::Str(a), Value::Str(b)) => Ok(Value::from(format!("{a}{b}"))),
            (a, b) => Err(format!("cannot add {} and {}", a.kind(), b.kind())),
        })
    }

    /// Dict merge (`operator.or_` on dicts); starts from `{}`.
    pub fn merge() -> Self {
        Self::new(
            "merge",
            Some(Value::Map(Default::default())),
            |cur, upd| match (cur, upd) {
                (Value::Map(mut a), Value::Map(b)) => {
                    for (k, v) in b {
                        a.insert(k, v);
                    }
                    Ok(Value::Map(a))
                }
                (a, b) => Err(format!("cannot merge {} with {}", a.kind(), b.kind())),
            },
        )
    }

    /// LangGraph's `add_messages`: merge message lists by id (replace, remove, append);
    /// starts from `[]`.
    pub fn add_messages() -> Self {
        Self::new(
            "add_messages",
            Some(Value::List(List::new())),
            crate::messages::add_messages,
        )
    }

    /// The reducer's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn apply(&self, cur: Value, upd: Value) -> Result<Value, String> {
        (self.op)(cur, upd)
    }
}

/// What kind of channel a state key (or an internal channel) is.
#[derive(Clone, Debug)]
pub enum ChannelSpec {
    /// Keeps the last value; more than one write in a step is an error.
    LastValue,
    /// Folds every write into the current value with a reducer.
    Reducer(Reducer),
    /// A reducer channel stored as deltas (LangGraph's `DeltaChannel`): checkpoints omit its
    /// value — it is rebuilt from the nearest stored snapshot plus the writes after it (see
    /// `CheckpointSaver::get_delta_channel_history`) — except every `snapshot_frequency`-th
    /// update, which stores the full value as a `_DeltaSnapshot`. The reducer must be
    /// batching-invariant (folding writes in any grouping gives the same value), as
    /// [`Reducer::append`] and [`Reducer::add_messages`] are.
    Delta {
        /// The reducer.
        reducer: Reducer,
        /// A full snapshot every this many updates (at least 1; LangGraph's default is 100).
        snapshot_frequency: u32,
    },
    /// Holds a value for one step only. With `guard`, more than one write per step is an error.
    Ephemeral {
        /// Reject more than one write per step.
        guard: bool,
    },
    /// Holds the last value written during a run, never stored (LangGraph's
    /// `UntrackedValue`): checkpoints omit it, its writes are not saved as pending writes,
    /// and every run (a resume too) starts without it. With `guard`, more than one write per
    /// step is an error.
    Untracked {
        /// Reject more than one write per step.
        guard: bool,
    },
    /// Collects values (LangGraph's `Topic`); without `accumulate` it is emptied every step.
    Topic {
        /// Keep values across steps.
        accumulate: bool,
    },
    /// Waits until every named source has written (a join edge).
    NamedBarrier(BTreeSet<String>),
    /// The edge channel of a deferred node (LangGraph's `LastValueAfterFinish`): keeps the
    /// last value written, and makes it available only when the run would otherwise end.
    LastValueAfterFinish,
    /// A join edge into a deferred node (LangGraph's `NamedBarrierValueAfterFinish`): once
    /// every named source has written, available only when the run would otherwise end.
    NamedBarrierAfterFinish(BTreeSet<String>),
}

impl ChannelSpec {
    /// An empty channel of this kind, or one restored from its checkpointed value.
    pub(crate) fn create(&self, stored: Option<Value>) -> Channel {
        match self {
            ChannelSpec::LastValue => Channel::LastValue(stored),
            ChannelSpec::Reducer(r) => Channel::Reducer {
                value: stored.map(unwrap_snapshot).or_else(|| r.default.clone()),
                reducer: r.clone(),
                delta: false,
            },
            ChannelSpec::Delta { reducer, .. } => Channel::Reducer {
                value: stored
                    .map(unwrap_snapshot)
                    .or_else(|| reducer.default.clone()),
                reducer: reducer.clone(),
                delta: true,
            },
            ChannelSpec::Ephemeral { guard } => Channel::Ephemeral {
                value: stored,
                guard: *guard,
            },
            ChannelSpec::Untracked { guard } => Channel::Untracked {
                value: None,
                guard: *guard,
            },
            ChannelSpec::Topic { accumulate } => Channel::Topic {
                values: match stored {
                    Some(Value::List(l)) => l,
                    Some(other) => List::from(vec![other]),
                    None => List::new(),
                },
                accumulate: *accumulate,
            },
            ChannelSpec::NamedBarrier(names) => Channel::Barrier {
                names: names.clone(),
                seen: stored.map(names_of).unwrap_or_default(),
            },
            // Stored as the pair `(value, finished)`.
            ChannelSpec::LastValueAfterFinish => {
                let (value, finished) = stored.map(finished_pair).unwrap_or_default();
                Channel::AfterFinish { value, finished }
            }
            ChannelSpec::NamedBarrierAfterFinish(names) => {
                let (seen, finished) = stored.map(finished_pair).unwrap_or_default();
                Channel::BarrierAfterFinish {
                    names: names.clone(),
                    seen: seen.map(names_of).unwrap_or_default(),
                    finished,
                }
            }
        }
    }
}

/// A stored `(value, finished)` pair, as LangGraph's after-finish channels checkpoint it; a
/// bare value counts as not finished.
fn finished_pair(stored: Value) -> (Option<Value>, bool) {
    match stored {
        Value::List(l) if l.len() == 2 => {
            let mut items = l.into_iter();
            let value = items.next();
            let finished = matches!(items.next(), Some(Value::Bool(true)));
            (value, finished)
        }
        other => (Some(other), false),
    }
}

impl ChannelSpec {
    /// What [`create`](Self::create)`(stored)` would hold available, read off the stored
    /// value in place: the value a node would read, `None` if the channel is not available.
    /// A snapshot of a checkpoint that no writes apply to reads its values and finds its next
    /// tasks this way, without restoring every channel.
    pub(crate) fn stored_value(&self, stored: Option<&Value>) -> Option<Value> {
        match self {
            ChannelSpec::LastValue | ChannelSpec::Ephemeral { .. } => stored.cloned(),
            ChannelSpec::Untracked { .. } => None,
            ChannelSpec::Reducer(r) | ChannelSpec::Delta { reducer: r, .. } => stored
                .map(|v| unwrap_snapshot(v.clone()))
                .or_else(|| r.default.clone()),
            ChannelSpec::Topic { .. } => match stored {
                Some(Value::List(l)) => (!l.is_empty()).then(|| Value::List(l.clone())),
                Some(other) => Some(Value::List(List::from(vec![other.clone()]))),
                None => None,
            },
            ChannelSpec::NamedBarrier(_)
            | ChannelSpec::LastValueAfterFinish
            | ChannelSpec::NamedBarrierAfterFinish(_) => {
                let channel = self.create(stored.cloned());
                if channel.is_available() {
                    channel.get()
                } else {
                    None
                }
            }
        }
    }

    /// Whether [`create`](Self::create)`(stored)` would be available (see
    /// [`stored_value`](Self::stored_value)), without copying the value.
    pub(crate) fn stored_available(&self, stored: Option<&Value>) -> bool {
        match self {
            ChannelSpec::LastValue | ChannelSpec::Ephemeral { .. } => stored.is_some(),
            ChannelSpec::Untracked { .. } => false,
            ChannelSpec::Reducer(r) | ChannelSpec::Delta { reducer: r, .. } => {
                stored.is_some() || r.default.is_some()
            }
            ChannelSpec::Topic { .. } => match stored {
                Some(Value::List(l)) => !l.is_empty(),
                Some(_) => true,
                None => false,
            },
            ChannelSpec::NamedBarrier(_)
            | ChannelSpec::LastValueAfterFinish
            | ChannelSpec::NamedBarrierAfterFinish(_) => self.stored_value(stored).is_some(),
        }
    }
}

impl ChannelSpec {
    /// A delta channel (see [`ChannelSpec::Delta`]); a frequency of 0 counts as 1.
    pub fn delta(reducer: Reducer, snapshot_frequency: u32) -> Self {
        ChannelSpec::Delta {
            reducer,
            snapshot_frequency: snapshot_frequency.max(1),
        }
    }

    /// Whether a checkpoint missing this channel's value (while recording a version for it)
    /// rebuilds it from history: delta channels, and reducer channels, whose values are
    /// otherwise stored at every version (a thread written while the key was a delta channel).
    pub(crate) fn rebuilds_from_history(&self) -> bool {
        matches!(self, ChannelSpec::Delta { .. } | ChannelSpec::Reducer(_))
    }
}

/// `value` stored as a delta channel's full snapshot (`_DeltaSnapshot(value)`).
pub(crate) fn snapshot_of(value: &Value) -> Value {
    Value::Ext(Ext::delta_snapshot(value))
}

/// A `_DeltaSnapshot(value)` read back as the value it wraps; anything else as is.
pub(crate) fn unwrap_snapshot(v: Value) -> Value {
    match &v {
        Value::Ext(e) if e.ext_code() == Some(ExtCode::DeltaSnapshot) => e.payload().unwrap_or(v),
        _ => v,
    }
}

/// Reads a stored set of names: a Python `set` ext (`["builtins", "set", [..]]`) or a list.
fn names_of(v: Value) -> BTreeSet<String> {
    let items = match v {
        Value::Ext(e) => match e.py_object() {
            Ok(Some(obj)) => obj.data,
            _ => Value::Null,
        },
        other => other,
    };
    match items {
        Value::List(l) => l
            .into_iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// A live channel during a run.
#[derive(Clone, Debug)]
pub(crate) enum Channel {
    LastValue(Option<Value>),
    Reducer {
        value: Option<Value>,
        reducer: Reducer,
        /// Stored as deltas: checkpoints omit the value.
        delta: bool,
    },
    Ephemeral {
        value: Option<Value>,
        guard: bool,
    },
    Untracked {
        value: Option<Value>,
        guard: bool,
    },
    Topic {
        values: List,
        accumulate: bool,
    },
    Barrier {
        names: BTreeSet<String>,
        seen: BTreeSet<String>,
    },
    AfterFinish {
        value: Option<Value>,
        finished: bool,
    },
    BarrierAfterFinish {
        names: BTreeSet<String>,
        seen: BTreeSet<String>,
        finished: bool,
    },
}

impl Channel {
    /// The current value, if any.
    pub(crate) fn get(&self) -> Option<Value> {
        match self {
            Channel::LastValue(v)
            | Channel::Ephemeral { value: v, .. }
            | Channel::Untracked { value: v, .. } => v.clone(),
            Channel::Reducer { value, .. } => value.clone(),
            Channel::Topic { values, .. } => {
                (!values.is_empty()).then(|| Value::List(values.clone()))
            }
            Channel::Barrier { names, seen } => (names == seen).then_some(Value::Null),
            Channel::AfterFinish { value, finished } => value.clone().filter(|_| *finished),
            Channel::BarrierAfterFinish {
                names,
                seen,
                finished,
            } => (*finished && names == seen).then_some(Value::Null),
        }
    }

    /// Whether the channel holds a value nodes can read (and be triggered by).
    pub(crate) fn is_available(&self) -> bool {
        match self {
            Channel::LastValue(v)
            | Channel::Ephemeral { value: v, .. }
            | Channel::Untracked { value: v, .. } => v.is_some(),
            Channel::Reducer { value, .. } => value.is_some(),
            Channel::Topic { values, .. } => !values.is_empty(),
            Channel::Barrier { names, seen } => names == seen,
            Channel::AfterFinish { value, finished } => *finished && value.is_some(),
            Channel::BarrierAfterFinish {
                names,
                seen,
                finished,
            } => *finished && names == seen,
        }
    }

    /// Applies one step's writes; returns whether the channel changed.
    pub(crate) fn update(&mut self, name: &str, values: Vec<Value>) -> Result<bool, GraphError> {
        let invalid = |message: String| GraphError::InvalidUpdate {
            channel: name.to_owned(),
            message,
        };
        match self {
            Channel::LastValue(cur) => match values.len() {
                0 => Ok(false),
                1 => {
                    *cur = values.into_iter().next();
                    Ok(true)
                }
                n => Err(invalid(format!(
                    "can receive only one value per step, got {n}; use a reducer to combine \
                     concurrent writes"
                ))),
            },
            Channel::Reducer { value, reducer, .. } => {
                if values.is_empty() {
                    return Ok(false);
                }
                // An `Overwrite` replaces what the reducer made so far; writes after it
                // are dropped; a second one is refused (LangGraph's `BinaryOperatorAggregate`).
                let mut acc = value.take();
                let mut overwritten = false;
                for v in values {
                    if let Some(replacement) = crate::overwrite::Overwrite::of(&v) {
                        if overwritten {
                            return Err(invalid(
                                "can receive only one Overwrite value per super-step".to_owned(),
                            ));
                        }
                        acc = Some(replacement);
                        overwritten = true;
                    } else if !overwritten {
                        acc = Some(match acc {
                            Some(a) => reducer.apply(a, v).map_err(&invalid)?,
                            None => v,
                        });
                    }
                }
                *value = acc;
                Ok(true)
            }
            Channel::Ephemeral { value, guard } => {
                if values.is_empty() {
                    return Ok(value.take().is_some());
                }
                if *guard && values.len() > 1 {
                    return Err(invalid(format!(
                        "can receive only one value per step, got {}",
                        values.len()
                    )));
                }
                *value = values.into_iter().last();
                Ok(true)
            }
            Channel::Untracked { value, guard } => {
                if values.is_empty() {
                    return Ok(false);
                }
                if *guard && values.len() > 1 {
                    return Err(invalid(format!(
                        "can receive only one value per step, got {}",
                        values.len()
                    )));
                }
                *value = values.into_iter().last();
                Ok(true)
            }
            Channel::Topic {
                values: cur,
                accumulate,
            } => {
                let mut changed = false;
                if !*accumulate && !cur.is_empty() {
                    *cur = List::new();
                    changed = true;
                }
                for v in values {
                    match v {
                        Value::List(l) => cur.extend(l),
                        other => cur.push(other),
                    }
                    changed = true;
                }
                Ok(changed)
            }
            Channel::Barrier { names, seen } | Channel::BarrierAfterFinish { names, seen, .. } => {
                let mut changed = false;
                for v in values {
                    let Some(n) = v.as_str() else {
                        return Err(invalid(format!("expected a node name, got {v}")));
                    };
                    if !names.contains(n) {
                        return Err(invalid(format!("`{n}` is not one of {names:?}")));
                    }
                    changed |= seen.insert(n.to_owned());
                }
                Ok(changed)
            }
            // Any number of writes a step: the last counts, and waits for the run's end.
            Channel::AfterFinish { value, finished } => match values.into_iter().last() {
                None => Ok(false),
                Some(last) => {
                    *value = Some(last);
                    *finished = false;
                    Ok(true)
                }
            },
        }
    }

    /// Marks the value as read by the node it triggered; returns whether that changed it.
    pub(crate) fn consume(&mut self) -> bool {
        match self {
            Channel::Barrier { names, seen } if names == seen => {
                seen.clear();
                true
            }
            Channel::AfterFinish { value, finished } if *finished => {
                *finished = false;
                *value = None;
                true
            }
            Channel::BarrierAfterFinish {
                names,
                seen,
                finished,
            } if *finished && names == seen => {
                *finished = false;
                seen.clear();
                true
            }
            _ => false,
        }
    }

    /// Told that the run would end after this step (no channel that triggers a node was
    /// updated): an after-finish channel holding its value makes it available. Returns
    /// whether that changed the channel (LangGraph's `finish()`).
    pub(crate) fn finish(&mut self) -> bool {
        match self {
            Channel::AfterFinish { value, finished } if !*finished && value.is_some() => {
                *finished = true;
                true
            }
            Channel::BarrierAfterFinish {
                names,
                seen,
                finished,
            } if !*finished && names == seen => {
                *finished = true;
                true
            }
            _ => false,
        }
    }

    /// Whether the channel is stored as deltas.
    pub(crate) fn is_delta(&self) -> bool {
        matches!(self, Channel::Reducer { delta: true, .. })
    }

    /// The value stored in a checkpoint (`None`: nothing stored; a delta channel's value is
    /// stored only as a snapshot, which `create_checkpoint` decides).
    pub(crate) fn checkpoint(&self) -> Option<Value> {
        match self {
            Channel::LastValue(v) | Channel::Ephemeral { value: v, .. } => v.clone(),
            Channel::Untracked { .. } => None,
            Channel::Reducer { delta: true, .. } => None,
            Channel::Reducer { value, .. } => value.clone(),
            Channel::Topic { values, .. } => Some(Value::List(values.clone())),
            Channel::Barrier { seen, .. } => Some(set_of(seen)),
            Channel::AfterFinish { value, finished } => value
                .clone()
                .map(|v| Value::List(List::from(vec![v, Value::Bool(*finished)]))),
            Channel::BarrierAfterFinish { seen, finished, .. } => {
                Some(Value::List(List::from(vec![
                    set_of(seen),
                    Value::Bool(*finished),
                ])))
            }
        }
    }
}

/// Names stored as a Python `set`.
fn set_of(names: &BTreeSet<String>) -> Value {
    Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        "builtins",
        "set",
        Value::List(names.iter().map(|s| Value::from(s.as_str())).collect()),
    ))
}
