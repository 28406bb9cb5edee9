//! Node caching in a run: before a step runs, its tasks whose node has a cache policy look
//! their input up in the graph's cache; a hit's writes become the task's (it does not run),
//! a miss runs and, once it succeeds, leaves its writes there.
//!
//! As in LangGraph 1.2, cached writes are saved as the task's writes on the checkpoint (so a
//! resumed step does not look them up again), and a cache that fails to answer never fails
//! the run: a failed read is a miss and a failed write is dropped, each logged.

use std::time::Duration;

use stategraph_checkpoint::Value;
use stategraph_checkpoint::cache::CacheKey;

use super::Run;
use crate::cache::{cached_writes, input_map, keep_writes};
use crate::error::GraphError;
use crate::state::State;
use crate::step::Task;
use crate::stream::UpdatesEvent;

/// The cache entries this step's tasks fill once they succeed: task id → entry key and TTL.
pub(super) type CacheKeys = std::collections::HashMap<String, (CacheKey, Option<Duration>)>;

impl<S: State> Run<'_, S> {
    /// Gives every task of `tasks` that has no writes yet and whose input is cached the cached
    /// writes, saved as its writes and announced on the `updates` stream as cached;
    /// remembers the keys of the others with a cache policy, for
    /// [`cache_result`](Self::cache_result).
    /// `values` are the step's (what its tasks read).
    pub(super) async fn match_cached(
        &mut self,
        tasks: &mut [Task],
        values: &crate::state::Values,
    ) -> Result<(), GraphError> {
        self.cache_keys.clear();
        let Some(cache) = self.graph.cache.clone() else {
            return Ok(());
        };
        let mut state_input: Option<Value> = None;
        let mut asked: Vec<(usize, CacheKey)> = Vec::new();
        for (i, task) in tasks.iter().enumerate() {
            if !task.writes.is_empty() {
                continue;
            }
            let Some(node) = self
                .graph
                .node_index
                .get(&task.name)
                .and_then(|&n| self.graph.nodes.get(n))
            else {
                continue;
            };
            let Some(policy) = &node.attempts.cache else {
                continue;
            };
            let input = match &task.input {
                // A `Send`'s task is keyed by its argument.
                Some(arg) => arg.clone(),
                None => state_input.get_or_insert_with(|| input_map(values)).clone(),
            };
            let key = policy.cache_key(node.function, Some(&task.name), &input);
            self.cache_keys
                .insert(task.id.clone(), (key.clone(), policy.ttl_value()));
            asked.push((i, key));
        }
        if asked.is_empty() {
            return Ok(());
        }
        let keys: Vec<CacheKey> = asked.iter().map(|(_, k)| k.clone()).collect();
        for (key, writes) in cached_writes(cache.as_ref(), &keys).await {
            for (i, _) in asked.iter().filter(|(_, k)| *k == key) {
                let Some(task) = tasks.get_mut(*i) else {
                    continue;
                };
                self.cache_keys.remove(&task.id);
                metrics::counter!("stategraph_cache_hits_total").increment(1);
                self.save_writes(task, &writes).await?;
                self.announce_cached(task, &writes);
                task.writes = writes.clone();
            }
        }
        Ok(())
    }

    /// Announces a task (or call) whose writes came from the cache, or from an earlier try of
    /// the step: its `updates` event, marked cached.
    pub(super) fn announce_cached(&self, task: &Task, writes: &[(String, Value)]) {
        if self.stream.emitter.is_none() {
            return;
        }
        // A failed task kept its error (handed to its handler): it has no update.
        if writes
            .first()
            .is_some_and(|(c, _)| c == stategraph_checkpoint::channels::ERROR)
        {
            return;
        }
        let returned = writes.iter().find(|(c, _)| c == crate::call::RETURN);
        let update: crate::state::Values = writes
            .iter()
            .filter(|(k, _)| self.graph.schema.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.emit_update(|| match returned {
            Some((_, value)) => UpdatesEvent::Returned {
                node: task.name.clone(),
                value: value.clone(),
                cached: true,
            },
            None => UpdatesEvent::Node {
                node: task.name.clone(),
                update: (!update.is_empty()).then_some(update),
                cached: true,
            },
        });
    }

    /// Leaves the writes of `task`, which just succeeded, in the cache, if it has a cache key.
    pub(super) async fn cache_result(&mut self, task: &Task, writes: &[(String, Value)]) {
        let (Some(cache), Some((key, ttl))) = (&self.graph.cache, self.cache_keys.remove(&task.id))
        else {
            return;
        };
        keep_writes(cache.as_ref(), key, ttl, writes, &task.name).await;
    }
}
