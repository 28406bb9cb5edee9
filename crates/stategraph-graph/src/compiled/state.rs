//! Reading a thread: [`CompiledGraph::get_state`], its history and the snapshots they are made of.

use super::*;

impl<S: State> CompiledGraph<S> {
    /// The state of a thread at its latest checkpoint, or at `config.checkpoint_id`
    /// (LangGraph's `get_state(config)`).
    pub async fn get_state(&self, config: &RunConfig) -> Result<StateSnapshot, GraphError> {
        let saver = Arc::clone(self.saver()?);
        self.state_with(&saver, config, false).await
    }

    /// [`get_state`](Self::get_state) where the tasks of subgraph nodes carry the subgraph's
    /// own state, recursively (LangGraph's `get_state(config, subgraphs=True)`).
    pub async fn get_state_with_subgraphs(
        &self,
        config: &RunConfig,
    ) -> Result<StateSnapshot, GraphError> {
        let saver = Arc::clone(self.saver()?);
        self.state_with(&saver, config, true).await
    }

    pub(crate) async fn state_with(
        &self,
        saver: &Arc<dyn CheckpointSaver>,
        config: &RunConfig,
        subgraphs: bool,
    ) -> Result<StateSnapshot, GraphError> {
        let thread = self.thread_of(config)?;
        let address = config.checkpoint_config(thread);
        let mut saved = trace::saver_call(
            saver.as_ref(),
            Op::GetTuple,
            None,
            saver.get_tuple(&address),
        )
        .await?;
        if let Some(t) = saved.as_mut() {
            self.hydrate(saver.as_ref(), t).await?;
        }
        let mut snapshot = match saved {
            None => Ok(StateSnapshot {
                values: Values::new(),
                next: Vec::new(),
                config: None,
                metadata: None,
                created_at: None,
                parent_config: None,
                tasks: Vec::new(),
                interrupts: Vec::new(),
            }),
            Some(t) => self.snapshot(t, config.checkpoint_id.is_none(), &self.node_triggers()),
        }?;
        if subgraphs {
            let ns = snapshot
                .config
                .as_ref()
                .map(|c| c.checkpoint_ns.clone())
                .unwrap_or_default();
            for task in &mut snapshot.tasks {
                let Some(view) = self
                    .nodes
                    .iter()
                    .find(|n| n.name == task.name)
                    .and_then(|n| n.subgraph.clone())
                else {
                    continue;
                };
                let mut sub_config = config.clone();
                sub_config.checkpoint_id = None;
                sub_config.checkpoint_ns = if ns.is_empty() {
                    format!("{}:{}", task.name, task.id)
                } else {
                    format!("{ns}|{}:{}", task.name, task.id)
                };
                let sub = view.state(Arc::clone(saver), sub_config).await?;
                if sub.config.is_some() {
                    task.state = Some(Box::new(sub));
                }
            }
        }
        Ok(snapshot)
    }

    /// Every checkpoint of the thread `config` names, in its namespace, newest first
    /// (LangGraph's `get_state_history`); `options` filter by metadata, keep those before a
    /// checkpoint and limit the count. As in LangGraph, a `config.checkpoint_id` narrows the
    /// list to that one checkpoint (use [`HistoryOptions::before`] to list from a point on).
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>) -> Result<(), stategraph_graph::GraphError> {
    /// use stategraph_graph::{HistoryOptions, RunConfig};
    /// let config = RunConfig::thread("1");
    /// let last_updates = graph
    ///     .get_state_history(&config, HistoryOptions::new().filter("source", "update").limit(5))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_state_history(
        &self,
        config: &RunConfig,
        options: HistoryOptions,
    ) -> Result<Vec<StateSnapshot>, GraphError> {
        let saver = self.saver()?;
        let thread = self.thread_of(config)?;
        let HistoryOptions {
            filter,
            before,
            limit,
        } = options;
        let options = stategraph_checkpoint::ListOptions {
            thread_id: Some(thread.to_owned()),
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: config.checkpoint_id.clone(),
            filter,
            before,
            limit,
            skip_values: false,
        };
        let listed =
            trace::saver_call(saver.as_ref(), Op::List, None, saver.list(&options)).await?;
        let mut out = Vec::with_capacity(listed.len());
        let triggers = self.node_triggers();
        for mut t in listed {
            self.hydrate(saver.as_ref(), &mut t).await?;
            out.push(self.snapshot(t, false, &triggers)?);
        }
        Ok(out)
    }

    /// Applies the writes stored against a checkpoint by no task (`NULL_TASK_ID`: resume
    /// answers and command inputs' updates and routing), as the next run would before
    /// preparing its tasks (with the saver's versions, so that the routing schedules its
    /// nodes; without, only the values change).
    pub(crate) fn apply_null_writes(
        &self,
        saver: Option<&dyn CheckpointSaver>,
        checkpoint: &mut stategraph_checkpoint::Checkpoint,
        channels: &mut Channels,
        pending: &[stategraph_checkpoint::PendingWrite],
    ) -> Result<(), GraphError> {
        let writes: Vec<(String, Value)> = pending
            .iter()
            .filter(|w| w.task_id == NULL_TASK_ID)
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        if writes.is_empty() {
            return Ok(());
        }
        let input = Task {
            id: NULL_TASK_ID.to_owned(),
            name: INPUT.to_owned(),
            path: Arc::from([]),
            triggers: Vec::new().into(),
            writes,
            input: None,
        };
        let next = saver.map(|s| {
            move |cur: Option<&stategraph_checkpoint::ChannelVersion>| s.get_next_version(cur)
        });
        apply_writes(
            checkpoint,
            channels,
            &[&input],
            next.as_ref().map(|f| f as &crate::step::NextVersion<'_>),
            &self.trigger_channels,
        )?;
        Ok(())
    }

    /// LangGraph's `_prepare_state_snapshot`. `live` (latest state) applies the writes of
    /// finished tasks, drops them from `next` and keeps only unanswered interrupts; otherwise
    /// the snapshot is the step's record (values as the step began, every task, every
    /// interrupt raised). `triggers` are [`node_triggers`](Self::node_triggers)' (made
    /// once for a listing's snapshots).
    pub(crate) fn snapshot(
        &self,
        saved: CheckpointTuple,
        live: bool,
        triggers: &[NodeTriggers<'_>],
    ) -> Result<StateSnapshot, GraphError> {
        let CheckpointTuple {
            config,
            mut checkpoint,
            metadata,
            parent_config,
            pending_writes,
        } = saved;
        // The checkpoint is shared with the saver (and the other snapshots of a listing):
        // it is copied only if writes must be applied to it. Its tasks and values are read
        // off its stored values in place; channels are restored only to apply writes.
        let step = metadata.step.unwrap_or(-1) + 1;
        let mut tasks = prepare_next_tasks(
            &checkpoint,
            &Stored::new(&self.channel_specs, &checkpoint),
            triggers,
            step,
            &config.checkpoint_ns,
            None,
        );
        let mut channels: Option<Channels> = None;
        // Writes without a task (resume answers, a command's update and routing) show in
        // the values; the tasks are the checkpoint's own, as LangGraph reports them.
        if pending_writes.iter().any(|w| w.task_id == NULL_TASK_ID) {
            let restored =
                channels.insert(channels_from_checkpoint(&self.channel_specs, &checkpoint));
            self.apply_null_writes(
                None,
                Arc::make_mut(&mut checkpoint),
                restored,
                &pending_writes,
            )?;
        }
        // The writes are the snapshot's own: moved into it, not copied.
        let mut outcomes = task_outcomes(pending_writes);
        if live {
            for t in &mut tasks {
                if let Some(w) = outcome_of(&mut outcomes, &t.id).and_then(|o| o.written.as_ref()) {
                    t.writes.clone_from(w);
                }
            }
            let done: Vec<&Task> = tasks.iter().filter(|t| !t.writes.is_empty()).collect();
            if !done.is_empty() {
                let restored = channels.get_or_insert_with(|| {
                    channels_from_checkpoint(&self.channel_specs, &checkpoint)
                });
                apply_writes(
                    Arc::make_mut(&mut checkpoint),
                    restored,
                    &done,
                    None,
                    &self.trigger_channels,
                )?;
            }
        }
        let next = tasks
            .iter()
            .filter(|t| t.writes.is_empty())
            .map(|t| t.name.clone())
            .collect();
        // The tasks are not needed past here: their ids, names and paths move.
        let snapshot_tasks: Vec<PregelTask> = tasks
            .into_iter()
            .map(|t| {
                let TaskOutcome {
                    error,
                    raised,
                    written,
                } = outcome_of(&mut outcomes, &t.id)
                    .map(std::mem::take)
                    .unwrap_or_default();
                // The latest state shows only the questions still waiting: a task that
                // finished after its interrupts were answered has none pending. A step's
                // record (history, an addressed checkpoint) keeps every interrupt its tasks
                // raised, answered or not, as LangGraph does.
                let interrupts = if live && written.is_some() {
                    Vec::new()
                } else {
                    raised.unwrap_or_default()
                };
                let result = written.map(|w| {
                    w.into_iter()
                        .filter(|(k, _)| self.schema.contains(k))
                        .collect()
                });
                PregelTask {
                    error,
                    result,
                    state: None,
                    interrupts,
                    id: t.id,
                    name: t.name,
                    path: t.path,
                }
            })
            .collect();
        Ok(StateSnapshot {
            values: match &channels {
                Some(restored) => self.read_values(restored),
                None => self.read_values(&Stored::new(&self.channel_specs, &checkpoint)),
            },
            next,
            config: Some(config),
            metadata: Some(metadata),
            created_at: Some(checkpoint.ts.clone()),
            parent_config,
            interrupts: snapshot_tasks
                .iter()
                .flat_map(|t| t.interrupts.iter().cloned())
                .collect(),
            tasks: snapshot_tasks,
        })
    }
}

/// What a task's stored writes say: its error, the interrupts it raised, and its other
/// writes (`None`: it wrote none). For a channel written more than once, the last write
/// counts for the error and the interrupts.
#[derive(Default)]
struct TaskOutcome {
    error: Option<String>,
    raised: Option<Vec<crate::interrupt::Interrupt>>,
    written: Option<Vec<(String, Value)>>,
}

/// Each writing task's [`TaskOutcome`], sorted by task id, from a checkpoint's pending
/// writes (moved, each task's kept in their stored order). Grouped by a sort rather than
/// hashed: a listing does this for every checkpoint, most of which hold one task's writes.
fn task_outcomes(
    mut writes: Vec<stategraph_checkpoint::PendingWrite>,
) -> Vec<(String, TaskOutcome)> {
    // Stable: a task's writes stay in their order.
    writes.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let mut out: Vec<(String, TaskOutcome)> = Vec::new();
    for w in writes {
        if out.last().is_none_or(|(id, _)| *id != w.task_id) {
            out.push((w.task_id, TaskOutcome::default()));
        }
        let Some((_, o)) = out.last_mut() else {
            continue;
        };
        if w.channel == channels::ERROR {
            o.error = Some(w.value.as_str().unwrap_or_default().to_owned());
        } else if w.channel == channels::INTERRUPT {
            o.raised = Some(crate::interrupt::Interrupt::all_from(&w.value));
        } else if w.channel != channels::RESUME && w.channel != channels::ERROR_SOURCE_NODE {
            o.written
                .get_or_insert_with(Vec::new)
                .push((w.channel, w.value));
        }
    }
    out
}

/// The outcome of task `id` in [`task_outcomes`]'s list, if it wrote anything.
fn outcome_of<'a>(
    outcomes: &'a mut [(String, TaskOutcome)],
    id: &str,
) -> Option<&'a mut TaskOutcome> {
    let i = outcomes
        .binary_search_by(|(k, _)| k.as_str().cmp(id))
        .ok()?;
    outcomes.get_mut(i).map(|(_, o)| o)
}
