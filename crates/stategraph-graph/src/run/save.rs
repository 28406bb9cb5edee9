//! Saving as the run goes: creating checkpoints, and saving them and tasks' writes by
//! durability mode (`sync` at once; `async` queued for a background writer; `exit` kept
//! until the run ends).

use std::sync::Arc;

use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, SaveOp, Value,
};

use tracing::{Instrument, Span};

use super::Run;
use crate::config::Durability;
use crate::error::GraphError;
use crate::state::State;
use crate::step::{Task, ValuesFrom, create_checkpoint, new_versions};
use crate::trace::{Op, saver_call};

/// A background save that panicked or was cancelled.
fn join_error(e: tokio::task::JoinError) -> GraphError {
    GraphError::Checkpoint(stategraph_checkpoint::Error::backend(
        "graph",
        "a background checkpoint save did not complete",
        e,
    ))
}

/// The background saver of `async` durability: applies the batches of saves the run hands
/// it, in order, merging whatever queued up while the previous batch was being written (one
/// transaction for many steps where the saver supports it — group commit).
pub(super) struct BackgroundWriter {
    queue: tokio::sync::mpsc::UnboundedSender<(Vec<SaveOp>, Span)>,
    handle: tokio::task::JoinHandle<Result<(), GraphError>>,
}

impl BackgroundWriter {
    /// Starts the writer; it holds `turn` (the thread's queue turn, if the run has one) until
    /// everything handed to it is committed, even if the run itself is dropped first.
    fn start(
        saver: Arc<dyn CheckpointSaver>,
        turn: Option<Arc<tokio::sync::OwnedMutexGuard<()>>>,
    ) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Vec<SaveOp>, Span)>();
        let handle = tokio::spawn(async move {
            let _turn = turn;
            while let Some((mut batch, parent)) = rx.recv().await {
                while let Ok((more, _)) = rx.try_recv() {
                    batch.extend(more);
                }
                // Under the step that handed the first of them over.
                let rows = Some(batch.len());
                let put = saver_call(saver.as_ref(), Op::Put, rows, saver.apply_batch(&batch));
                put.instrument(parent).await?;
            }
            Ok(())
        });
        Self { queue, handle }
    }

    /// Waits until everything queued is saved; the first error, if any.
    pub(super) async fn finish(self) -> Result<(), GraphError> {
        drop(self.queue);
        self.handle.await.map_err(join_error)?
    }
}

impl<S: State> Run<'_, S> {
    /// LangGraph's `_put_checkpoint`: create the next checkpoint from the channels, save it
    /// with the versions that moved, and advance the step.
    pub(super) async fn put_checkpoint(
        &mut self,
        source: CheckpointSource,
    ) -> Result<(), GraphError> {
        let exit = self.config.durability == Durability::Exit;
        let plan = {
            let forced = self.delta.forced.clone();
            let saver = self.saver.clone();
            let next = move |cur: Option<&ChannelVersion>| match &saver {
                Some(s) => s.get_next_version(cur),
                None => ChannelVersion::Int(cur.map_or(0, ChannelVersion::counter) + 1),
            };
            let updated = self.updated_channels.clone().unwrap_or_default();
            let step = crate::delta::StepDelta {
                previous: &self.delta.counters,
                updated: &updated,
                forced: &forced,
                stored: &self.save.previous_versions,
                // With `exit` durability the counters only count until the run ends.
                saved: !exit,
                count: true,
            };
            self.graph
                .plan_snapshots(&mut self.checkpoint, &self.channels, &step, &next)
        };
        let values = if self.saver.is_some() {
            ValuesFrom::Channels(&self.channels)
        } else {
            ValuesFrom::Skip
        };
        create_checkpoint(
            &mut self.checkpoint,
            values,
            self.step,
            self.updated_channels.as_ref(),
            &plan.snapshot,
        );
        if self.saver.is_some() && !exit {
            for ch in &plan.snapshot {
                self.delta.forced.remove(ch);
            }
        }
        self.delta.counters = plan.counters;
        let mut metadata = CheckpointMetadata::new(source, self.step);
        metadata.parents = Some(self.env.parents.clone());
        self.config.merge_into_metadata(&mut metadata);
        crate::delta::set_counters(&mut metadata, &self.delta.counters);
        self.metadata = metadata.clone();
        let parent = self
            .checkpoint_config
            .checkpoint_id
            .is_some()
            .then(|| self.checkpoint_config.clone());
        if let Some(saver) = self.saver.clone() {
            let stored = CheckpointConfig {
                checkpoint_id: Some(self.checkpoint.id.clone()),
                ..self.checkpoint_config.clone()
            };
            match self.config.durability {
                // Nothing is saved until the run ends.
                Durability::Exit => {}
                Durability::Sync => {
                    let changed = self.versions_moved();
                    let put = saver.put_if_latest(
                        &self.checkpoint_config,
                        &self.checkpoint,
                        &metadata,
                        &changed,
                        self.save.expected_latest.as_deref(),
                    );
                    saver_call(saver.as_ref(), Op::Put, Some(1), put).await?;
                }
                Durability::Async => {
                    // Saved in the background, in order, while the run goes on with the
                    // next step. The values move to the save instead of being copied: the
                    // loop reads values from its channels, never from its checkpoint (only
                    // `exit` keeps them, for the save at the end).
                    let new_versions = self.versions_moved();
                    let values = std::mem::take(&mut self.checkpoint.channel_values);
                    let op = SaveOp::Put {
                        config: self.checkpoint_config.clone(),
                        checkpoint: Box::new(Checkpoint {
                            channel_values: values,
                            ..self.checkpoint.clone()
                        }),
                        metadata,
                        new_versions,
                        expected_latest: self.save.expected_latest.clone(),
                    };
                    self.enqueue(op);
                }
            }
            self.save.expected_latest = stored.checkpoint_id.clone();
            self.checkpoint_config = stored;
            self.stream.unannounced = Some(parent);
        }
        self.step += 1;
        Ok(())
    }

    /// The channel versions that moved since the last saved checkpoint (what a put stores
    /// blobs for); the current ones become the last saved.
    fn versions_moved(&mut self) -> ChannelVersions {
        let versions = self.checkpoint.channel_versions.clone();
        let moved = new_versions(&self.save.previous_versions, &versions);
        self.save.previous_versions = versions;
        moved
    }

    /// Queues a save (`async` durability); it is handed to the background writer when the
    /// run next waits, or applied when the run ends.
    fn enqueue(&mut self, op: SaveOp) {
        self.save.pending.push(op);
    }

    /// Hands the queued saves to the background writer (started on first use), so they are
    /// written while the run waits. A writer that stopped on an error reports that error
    /// here (or when the run flushes).
    pub(super) async fn hand_over_saves(&mut self) -> Result<(), GraphError> {
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        if self.save.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.save.pending);
        let writer = self
            .save
            .writer
            .get_or_insert_with(|| BackgroundWriter::start(saver, self.save.turn.clone()));
        if writer.queue.send((batch, Span::current())).is_ok() {
            return Ok(());
        }
        match self.save.writer.take() {
            Some(stopped) => stopped.finish().await,
            None => Ok(()),
        }
    }

    /// Saves a task's writes against the current checkpoint as soon as it finishes (kept in
    /// memory until the end with `exit` durability).
    pub(super) async fn save_writes(
        &mut self,
        task: &Task,
        writes: &[(String, Value)],
    ) -> Result<(), GraphError> {
        let Some(saver) = &self.saver else {
            return Ok(());
        };
        if self.checkpoint_config.checkpoint_id.is_none() {
            return Ok(());
        }
        let kept;
        let writes = match self.graph.untracked_writes(writes) {
            Some(k) => {
                kept = k;
                kept.as_slice()
            }
            None => writes,
        };
        if self.config.durability == Durability::Exit {
            self.exit
                .writes
                .push((task.id.clone(), task.path_str(), writes.to_vec()));
            return Ok(());
        }
        if self.config.durability == Durability::Async {
            // Queued behind the checkpoint they belong to: never saved before it (and never
            // saved if its save lost a race).
            let op = SaveOp::Writes {
                config: self.checkpoint_config.clone(),
                writes: writes.to_vec(),
                task_id: task.id.clone(),
                task_path: task.path_str(),
            };
            self.enqueue(op);
            return Ok(());
        }
        let rows = Some(writes.len());
        let path = task.path_str();
        let put = saver.put_writes(&self.checkpoint_config, writes, &task.id, &path);
        saver_call(saver.as_ref(), Op::PutWrites, rows, put).await?;
        Ok(())
    }
}
