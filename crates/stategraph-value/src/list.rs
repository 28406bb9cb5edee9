//! [`List`]: the shared, copy-on-write array of a [`Value::List`].

use std::ops::Deref;
use std::sync::Arc;

use super::Value;

/// The items of a [`Value::List`], shared copy-on-write: cloning a list (a state read by a
/// node, a checkpoint handed to a background save) is a reference count, and only a clone that
/// is then changed copies its items — and those are themselves shared, so the copy is one
/// reference count per item, never a deep copy.
///
/// A list may also be the start of a longer list's items, sharing them: a read that decodes
/// checkpoint after checkpoint of a chat gets each older message list as the first items of
/// the newest one, without copying them. Such a list keeps the longer one's items alive while
/// it lives; changing it copies its own items first, as for any shared list.
///
/// It reads like a slice (`len`, `iter`, indexing, `first`, …, through `Deref`).
///
/// ```
/// use stategraph_value::{List, Value};
/// let mut a = List::from(vec![Value::from("x")]);
/// let b = a.clone();          // shared
/// a.push(Value::from("y"));   // a copies its items; b is unchanged
/// assert_eq!((a.len(), b.len()), (2, 1));
/// assert_eq!(a[1], Value::from("y"));
/// ```
#[derive(Clone)]
pub struct List {
    items: Arc<Vec<Value>>,
    /// How many of `items` are this list's: [`WHOLE`] for all of them (every list but one
    /// made by [`List::prefix`]), else fewer than `items.len()`.
    len: usize,
}

/// [`List::len`] value meaning "all the items".
const WHOLE: usize = usize::MAX;

impl Default for List {
    fn default() -> Self {
        Self {
            items: Arc::default(),
            len: WHOLE,
        }
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List")
            .field("items", &self.as_slice())
            .finish()
    }
}

impl PartialEq for List {
    /// Shared items are equal without being compared.
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.as_slice() == other.as_slice()
    }
}

impl List {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `n` items.
    pub fn with_capacity(n: usize) -> Self {
        Vec::with_capacity(n).into()
    }

    /// Appends an item (copying the items first if they are shared).
    pub fn push(&mut self, item: Value) {
        self.make_mut().push(item);
    }

    /// The items, to change in place (copied first if they are shared).
    pub fn make_mut(&mut self) -> &mut Vec<Value> {
        if self.len != WHOLE {
            // The start of a longer list: its own items only, from here on.
            let len = std::mem::replace(&mut self.len, WHOLE);
            match Arc::get_mut(&mut self.items) {
                Some(items) => items.truncate(len),
                None => {
                    let own = self.items.get(..len).unwrap_or_default().to_vec();
                    self.items = Arc::new(own);
                }
            }
        }
        Arc::make_mut(&mut self.items)
    }

    /// The items as a vector (without copying when this list is their only owner).
    pub fn into_vec(mut self) -> Vec<Value> {
        if self.len != WHOLE {
            self.make_mut();
        }
        Arc::unwrap_or_clone(self.items)
    }

    /// The items as a slice.
    pub fn as_slice(&self) -> &[Value] {
        // (`get` of `..WHOLE` is `None`: the whole vector.)
        self.items.get(..self.len).unwrap_or(&self.items)
    }

    /// Whether `self` and `other` share their items (a clone of one another, unchanged since).
    pub fn ptr_eq(&self, other: &List) -> bool {
        Arc::ptr_eq(&self.items, &other.items) && self.as_slice().len() == other.as_slice().len()
    }

    /// The first `n` items (all of them if there are no more), sharing this list's items: a
    /// reference count, no copy.
    pub(crate) fn prefix(&self, n: usize) -> List {
        if n >= self.as_slice().len() {
            return self.clone();
        }
        Self {
            items: Arc::clone(&self.items),
            len: n,
        }
    }
}

impl Deref for List {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        self.as_slice()
    }
}

impl AsRef<[Value]> for List {
    fn as_ref(&self) -> &[Value] {
        self.as_slice()
    }
}

impl From<Vec<Value>> for List {
    fn from(items: Vec<Value>) -> Self {
        Self {
            items: Arc::new(items),
            len: WHOLE,
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
        self.as_slice().iter()
    }
}

impl PartialEq<Vec<Value>> for List {
    fn eq(&self, other: &Vec<Value>) -> bool {
        self.as_slice() == other.as_slice()
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

    #[test]
    fn a_prefix_shares_until_changed() {
        let whole = List::from(vec![Value::from(1), Value::from(2), Value::from(3)]);
        let mut start = whole.prefix(2);
        assert_eq!(start.as_slice(), &[Value::from(1), Value::from(2)]);
        assert_eq!(start, List::from(vec![Value::from(1), Value::from(2)]));
        assert!(!start.ptr_eq(&whole));
        assert!(start.ptr_eq(&start.clone()));
        assert!(whole.prefix(3).ptr_eq(&whole));
        assert_eq!(
            format!("{start:?}"),
            format!(
                "{:?}",
                whole.prefix(2).into_vec().into_iter().collect::<List>()
            )
        );
        // Changing the prefix copies its own items; the longer list is unchanged.
        start.push(Value::from(9));
        assert_eq!(
            start.as_slice(),
            &[Value::from(1), Value::from(2), Value::from(9)]
        );
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[2], Value::from(3));
        // A prefix that is the only owner is cut in place.
        let only = List::from(vec![Value::from(1), Value::from(2)]).prefix(1);
        assert_eq!(only.into_vec(), vec![Value::from(1)]);
        assert_eq!(whole.prefix(0).len(), 0);
        assert_eq!(
            whole.prefix(1).into_iter().collect::<Vec<_>>(),
            vec![Value::from(1)]
        );
    }
}
