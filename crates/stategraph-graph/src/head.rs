//! The head cache: what a graph knows about the checkpoints its own runs ended on.
//!
//! A run on a thread starts from the thread's newest checkpoint. When that checkpoint is the
//! one this graph's previous run on the thread ended on — the usual case for a conversation
//! served by one process — two things are already in memory that a read would otherwise
//! rebuild from the database:
//!
//! - the values of the keys a checkpoint does not store in full (delta channels), which
//!   reading rebuilds by walking the thread's history (see `hydrate`);
//! - the typed state the last node saw, from which the next one is built by converting only
//!   what changed ([`State::from_values_reusing`]).
//!
//! Entries are keyed by thread and namespace and hold the id of the checkpoint they describe;
//! a checkpoint id names one immutable checkpoint, so an entry is used only for exactly that
//! checkpoint, whoever wrote anything since (another process moving the thread on makes a
//! newer checkpoint, which misses). The cache holds at most `capacity` threads, dropping the
//! least recently used.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use stategraph_checkpoint::{CheckpointId, Value};

use crate::state::{State, Values};

/// The typed state last built on a thread, with the values it was built from.
pub(crate) type TypedState<S> = (Arc<S>, Arc<Values>);

/// What is known about one thread's checkpoint.
pub(crate) struct Head<S> {
    /// The checkpoint described.
    pub(crate) checkpoint_id: CheckpointId,
    /// The values of the keys reading rebuilds from history (delta channels).
    pub(crate) rebuilt: BTreeMap<String, Value>,
    /// The typed state a node last saw, built from values equal to the checkpoint's.
    pub(crate) typed: Option<TypedState<S>>,
}

/// The entries: a use counter, and (thread, namespace) → (last use, head).
struct Entries<S> {
    tick: u64,
    heads: HashMap<(String, String), (u64, Head<S>)>,
}

/// (thread, namespace) → head, least recently used dropped first.
pub(crate) struct HeadCache<S> {
    capacity: usize,
    entries: Mutex<Entries<S>>,
}

impl<S: State> HeadCache<S> {
    /// How many threads it holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(Entries {
                tick: 0,
                heads: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<S>> {
        // Nothing panics while holding the lock; a poisoned one still holds whole entries.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the entry of `thread`/`ns` if it describes `checkpoint_id` (a run about to
    /// start from it owns its typed state from now on).
    pub(crate) fn take(&self, thread: &str, ns: &str, checkpoint_id: &str) -> Option<Head<S>> {
        if self.capacity == 0 {
            return None;
        }
        let mut guard = self.lock();
        let key = (thread.to_owned(), ns.to_owned());
        match guard.heads.get(&key) {
            Some((_, head)) if head.checkpoint_id == checkpoint_id => {
                guard.heads.remove(&key).map(|(_, h)| h)
            }
            _ => None,
        }
    }

    /// The rebuilt value of `channel` at `checkpoint_id`, if known (reads other than a run's
    /// start: `get_state`).
    pub(crate) fn rebuilt(
        &self,
        thread: &str,
        ns: &str,
        checkpoint_id: &str,
        channel: &str,
    ) -> Option<Value> {
        if self.capacity == 0 {
            return None;
        }
        let guard = self.lock();
        let (_, head) = guard.heads.get(&(thread.to_owned(), ns.to_owned()))?;
        (head.checkpoint_id == checkpoint_id)
            .then(|| head.rebuilt.get(channel).cloned())
            .flatten()
    }

    /// Records what a run that ended on `head.checkpoint_id` knows.
    pub(crate) fn put(&self, thread: &str, ns: &str, head: Head<S>) {
        if self.capacity == 0 {
            return;
        }
        let mut guard = self.lock();
        guard.tick += 1;
        let tick = guard.tick;
        guard
            .heads
            .insert((thread.to_owned(), ns.to_owned()), (tick, head));
        if guard.heads.len() > self.capacity {
            let oldest = guard
                .heads
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                guard.heads.remove(&k);
            }
        }
    }
}
