//! A run's first step: applying its input, or resuming (answers to interrupts, replays).

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph_checkpoint::{
    CheckpointConfig, CheckpointSource, Map, PendingWrite, Value, channels as reserved,
};

use super::{ResumeInput, Run, is_control};
use crate::error::GraphError;
use crate::graph::START;
use crate::interrupt::{Interrupt, Resume};
use crate::state::State;
use crate::step::{INPUT, INTERRUPT, Task};
use crate::stream::{Raw, StreamMode};

impl<S: State> Run<'_, S> {
    /// New input: discard the tasks pending on the loaded checkpoint, write the input to
    /// `__start__`, save the `input` checkpoint.
    pub(super) async fn first_input(&mut self, input: Map) -> Result<(), GraphError> {
        let discard = self.next_tasks();
        let input_task = Task {
            id: String::new(),
            name: INPUT.to_owned(),
            path: Vec::new(),
            triggers: Vec::new(),
            writes: vec![(START.to_owned(), Value::Map(input))],
            input: None,
        };
        let mut all: Vec<&Task> = discard.iter().collect();
        all.push(&input_task);
        let updated = self.apply(&all)?;
        self.updated_channels = Some(updated);
        self.pending_writes.clear();
        // The loaded checkpoint's stored writes are not applied (its pending tasks are
        // discarded), yet a walk from the new checkpoints would replay them.
        self.delta
            .forced
            .extend(std::mem::take(&mut self.delta.loaded_writes));
        self.put_checkpoint(CheckpointSource::Input).await
    }

    /// No input: continue from the loaded checkpoint, applying writes that belong to no task.
    ///
    /// With an explicit `checkpoint_id` this is a replay (time travel): finished tasks run
    /// again instead of reusing their saved writes, and unless the checkpoint is the thread's
    /// latest `update`/`fork` checkpoint, a `fork` copy is written first so the replay forms a
    /// new branch next to the old one.
    pub(super) async fn first_resume(
        &mut self,
        resume: Option<ResumeInput>,
    ) -> Result<(), GraphError> {
        if self.checkpoint.channel_versions.is_empty() {
            return Err(GraphError::NothingToResume);
        }
        let answering = resume.is_some();
        match resume {
            Some(ResumeInput::Inherited(source)) => self.env.resume = source,
            Some(ResumeInput::Answer(Resume::ById(map))) => {
                self.env.resume.by_id = Some(Arc::new(map));
            }
            Some(ResumeInput::Answer(Resume::Value(v))) => {
                let pending = self.pending_interrupts();
                if pending.len() > 1 {
                    return Err(GraphError::AmbiguousResume { pending });
                }
                let write = vec![(reserved::RESUME.to_owned(), v.clone())];
                if let Some(saver) = &self.saver {
                    saver
                        .put_writes(
                            &self.checkpoint_config,
                            &write,
                            stategraph_checkpoint::NULL_TASK_ID,
                            "",
                        )
                        .await?;
                }
                // The saved answer replaces an earlier one (the write is an upsert).
                self.pending_writes.retain(|w| {
                    !(w.task_id == stategraph_checkpoint::NULL_TASK_ID
                        && w.channel == reserved::RESUME)
                });
                self.pending_writes.push(PendingWrite {
                    task_id: stategraph_checkpoint::NULL_TASK_ID.to_owned(),
                    channel: reserved::RESUME.to_owned(),
                    value: v,
                    task_path: String::new(),
                    idx: -4,
                });
            }
            None => {}
        }
        // The answer written without a task waits for the first interrupt that asks.
        if let Some(w) = self.pending_writes.iter().find(|w| {
            w.task_id == stategraph_checkpoint::NULL_TASK_ID && w.channel == reserved::RESUME
        }) {
            let mut null = self
                .env
                .resume
                .null
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if null.is_none() {
                *null = Some(w.value.clone());
            }
        }
        let null_writes: Vec<(String, Value)> = self
            .pending_writes
            .iter()
            .filter(|w| w.task_id == stategraph_checkpoint::NULL_TASK_ID)
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        if !null_writes.is_empty() {
            let task = Task {
                id: String::new(),
                name: INPUT.to_owned(),
                path: Vec::new(),
                triggers: Vec::new(),
                writes: null_writes,
                input: None,
            };
            self.apply(&[&task])?;
        }
        let seen = self.checkpoint.channel_versions.clone();
        self.checkpoint
            .versions_seen
            .insert(INTERRUPT.to_owned(), seen);
        if self.config.checkpoint_id.is_some() && !answering {
            self.replay().await?;
        }
        // A resumed run streams the state it resumes from, as LangGraph does.
        if let Some(e) = &self.stream.emitter {
            let values = self.graph.read_values(&self.channels);
            e.emit(StreamMode::Values, || Raw::values(values));
        }
        Ok(())
    }

    /// Ids of the interrupts raised on the current checkpoint by tasks that have not finished.
    fn pending_interrupts(&self) -> Vec<String> {
        let finished: BTreeSet<&str> = self
            .pending_writes
            .iter()
            .filter(|w| !is_control(&w.channel))
            .map(|w| w.task_id.as_str())
            .collect();
        self.pending_writes
            .iter()
            .filter(|w| w.channel == reserved::INTERRUPT && !finished.contains(w.task_id.as_str()))
            .flat_map(|w| Interrupt::all_from(&w.value))
            .map(|i| i.id)
            .collect()
    }

    async fn replay(&mut self) -> Result<(), GraphError> {
        // Stored writes of the addressed checkpoint are not reused: everything re-runs (and
        // delta channels they touch snapshot, as a walk would replay them).
        self.pending_writes.clear();
        self.delta
            .forced
            .extend(std::mem::take(&mut self.delta.loaded_writes));
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        let here = self.checkpoint_config.clone();
        let latest = saver
            .get_tuple(&CheckpointConfig {
                checkpoint_id: None,
                ..here.clone()
            })
            .await?;
        let this = saver.get_tuple(&here).await?;
        let superseded =
            latest.is_none_or(|l| Some(&l.checkpoint.id) != here.checkpoint_id.as_ref());
        let source = this.and_then(|t| t.metadata.source);
        if superseded
            || matches!(
                source,
                Some(CheckpointSource::Input | CheckpointSource::Loop)
            )
        {
            self.updated_channels = None;
            self.put_checkpoint(CheckpointSource::Fork).await?;
        }
        Ok(())
    }
}
