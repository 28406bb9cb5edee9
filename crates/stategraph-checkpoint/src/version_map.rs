//! The version maps of a checkpoint, [`ChannelVersions`] and [`VersionsSeen`]: persistent
//! (structurally shared) sorted maps.
//!
//! Every checkpoint records the version of every channel and, for every node, the versions it
//! has seen: O(channels + nodes) entries, of which a super-step changes a handful. Stored as
//! persistent maps, a checkpoint's copy of them is a reference count, and a change copies only
//! the few tree nodes on the changed entry's path (O(log n)), so a run of a 1,000-node graph
//! does not copy 1,000 entries at every step. They read like `BTreeMap`s: sorted by key,
//! `get`, `insert`, `iter`, `len`; keys are `&str` on the way out.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::version::ChannelVersion;

type Inner<V> = imbl::OrdMap<Arc<str>, V>;

/// An iterator over `(key, value)` pairs in key order.
pub struct Iter<'a, V> {
    inner: imbl::ordmap::Iter<'a, Arc<str>, V, imbl::shared_ptr::DefaultSharedPtr>,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a str, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (&**k, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(k, v)| (&**k, v))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

macro_rules! persistent_map {
    ($(#[$doc:meta])* $name:ident, $value:ty, $what:literal) => {
        $(#[$doc])*

        impl $name {
            /// An empty map.
            pub fn new() -> Self {
                Self::default()
            }

            /// Number of entries.
            pub fn len(&self) -> usize {
                self.map.len()
            }

            /// Whether the map is empty.
            pub fn is_empty(&self) -> bool {
                self.map.is_empty()
            }

            #[doc = concat!("The entry of ", $what, " `key`.")]
            pub fn get(&self, key: &str) -> Option<&$value> {
                self.map.get(key)
            }

            #[doc = concat!("Whether ", $what, " `key` has an entry.")]
            pub fn contains_key(&self, key: &str) -> bool {
                self.map.contains_key(key)
            }

            /// Sets `key`'s entry, returning the one it replaces.
            pub fn insert(&mut self, key: impl Into<Arc<str>>, value: $value) -> Option<$value> {
                let old = self.map.insert(key.into(), value.clone());
                self.inserted(&value, old.as_ref());
                old
            }

            /// Removes `key`'s entry, returning it.
            pub fn remove(&mut self, key: &str) -> Option<$value> {
                let removed = self.map.remove(key);
                self.removed();
                removed
            }

            /// The entries in key order.
            pub fn iter(&self) -> Iter<'_, $value> {
                Iter { inner: self.map.iter() }
            }

            /// The keys in order.
            pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
                self.iter().map(|(k, _)| k)
            }

            /// The values in key order.
            pub fn values(&self) -> impl DoubleEndedIterator<Item = &$value> + ExactSizeIterator {
                self.iter().map(|(_, v)| v)
            }

            /// Whether `self` and `other` are copies of one another, unchanged since (then
            /// they are equal without looking at the entries).
            pub fn ptr_eq(&self, other: &Self) -> bool {
                self.map.ptr_eq(&other.map)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map().entries(self.iter()).finish()
            }
        }

        impl std::ops::Index<&str> for $name {
            type Output = $value;
            /// The entry of `key`; panics if there is none (like `BTreeMap`'s indexing).
            fn index(&self, key: &str) -> &$value {
                match self.map.get(key) {
                    Some(v) => v,
                    None => panic!("no entry for {key:?}"),
                }
            }
        }

        impl<'a> IntoIterator for &'a $name {
            type Item = (&'a str, &'a $value);
            type IntoIter = Iter<'a, $value>;
            fn into_iter(self) -> Self::IntoIter {
                self.iter()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.map == other.map
            }
        }

        impl<K: Into<Arc<str>>> FromIterator<(K, $value)> for $name {
            fn from_iter<I: IntoIterator<Item = (K, $value)>>(iter: I) -> Self {
                let mut out = Self::default();
                out.extend(iter);
                out
            }
        }

        impl<K: Into<Arc<str>>> Extend<(K, $value)> for $name {
            fn extend<I: IntoIterator<Item = (K, $value)>>(&mut self, iter: I) {
                for (k, v) in iter {
                    self.insert(k, v);
                }
            }
        }

        impl<K: Into<Arc<str>>, const N: usize> From<[(K, $value); N]> for $name {
            fn from(entries: [(K, $value); N]) -> Self {
                entries.into_iter().collect()
            }
        }

        impl From<BTreeMap<String, $value>> for $name {
            fn from(map: BTreeMap<String, $value>) -> Self {
                map.into_iter().collect()
            }
        }
    };
}

/// Channel name → version (a persistent sorted map; see the module docs). It also keeps its
/// highest version at hand, which is what every next version is computed from.
#[derive(Clone, Default)]
pub struct ChannelVersions {
    map: Inner<ChannelVersion>,
    /// The highest version, `None` when empty.
    max: Option<ChannelVersion>,
}

/// Node → the channel versions it last consumed (a persistent sorted map; see the module
/// docs).
#[derive(Clone, Default)]
pub struct VersionsSeen {
    map: Inner<ChannelVersions>,
}

persistent_map!(
    /// Channel name → version.
    ///
    /// ```
    /// use stategraph_checkpoint::{ChannelVersion, ChannelVersions};
    /// let mut a = ChannelVersions::from([("foo", ChannelVersion::Int(1))]);
    /// let b = a.clone();                         // shared, not copied
    /// a.insert("bar", ChannelVersion::Int(2));   // `b` is unchanged
    /// assert_eq!((a.len(), b.len()), (2, 1));
    /// assert_eq!(a.keys().collect::<Vec<_>>(), ["bar", "foo"]);
    /// ```
    ChannelVersions,
    ChannelVersion,
    "channel"
);

persistent_map!(
    /// Node → the channel versions it last consumed.
    VersionsSeen,
    ChannelVersions,
    "node"
);

impl ChannelVersions {
    /// The highest version (what the next version is computed from), without a scan.
    pub fn max_version(&self) -> Option<&ChannelVersion> {
        self.max.as_ref()
    }

    /// The entries whose version is newer than in `previous` (or that `previous` lacks):
    /// LangGraph's `get_new_channel_versions`, the versions a save stores values for. Parts
    /// the two maps share are skipped without being compared, so the cost follows what
    /// changed, not the number of channels.
    pub fn newer_than(&self, previous: &ChannelVersions) -> ChannelVersions {
        previous
            .map
            .diff(&self.map)
            .filter_map(|d| match d {
                imbl::ordmap::DiffItem::Add(k, v) => Some((Arc::clone(k), v.clone())),
                imbl::ordmap::DiffItem::Update { old, new } if new.1 > old.1 => {
                    Some((Arc::clone(new.0), new.1.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Keeps `max` right after `new` was inserted in place of `old`.
    fn inserted(&mut self, new: &ChannelVersion, old: Option<&ChannelVersion>) {
        if self.max.as_ref().is_none_or(|m| new > m) {
            self.max = Some(new.clone());
        } else if old.is_some() && old == self.max.as_ref() && Some(new) != old {
            // The highest entry went down: find the new highest.
            self.max = self.map.values().max().cloned();
        }
    }

    fn removed(&mut self) {
        self.max = self.map.values().max().cloned();
    }
}

impl VersionsSeen {
    /// The versions `node` has seen, to change in place.
    pub fn get_mut(&mut self, node: &str) -> Option<&mut ChannelVersions> {
        self.map.get_mut(node)
    }

    /// The versions `node` has seen, created empty if it has none yet, to change in place.
    pub fn node_mut(&mut self, node: &str) -> &mut ChannelVersions {
        self.map.entry(node.into()).or_default()
    }

    fn inserted(&mut self, _: &ChannelVersions, _: Option<&ChannelVersions>) {}

    fn removed(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_are_independent() {
        let mut seen = VersionsSeen::new();
        seen.node_mut("a").insert("x", ChannelVersion::Int(1));
        let before = seen.clone();
        assert!(before.ptr_eq(&seen));
        seen.node_mut("a").insert("x", ChannelVersion::Int(2));
        seen.node_mut("b").insert("y", ChannelVersion::Int(1));
        assert_eq!(
            before.get("a").and_then(|m| m.get("x")),
            Some(&ChannelVersion::Int(1))
        );
        assert_eq!(
            seen.get("a").and_then(|m| m.get("x")),
            Some(&ChannelVersion::Int(2))
        );
        assert_eq!(before.len(), 1);
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_ne!(before, seen);
    }

    #[test]
    fn newer_than_lists_what_moved() {
        let mut v: ChannelVersions = (0..500)
            .map(|i| (format!("ch{i:03}"), ChannelVersion::Int(1)))
            .collect();
        let saved = v.clone();
        v.insert("ch007", ChannelVersion::Int(2));
        v.insert("new", ChannelVersion::Int(2));
        v.insert("ch100", ChannelVersion::Int(0)); // went down: not newer
        let moved = v.newer_than(&saved);
        assert_eq!(moved.keys().collect::<Vec<_>>(), ["ch007", "new"]);
        assert!(saved.newer_than(&saved).is_empty());
    }

    #[test]
    fn the_highest_version_follows_changes() {
        let mut v = ChannelVersions::from([("a", ChannelVersion::Int(3))]);
        v.insert("b", ChannelVersion::Int(5));
        assert_eq!(v.max_version(), Some(&ChannelVersion::Int(5)));
        v.insert("b", ChannelVersion::Int(1));
        assert_eq!(v.max_version(), Some(&ChannelVersion::Int(3)));
        v.remove("a");
        assert_eq!(v.max_version(), Some(&ChannelVersion::Int(1)));
        v.remove("b");
        assert_eq!(v.max_version(), None);
    }

    #[test]
    fn iterates_in_key_order_and_finds_the_highest_version() {
        let v: ChannelVersions = [("b", 3), ("a", 5), ("c", 1)]
            .into_iter()
            .map(|(k, n)| (k, ChannelVersion::Int(n)))
            .collect();
        assert_eq!(v.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(v.max_version(), Some(&ChannelVersion::Int(5)));
        assert_eq!(
            format!("{v:?}"),
            r#"{"a": Int(5), "b": Int(3), "c": Int(1)}"#
        );
    }
}
