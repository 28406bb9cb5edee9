//! [`List`]: the shared, copy-on-write array of a [`Value::List`].

use std::ops::Deref;
use std::sync::Arc;

use super::Value;

/// The items of a [`Value::List`], shared copy-on-write: cloning a list (a state read by a
/// node, a checkpoint handed to a background save) is a reference count, and only a clone that
/// is then changed copies its items — and those are themselves shared, so the copy is one
/// reference count per item, never a deep copy.
///
/// It reads like a slice (`len`, `iter`, indexing, `first`, …, through `Deref`).
///
/// ```
/// use stategraph_checkpoint::{List, Value};
/// let mut a = List::from(vec![Value::from("x")]);
/// let b = a.clone();          // shared
/// a.push(Value::from("y"));   // a copies its items; b is unchanged
/// assert_eq!((a.len(), b.len()), (2, 1));
/// assert_eq!(a[1], Value::from("y"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct List {
    items: Arc<Vec<Value>>,
}

impl PartialEq for List {
    /// Shared items are equal without being compared.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.items, &other.items) || self.items == other.items
    }
}

impl List {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `n` items.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            items: Arc::new(Vec::with_capacity(n)),
        }
    }

    /// Appends an item (copying the items first if they are shared).
    pub fn push(&mut self, item: Value) {
        self.make_mut().push(item);
    }

    /// The items, to change in place (copied first if they are shared).
    pub fn make_mut(&mut self) -> &mut Vec<Value> {
        Arc::make_mut(&mut self.items)
    }

    /// The items as a vector (without copying when this list is their only owner).
    pub fn into_vec(self) -> Vec<Value> {
        Arc::unwrap_or_clone(self.items)
    }

    /// The items as a slice.
    pub fn as_slice(&self) -> &[Value] {
        &self.items
    }

    /// Whether `self` and `other` share their items (a clone of one another, unchanged since).
    pub fn ptr_eq(&self, other: &List) -> bool {
        Arc::ptr_eq(&self.items, &other.items)
    }
}

impl Deref for List {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.items
    }
}

impl AsRef<[Value]> for List {
    fn as_ref(&self) -> &[Value] {
        &self.items
    }
}

impl From<Vec<Value>> for List {
    fn from(items: Vec<Value>) -> Self {
        Self {
            items: Arc::new(items),
        }
    }
}

impl From<List> for Vec<Value> {
    fn from(l: List) -> Self {
        l.into_vec()
    }
}

impl FromIterator<Value> for List {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl Extend<Value> for List {
    fn extend<I: IntoIterator<Item = Value>>(&mut self, iter: I) {
        self.make_mut().extend(iter);
    }
}

impl IntoIterator for List {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a List {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl PartialEq<Vec<Value>> for List {
    fn eq(&self, other: &Vec<Value>) -> bool {
        self.items.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_until_changed() {
        let a = List::from(vec![Value::from(1), Value::from(2)]);
        let mut b = a.clone();
        assert!(a.ptr_eq(&b));
        b.push(Value::from(3));
        assert!(!a.ptr_eq(&b));
        assert_eq!(a.len(), 2);
        assert_eq!(
            b.as_slice(),
            &[Value::from(1), Value::from(2), Value::from(3)]
        );
    }

    #[test]
    fn sole_owner_changes_in_place() {
        let mut a = List::from(vec![Value::from(1)]);
        let before = a.as_ptr();
        a.make_mut().reserve(0);
        assert_eq!(a.as_ptr(), before);
        assert_eq!(a.into_vec(), vec![Value::from(1)]);
    }
}
