//! What task preparation and value reads see of a step's channels: live [`Channels`], or a
//! checkpoint's stored values read in place ([`Stored`]), which spares a snapshot that no
//! writes apply to (most of a history listing) from restoring every channel.

use std::sync::Arc;

use stategraph_checkpoint::{Checkpoint, Value};

use super::Channels;
use crate::channel::{Channel, ChannelSpec};

/// Channels by name, as reads see them.
pub(crate) trait ChannelRead {
    /// Whether channel `name` holds a value nodes can read (and be triggered by).
    fn is_available(&self, name: &str) -> bool;
    /// Channel `name`'s value, if it is available.
    fn value(&self, name: &str) -> Option<Value>;
}

impl ChannelRead for Channels {
    fn is_available(&self, name: &str) -> bool {
        self.get(name).is_some_and(Channel::is_available)
    }

    fn value(&self, name: &str) -> Option<Value> {
        self.get(name)
            .filter(|c| c.is_available())
            .and_then(Channel::get)
    }
}

/// A checkpoint's channels as [`channels_from_checkpoint`](super::channels_from_checkpoint)
/// would restore them, read without restoring them.
pub(crate) struct Stored<'a> {
    /// The graph's channels, sorted by name.
    specs: &'a [(Arc<str>, ChannelSpec)],
    checkpoint: &'a Checkpoint,
}

impl<'a> Stored<'a> {
    /// `checkpoint`'s channels of kinds `specs` (sorted by name, as a compiled graph keeps
    /// them).
    pub(crate) fn new(specs: &'a [(Arc<str>, ChannelSpec)], checkpoint: &'a Checkpoint) -> Self {
        debug_assert!(specs.is_sorted_by(|a, b| a.0 < b.0));
        Self { specs, checkpoint }
    }

    /// Channel `name`'s kind and stored value.
    fn channel(&self, name: &str) -> Option<(&ChannelSpec, Option<&Value>)> {
        let i = self.specs.binary_search_by(|(k, _)| (**k).cmp(name)).ok()?;
        let (_, spec) = self.specs.get(i)?;
        Some((spec, self.checkpoint.channel_values.get(name)))
    }
}

impl ChannelRead for Stored<'_> {
    fn is_available(&self, name: &str) -> bool {
        self.channel(name)
            .is_some_and(|(spec, stored)| spec.stored_available(stored))
    }

    fn value(&self, name: &str) -> Option<Value> {
        let (spec, stored) = self.channel(name)?;
        spec.stored_value(stored)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use stategraph_checkpoint::{Ext, ExtCode, List};

    use super::*;
    use crate::channel::Reducer;
    use crate::step::channels_from_checkpoint;

    /// Every channel kind, read in place and restored, agrees on availability and value for
    /// every shape a stored value can take.
    #[test]
    fn stored_reads_agree_with_restored_channels() {
        let names: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        let set_of = |items: &[&str]| {
            Value::Ext(Ext::python(
                ExtCode::ConstructorSingleArg,
                "builtins",
                "set",
                Value::List(items.iter().map(|s| Value::from(*s)).collect()),
            ))
        };
        let kinds = [
            ChannelSpec::LastValue,
            ChannelSpec::Reducer(Reducer::append()),
            ChannelSpec::Reducer(Reducer::new("sum", None, |a, _| Ok(a))),
            ChannelSpec::delta(Reducer::append(), 3),
            ChannelSpec::Ephemeral { guard: true },
            ChannelSpec::Topic { accumulate: false },
            ChannelSpec::NamedBarrier(names.clone()),
            ChannelSpec::LastValueAfterFinish,
            ChannelSpec::NamedBarrierAfterFinish(names),
        ];
        let stored = [
            None,
            Some(Value::Null),
            Some(Value::Int(1)),
            Some(Value::List(List::new())),
            Some(Value::List(List::from(vec![Value::Int(2)]))),
            Some(set_of(&["a"])),
            Some(set_of(&["a", "b"])),
            Some(Value::List(List::from(vec![
                Value::Null,
                Value::Bool(true),
            ]))),
            Some(Value::List(List::from(vec![
                Value::Null,
                Value::Bool(false),
            ]))),
            Some(Value::List(List::from(vec![
                set_of(&["a", "b"]),
                Value::Bool(true),
            ]))),
            Some(Value::List(List::from(vec![
                set_of(&["a", "b"]),
                Value::Bool(false),
            ]))),
        ];
        for kind in kinds {
            for value in &stored {
                let specs = [(Arc::<str>::from("ch"), kind.clone())];
                let mut checkpoint = Checkpoint::empty();
                if let Some(v) = value {
                    checkpoint.channel_values.insert("ch".to_owned(), v.clone());
                }
                let restored = channels_from_checkpoint(&specs, &checkpoint);
                let view = Stored::new(&specs, &checkpoint);
                let what = format!("{kind:?} holding {value:?}");
                assert_eq!(
                    view.is_available("ch"),
                    restored.is_available("ch"),
                    "{what}"
                );
                assert_eq!(view.value("ch"), restored.value("ch"), "{what}");
                assert!(!view.is_available("other") && view.value("other").is_none());
            }
        }
    }
}
