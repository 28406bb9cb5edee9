//! Ending a run: waiting for background saves, the final save of `exit` durability (with
//! its delta channel writes), and remembering the head the run ended on.

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph_checkpoint::{ChannelVersion, CheckpointSaver, Value};

use super::Run;
use crate::config::Durability;
use crate::error::GraphError;
use crate::state::State;
use crate::step::{Task, new_versions};
use crate::trace::{Op, saver_call};

/// Where an `exit`-durability delta write is stored: (synthetic task id, task path).
type ExitKey = (String, String);

impl<S: State> Run<'_, S> {
    /// Ends the run's saving: waits for background saves (`async`), or saves the final
    /// checkpoint — and, if the run stopped on an error or interrupt, its last step's writes —
    /// (`exit`).
    pub(super) async fn flush(&mut self, stopped_early: bool) -> Result<(), GraphError> {
        if let Some(writer) = self.save.writer.take() {
            writer.finish().await?;
        }
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        let pending = std::mem::take(&mut self.save.pending);
        if !pending.is_empty() {
            let put = saver.apply_batch(&pending);
            saver_call(saver.as_ref(), Op::Put, Some(pending.len()), put).await?;
        }
        if self.config.durability != Durability::Exit
            || self.checkpoint_config.checkpoint_id.is_none()
        {
            return Ok(());
        }
        let stored =
            if self.exit.parent.checkpoint_id.as_deref() == Some(self.checkpoint.id.as_str()) {
                // The run made no checkpoint (a finished thread continued, or its first step
                // failed): the one it started from is stored already and is never rewritten
                // under its id; what the step's finished tasks wrote belongs to it.
                self.exit.parent.clone()
            } else {
                self.put_exit_delta_writes(&saver).await?;
                let changed = new_versions(
                    &self.save.previous_versions,
                    &self.checkpoint.channel_versions,
                );
                let put = saver.put_if_latest(
                    &self.exit.parent,
                    &self.checkpoint,
                    &self.metadata,
                    &changed,
                    self.exit.expected.as_deref(),
                );
                saver_call(saver.as_ref(), Op::Put, Some(1), put).await?
            };
        if stopped_early {
            for (task_id, path, writes) in std::mem::take(&mut self.exit.writes) {
                let put = saver.put_writes(&stored, &writes, &task_id, &path);
                saver_call(saver.as_ref(), Op::PutWrites, Some(writes.len()), put).await?;
            }
        }
        Ok(())
    }

    /// `exit` durability: keeps this step's delta channel writes for the end of the run.
    pub(super) fn keep_exit_delta_writes(&mut self, tasks: &[Task], reused: &BTreeSet<String>) {
        let first = self.exit.first_step.is_none();
        if first {
            self.exit.first_step = Some(self.step);
        }
        let delta: BTreeSet<&str> = self.graph.delta_channels().map(|(k, _)| k).collect();
        for t in tasks {
            if first && reused.contains(&t.id) {
                continue;
            }
            for (ch, v) in &t.writes {
                if delta.contains(ch.as_str()) {
                    self.exit.delta_writes.push((
                        self.step,
                        t.id.clone(),
                        t.path_str(),
                        ch.clone(),
                        v.clone(),
                    ));
                }
            }
        }
    }

    /// `exit` durability, before the final checkpoint is put: snapshots the delta channels
    /// that are due (or cannot be rebuilt from writes on the checkpoint the run started
    /// from), and stores the others' writes on that checkpoint under LangGraph's synthetic
    /// task ids and paths, which keep them in step order.
    async fn put_exit_delta_writes(
        &mut self,
        saver: &Arc<dyn CheckpointSaver>,
    ) -> Result<(), GraphError> {
        if self.graph.delta_channels().next().is_none() {
            return Ok(());
        }
        let mut forced = self.delta.forced.clone();
        let loaded_latest =
            self.exit.expected.is_some() && self.exit.expected == self.exit.parent.checkpoint_id;
        if self.exit.parent.checkpoint_id.is_none() || !loaded_latest {
            // No checkpoint to store the writes on, or one whose other children read them.
            forced.extend(self.exit.delta_writes.iter().map(|w| w.3.clone()));
        }
        let step = crate::delta::StepDelta {
            previous: &self.delta.counters,
            updated: &BTreeSet::new(),
            forced: &forced,
            stored: &self.save.previous_versions,
            saved: true,
            // Every step of the run was counted as it ended: decide on those counts.
            count: false,
        };
        let next = |cur: Option<&ChannelVersion>| saver.get_next_version(cur);
        let plan = self
            .graph
            .plan_snapshots(&mut self.checkpoint, &self.channels, &step, &next);
        for ch in &plan.snapshot {
            if let Some(v) = self.channels.get(ch.as_str()).and_then(|c| c.get()) {
                self.checkpoint
                    .channel_values
                    .insert(ch.clone(), crate::channel::snapshot_of(&v));
            }
        }
        crate::delta::set_counters(&mut self.metadata, &plan.counters);
        self.delta.counters = plan.counters;
        // (synthetic task id, task path) → the writes stored under it, in order.
        let mut grouped: Vec<(ExitKey, Vec<(String, Value)>)> = Vec::new();
        for (step, tid, path, ch, v) in std::mem::take(&mut self.exit.delta_writes) {
            if plan.snapshot.contains(&ch) {
                continue;
            }
            let key = if tid == stategraph_checkpoint::NULL_TASK_ID {
                (crate::delta::exit_task_id(step, &tid), String::new())
            } else if Some(step) == self.exit.first_step {
                (crate::delta::exit_task_id(step, &tid), path)
            } else {
                (
                    crate::delta::exit_late_task_id(step, &tid),
                    format!("~~{step:010}{path}"),
                )
            };
            match grouped.iter_mut().find(|(k, _)| *k == key) {
                Some((_, entries)) => entries.push((ch, v)),
                None => grouped.push((key, vec![(ch, v)])),
            }
        }
        for ((tid, path), entries) in grouped {
            saver
                .put_writes(&self.exit.parent, &entries, &tid, &path)
                .await?;
        }
        Ok(())
    }

    /// Tells the graph's head cache what this run ended on (its last saved checkpoint).
    pub(super) fn remember_head(&mut self) {
        if self.saver.is_none() {
            return;
        }
        let Some(id) = self.checkpoint_config.checkpoint_id.clone() else {
            return;
        };
        let rebuilt = self
            .graph
            .delta_channels()
            .filter_map(|(k, _)| Some((k.to_owned(), self.channels.get(k)?.get()?)))
            .collect();
        let head = crate::head::Head {
            checkpoint_id: id,
            rebuilt,
            typed: self.env.typed.take(),
        };
        let cc = &self.checkpoint_config;
        self.graph.head.put(&cc.thread_id, &cc.checkpoint_ns, head);
    }
}
