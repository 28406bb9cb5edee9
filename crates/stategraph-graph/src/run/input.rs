//! A run's first step: applying its input, or resuming (answers to interrupts, replays).

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph_checkpoint::{
    CheckpointConfig, CheckpointSource, PendingWrite, Value, channels as reserved,
};

use crate::trace::Op;

use super::{CommandWrites, ResumeInput, Run, is_control};
use crate::error::GraphError;
use crate::graph::START;
use crate::interrupt::{Interrupt, Resume};
use crate::state::State;
use crate::step::{INPUT, INTERRUPT, Task};
use crate::stream::{Raw, StreamMode};

impl<S: State> Run<'_, S> {
    /// New input: discard the tasks pending on the loaded checkpoint, write the input to
    /// `__start__`, save the `input` checkpoint.
    pub(super) async fn first_input(&mut self, input: Value) -> Result<(), GraphError> {
        let discard = self.next_tasks();
        let input_task = Task {
            id: String::new(),
            name: INPUT.to_owned(),
            path: Arc::from([]),
            triggers: Vec::new().into(),
            writes: vec![(START.to_owned(), input)],
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
        command: CommandWrites,
    ) -> Result<(), GraphError> {
        if self.checkpoint.channel_versions.is_empty() {
            return Err(GraphError::NothingToResume);
        }
        let answering = resume.is_some();
        // A replay (an addressed checkpoint, nothing answered) may fork; a command's writes
        // then go into the fork instead of onto the checkpoint it addresses.
        let replaying = self.config.checkpoint_id.is_some() && !answering;
        let forks = replaying && self.replay_forks().await?;
        let mut writes = command.goto;
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
                writes.push((reserved::RESUME.to_owned(), v));
            }
            None => {}
        }
        writes.extend(command.update);
        // Delta channels a command writes are snapshotted in the next checkpoint.
        self.delta.forced.extend(
            writes
                .iter()
                .filter(|(c, _)| !is_control(c))
                .map(|(c, _)| c.clone()),
        );
        let mut carried = Vec::new();
        if forks {
            carried = writes;
        } else if !writes.is_empty() {
            self.save_null_writes(writes).await?;
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
            .chain(carried)
            .collect();
        if !null_writes.is_empty() {
            let task = Task {
                id: String::new(),
                name: INPUT.to_owned(),
                path: Arc::from([]),
                triggers: Vec::new().into(),
                writes: null_writes,
                input: None,
            };
            self.apply(&[&task])?;
        }
        let seen = self.checkpoint.channel_versions.clone();
        self.checkpoint
            .versions_seen
            .insert(INTERRUPT.to_owned(), seen);
        if replaying {
            self.replay(forks).await?;
        }
        // A resumed run streams the state it resumes from, as LangGraph does.
        if let Some(e) = &self.stream.emitter {
            e.emit(StreamMode::Values, || {
                let values = self.graph.read_values(&self.channels);
                Raw::values(values, self.graph.output_channel(), Vec::new())
            });
        }
        Ok(())
    }

    /// Saves writes without a task against the loaded checkpoint, as LangGraph does: the
    /// checkpoint's earlier plain writes without a task are saved again ahead of them (so
    /// each keeps its index, and the new ones take the next), special writes (a resume
    /// answer) go last and replace earlier ones.
    async fn save_null_writes(
        &mut self,
        mut writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError> {
        let null = stategraph_checkpoint::NULL_TASK_ID;
        let special = |c: &str| stategraph_checkpoint::special_write_idx(c).is_some();
        self.pending_writes
            .retain(|w| w.task_id != null || !special(&w.channel));
        writes.sort_by_key(|(c, _)| special(c));
        let mut earlier: Vec<&PendingWrite> = self
            .pending_writes
            .iter()
            .filter(|w| w.task_id == null)
            .collect();
        earlier.sort_by_key(|w| w.idx);
        let offset = earlier.len();
        let mut to_save: Vec<(String, Value)> = earlier
            .into_iter()
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        to_save.extend(writes.iter().cloned());
        if let Some(saver) = &self.saver {
            let put = saver.put_writes(&self.checkpoint_config, &to_save, null, "");
            crate::trace::saver_call(saver.as_ref(), Op::PutWrites, Some(to_save.len()), put)
                .await?;
        }
        for (i, (channel, value)) in writes.into_iter().enumerate() {
            self.pending_writes.push(PendingWrite {
                task_id: null.to_owned(),
                idx: stategraph_checkpoint::write_idx(&channel, offset + i),
                channel,
                value,
                task_path: String::new(),
            });
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
        // A task called from a node stores its interrupt, and the caller it stopped stores
        // the same one again: one question, asked once.
        let mut ids: Vec<String> = Vec::new();
        for w in self
            .pending_writes
            .iter()
            .filter(|w| w.channel == reserved::INTERRUPT && !finished.contains(w.task_id.as_str()))
        {
            for i in Interrupt::all_from(&w.value) {
                if !ids.contains(&i.id) {
                    ids.push(i.id);
                }
            }
        }
        ids
    }

    /// Whether replaying the addressed checkpoint writes a `fork` first: unless it is the
    /// thread's latest `update`/`fork` checkpoint, the replay forms a new branch.
    async fn replay_forks(&self) -> Result<bool, GraphError> {
        let Some(saver) = self.saver.clone() else {
            return Ok(false);
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
        Ok(superseded
            || matches!(
                source,
                Some(CheckpointSource::Input | CheckpointSource::Loop)
            ))
    }

    async fn replay(&mut self, forks: bool) -> Result<(), GraphError> {
        // Stored writes of the addressed checkpoint are not reused: everything re-runs (and
        // delta channels they touch snapshot, as a walk would replay them).
        self.pending_writes.clear();
        self.delta
            .forced
            .extend(std::mem::take(&mut self.delta.loaded_writes));
        if forks {
            self.updated_channels = None;
            self.put_checkpoint(CheckpointSource::Fork).await?;
        }
        Ok(())
    }
}
