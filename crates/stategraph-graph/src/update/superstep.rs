//! One update as a super-step of its own: what `update_state` writes, and how it checks it.

use super::*;

impl<S: State> CompiledGraph<S> {
    pub(super) async fn update_superstep(
        &self,
        config: &RunConfig,
        updates: Vec<RawUpdate>,
        is_first: bool,
    ) -> Result<CheckpointConfig, GraphError> {
        let saver = self.saver()?;
        let thread = self.thread_of(config)?;
        let saved = saver.get_tuple(&config.checkpoint_config(thread)).await?;
        // The update is saved on condition that the thread has not moved on since now.
        let expected = match (&config.checkpoint_id, &saved) {
            (None, saved) => saved.as_ref().map(|t| t.checkpoint.id.clone()),
            (Some(_), _) => {
                self.latest_id(saver, &config.checkpoint_config(thread))
                    .await?
            }
        };
        if let [only] = updates.as_slice()
            && only.as_node == AsNode::Fork
        {
            let has_values = only.values.is_some();
            return self.copy_checkpoint(config, saved, has_values).await;
        }
        let mut saved = saved;
        if let Some(t) = saved.as_mut() {
            self.hydrate(saver.as_ref(), t).await?;
        }
        let (mut checkpoint, step, parent, parents) = match &saved {
            Some(t) => (
                (*t.checkpoint).clone(),
                t.metadata.step.unwrap_or(-1),
                t.config.clone(),
                t.metadata.parents.clone().unwrap_or_default(),
            ),
            None => (
                Checkpoint::empty(),
                -1,
                CheckpointConfig::new(thread).with_ns(config.checkpoint_ns.clone()),
                Default::default(),
            ),
        };
        let mut channels = channels_from_checkpoint(&self.channel_specs, &checkpoint);
        // The checkpoint's next tasks: they lend their ids to updates made as their node.
        let next_tasks = match &saved {
            Some(_) => prepare_next_tasks(
                &checkpoint,
                &channels,
                &self.node_triggers(),
                step + 1,
                &parent.checkpoint_ns,
                None,
            ),
            None => Vec::new(),
        };
        let mut prepared: Vec<(String, String)> = next_tasks
            .iter()
            .map(|t| (t.name.clone(), t.id.clone()))
            .collect();
        // LangGraph's `as_node=END` without values clears the checkpoint's tasks: those that
        // finished have their writes applied, the others (interrupted, failed, not run) are
        // dropped, and nothing runs next.
        let clears = |u: &RawUpdate| u.values.is_none() && u.as_node.name() == Some(END);
        let clear = match updates.as_slice() {
            [only] => clears(only),
            several if several.iter().any(clears) => {
                return Err(GraphError::InvalidArgument {
                    what: "as_node".into(),
                    message: "Cannot clear tasks with multiple updates".into(),
                });
            }
            _ => false,
        };
        let single = updates.len() == 1;
        let mut tasks = Vec::with_capacity(updates.len());
        if clear && let Some(t) = &saved {
            tasks = next_tasks;
            self.apply_null_writes(
                Some(saver.as_ref()),
                &mut checkpoint,
                &mut channels,
                &t.pending_writes,
            )?;
            for w in &t.pending_writes {
                if [
                    stategraph_checkpoint::channels::ERROR,
                    stategraph_checkpoint::channels::INTERRUPT,
                ]
                .contains(&w.channel.as_str())
                {
                    continue;
                }
                if let Some(task) = tasks.iter_mut().find(|k| k.id == w.task_id) {
                    task.writes.push((w.channel.clone(), w.value.clone()));
                }
            }
        }
        for (i, update) in updates.into_iter().enumerate().filter(|_| !clear) {
            let as_node = match update.as_node {
                AsNode::Node(n) => n,
                AsNode::Start => START.to_owned(),
                AsNode::Inferred if single => self.default_as_node(&checkpoint)?,
                AsNode::Inferred => {
                    return Err(GraphError::InvalidArgument {
                        what: "as_node".into(),
                        message: "as_node is required when applying several updates".into(),
                    });
                }
                AsNode::Fork => {
                    return Err(GraphError::InvalidArgument {
                        what: "as_node".into(),
                        message: "a fork copies a checkpoint: it must be alone in its super-step"
                            .into(),
                    });
                }
            };
            if as_node != START && !self.nodes.iter().any(|n| n.name == as_node) {
                return Err(GraphError::InvalidArgument {
                    what: "as_node".into(),
                    message: format!("node `{as_node}` does not exist"),
                });
            }
            let mut writes = update.values.unwrap_or_default();
            self.check_state_writes(&writes)?;
            let edges = self
                .edge_writes(
                    &as_node,
                    &channels,
                    &writes,
                    None,
                    &crate::stream::RunTree::off(),
                )
                .map_err(|e| GraphError::NodeFailed {
                    node: as_node.clone(),
                    task_id: String::new(),
                    message: e.message,
                    source: e.source,
                })?;
            writes.extend(edges);
            let task_id = match update.task_id {
                Some(id) => id,
                None => match prepared.iter().position(|(n, _)| *n == as_node) {
                    Some(p) => prepared.remove(p).1,
                    None => update_task_id(&checkpoint.id, i),
                },
            };
            tasks.push(Task {
                id: task_id,
                name: as_node,
                path: vec![INTERRUPT.to_owned(), format!("{i:010}")].into(),
                triggers: vec![INTERRUPT.to_owned()].into(),
                writes,
                input: None,
            });
        }

        // LangGraph also records the updates' writes on the checkpoint they were applied to,
        // unless the thread has moved past it.
        let mut recorded = false;
        if let Some(t) = saved.as_ref().filter(|_| !clear) {
            let superseded = is_first && {
                let latest = saver
                    .get_tuple(
                        &CheckpointConfig::new(thread).with_ns(t.config.checkpoint_ns.clone()),
                    )
                    .await?;
                latest.is_none_or(|l| l.checkpoint.id != t.checkpoint.id)
            };
            recorded = !superseded;
            if !superseded {
                for task in &tasks {
                    if !task.writes.is_empty() {
                        saver
                            .put_writes(
                                &t.config,
                                &task.writes,
                                &task.id,
                                &task_path_str(&task.path),
                            )
                            .await?;
                    }
                }
            }
        }

        let next = |cur: Option<&ChannelVersion>| saver.get_next_version(cur);
        let refs: Vec<&Task> = tasks.iter().collect();
        apply_writes(
            &mut checkpoint,
            &mut channels,
            &refs,
            Some(&next),
            &self.trigger_channels,
        )?;
        let previous = saved
            .as_ref()
            .map(|t| t.checkpoint.channel_versions.clone())
            .unwrap_or_default();
        // Delta channels snapshot where a walk could not rebuild them: on a new thread, where
        // the update's writes went unrecorded, and where the parent's stored writes belong to
        // another child.
        let written: BTreeSet<String> = tasks
            .iter()
            .flat_map(|t| t.writes.iter().map(|(c, _)| c.clone()))
            .collect();
        let forced: BTreeSet<String> = match &saved {
            None => self.delta_channels().map(|(k, _)| k.to_owned()).collect(),
            Some(t) => {
                let mut f = self.delta_channels_in(&t.pending_writes);
                if !recorded {
                    f.extend(written.iter().cloned());
                }
                f
            }
        };
        let counters = saved
            .as_ref()
            .map(|t| crate::delta::counters_of(&t.metadata))
            .unwrap_or_default();
        let delta_step = crate::delta::StepDelta {
            previous: &counters,
            updated: &written,
            forced: &forced,
            stored: &previous,
            saved: true,
            count: true,
        };
        let plan = self.plan_snapshots(&mut checkpoint, &channels, &delta_step, &next);
        let mut new = checkpoint.clone();
        create_checkpoint(
            &mut new,
            ValuesFrom::Channels(&channels),
            step + 1,
            None,
            &plan.snapshot,
        );
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Update, step + 1);
        metadata.parents = Some(parents);
        config.merge_into_metadata(&mut metadata);
        crate::delta::set_counters(&mut metadata, &plan.counters);
        let changed = new_versions(&previous, &new.channel_versions);
        Ok(saver
            .put_if_latest(&parent, &new, &metadata, &changed, expected.as_deref())
            .await?)
    }
}
