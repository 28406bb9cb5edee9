//! Rebuilding a checkpoint's lost values from its parent and the writes stored against the
//! parent.
//!
//! Every checkpoint a run saves is its parent's state with the writes of the tasks that ran
//! from the parent applied — and those writes stay in the writes table, keyed by the parent.
//! So when a checkpoint's values are lost (blob rows deleted, a value column wiped), they can
//! be computed again: restore the parent's channels, replay its stored writes through this
//! graph's reducers, and keep what the checkpoint records a version for.
//!
//! [`CompiledGraph::plan_repair`] computes this without writing; [`CompiledGraph::apply_repair`]
//! writes the missing values back under the checkpoint's own id, versions and metadata. Only
//! values that are *missing* are written: a stored value that differs from the recomputation is
//! reported and left alone, never overwritten (the recomputation can only be as right as the
//! reducers it ran with).

use std::collections::BTreeMap;

use stategraph_checkpoint::{
    CheckpointConfig, CheckpointSource, CheckpointTuple, NULL_TASK_ID, Value,
};

use crate::compiled::CompiledGraph;
use crate::config::RunConfig;
use crate::error::GraphError;
use crate::state::State;
use crate::step::{INTERRUPT, Task, apply_writes, channels_from_checkpoint};

/// What one channel of the repaired checkpoint looks like against its recomputation.
#[derive(Clone, Debug, PartialEq)]
pub enum ChannelRepair {
    /// Missing from the checkpoint: the recomputed value is written back.
    Restore(Value),
    /// Stored and equal to the recomputation.
    Intact,
    /// Stored but different from the recomputation; left alone.
    Differs {
        /// The stored value.
        stored: Value,
        /// The recomputed value.
        rebuilt: Value,
    },
}

/// The outcome of [`CompiledGraph::plan_repair`]: what a repair would write.
#[derive(Clone, Debug)]
pub struct RepairPlan {
    /// The checkpoint as stored.
    pub target: CheckpointTuple,
    /// Its parent, whose values and writes the recomputation started from.
    pub parent: CheckpointConfig,
    /// Every channel the recomputation produced a value for, by name.
    pub channels: BTreeMap<String, ChannelRepair>,
}

impl RepairPlan {
    /// The channels a repair writes back, with their values.
    pub fn restored(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.channels.iter().filter_map(|(k, c)| match c {
            ChannelRepair::Restore(v) => Some((k.as_str(), v)),
            _ => None,
        })
    }

    /// Whether there is anything to write.
    pub fn is_needed(&self) -> bool {
        self.restored().next().is_some()
    }
}

/// Whether a stored write came from `update_state` (its task path starts at `__interrupt__`).
fn is_update_write(task_path: &str) -> bool {
    task_path.starts_with(&format!("~{INTERRUPT}"))
}

impl<S: State> CompiledGraph<S> {
    /// Recomputes the values of the checkpoint `config` names (the latest when it names none)
    /// from its parent's values and the writes stored against the parent, with this graph's
    /// reducers, and compares them with what is stored. Writes nothing.
    ///
    /// Loop checkpoints replay the parent's task writes, update checkpoints the parent's
    /// `update_state` writes, forks copy the parent. A checkpoint without a parent (the first
    /// of its thread) is a [`GraphError::CannotRepair`]: there is nothing to rebuild it from.
    pub async fn plan_repair(&self, config: &RunConfig) -> Result<RepairPlan, GraphError> {
        let saver = self.saver()?;
        let thread = self.thread_of(config)?;
        let at = config.checkpoint_config(thread);
        let target = saver
            .get_tuple(&at)
            .await?
            .ok_or_else(|| GraphError::NotFound {
                what: match &at.checkpoint_id {
                    Some(id) => format!("checkpoint `{id}` in thread `{thread}`"),
                    None => format!("thread `{thread}`"),
                },
            })?;
        let id = target.checkpoint.id.clone();
        let parent_config =
            target
                .parent_config
                .clone()
                .ok_or_else(|| GraphError::CannotRepair {
                    checkpoint: id.clone(),
                    reason: format!(
                        "it is the first of thread `{thread}`: it has no parent to rebuild it from"
                    ),
                })?;
        let mut parent =
            saver
                .get_tuple(&parent_config)
                .await?
                .ok_or_else(|| GraphError::CannotRepair {
                    checkpoint: id.clone(),
                    reason: format!(
                        "its parent ({}) is not stored",
                        parent_config.checkpoint_id.as_deref().unwrap_or("?")
                    ),
                })?;

        // The parent's delta channels are rebuilt from their history; the target is compared
        // as stored, so what it lacks shows.
        self.hydrate(saver.as_ref(), &mut parent).await?;
        let mut checkpoint = (*parent.checkpoint).clone();
        let mut channels = channels_from_checkpoint(&self.channel_specs, &checkpoint);
        let source = target.metadata.source;
        if source != Some(CheckpointSource::Fork) {
            let updates = source == Some(CheckpointSource::Update);
            let mut tasks: Vec<Task> = Vec::new();
            if !updates {
                self.apply_null_writes(
                    Some(saver.as_ref()),
                    &mut checkpoint,
                    &mut channels,
                    &parent.pending_writes,
                )?;
                let step = parent.metadata.step.unwrap_or(-1) + 1;
                tasks = crate::step::prepare_next_tasks(
                    &checkpoint,
                    &channels,
                    &self.node_triggers(),
                    step,
                    &parent.config.checkpoint_ns,
                    None,
                );
            }
            let recorded = parent
                .pending_writes
                .iter()
                .any(|w| is_update_write(&w.task_path));
            if updates && !recorded {
                return Err(GraphError::CannotRepair {
                    checkpoint: id,
                    reason: "it is an update_state on a checkpoint the thread had moved past, \
                             whose writes are not recorded"
                        .into(),
                });
            }
            // The writes of each task, in the order they were stored.
            for w in &parent.pending_writes {
                if w.task_id == NULL_TASK_ID || is_update_write(&w.task_path) != updates {
                    continue;
                }
                let write = (w.channel.clone(), w.value.clone());
                match tasks.iter_mut().find(|t| t.id == w.task_id) {
                    Some(task) => task.writes.push(write),
                    None => tasks.push(Task {
                        id: w.task_id.clone(),
                        name: w.task_id.clone(),
                        path: vec![w.task_path.clone()].into(),
                        triggers: if updates {
                            vec![INTERRUPT.to_owned()].into()
                        } else {
                            Vec::new().into()
                        },
                        writes: vec![write],
                        input: None,
                    }),
                }
            }
            let ran: Vec<&Task> = tasks.iter().filter(|t| !t.writes.is_empty()).collect();
            apply_writes(
                &mut checkpoint,
                &mut channels,
                &ran,
                None,
                &self.trigger_channels,
            )?;
        }

        // A delta channel's value is left out of most checkpoints by design: this graph's
        // delta keys, and those the checkpoint's delta counters name (a reader graph's view).
        let counted = crate::delta::counters_of(&target.metadata);
        let mut report = BTreeMap::new();
        for (name, channel) in channels.iter() {
            if !target.checkpoint.channel_versions.contains_key(name)
                || channel.is_delta()
                || counted.contains_key(&**name)
            {
                continue;
            }
            let Some(rebuilt) = channel.checkpoint() else {
                continue;
            };
            let status = match target.checkpoint.channel_values.get(&**name) {
                None => ChannelRepair::Restore(rebuilt),
                Some(stored) if *stored == rebuilt => ChannelRepair::Intact,
                Some(stored) => ChannelRepair::Differs {
                    stored: stored.clone(),
                    rebuilt,
                },
            };
            report.insert(name.to_string(), status);
        }
        Ok(RepairPlan {
            target,
            parent: parent_config,
            channels: report,
        })
    }

    /// Writes the values `plan` restores back into its checkpoint (same id, versions and
    /// metadata), and returns the checkpoint's config. Does nothing when nothing is missing.
    pub async fn apply_repair(&self, plan: &RepairPlan) -> Result<CheckpointConfig, GraphError> {
        if !plan.is_needed() {
            return Ok(plan.target.config.clone());
        }
        let saver = self.saver()?;
        let mut checkpoint = (*plan.target.checkpoint).clone();
        let mut versions = stategraph_checkpoint::ChannelVersions::new();
        for (name, value) in plan.restored() {
            checkpoint
                .channel_values
                .insert(name.to_owned(), value.clone());
            if let Some(v) = checkpoint.channel_versions.get(name) {
                versions.insert(name.to_owned(), v.clone());
            }
        }
        Ok(saver
            .put(&plan.parent, &checkpoint, &plan.target.metadata, &versions)
            .await?)
    }
}
