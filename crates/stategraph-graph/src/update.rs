//! `update_state`: editing a thread as if a node had written, creating a new checkpoint.

use stategraph_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Value,
};

use crate::algo::{
    INTERRUPT, Task, apply_writes, channels_from_checkpoint, create_checkpoint, new_versions,
    prepare_next_tasks, task_path_str,
};
use crate::compiled::CompiledGraph;
use crate::config::RunConfig;
use crate::error::GraphError;
use crate::graph::{END, START};
use crate::state::State;

/// `as_node` value that copies the checkpoint as a fork, without applying anything.
pub const AS_COPY: &str = "__copy__";

impl<S: State> CompiledGraph<S> {
    /// Applies `values` to the thread's checkpoint (the latest, or `config.checkpoint_id`) as
    /// if node `as_node` had returned them: through the reducers, followed by that node's edges,
    /// so `as_node` decides what runs next. Without `as_node`, LangGraph's default: the node
    /// that last updated the state (an error if that is ambiguous). Writes a new checkpoint
    /// (`source: "update"`, step + 1) whose parent is the one updated — updating an older
    /// checkpoint forks the thread. Returns the new checkpoint's address.
    ///
    /// `as_node = "__copy__"` (with no values) copies the checkpoint as a `fork` sibling.
    pub async fn update_state(
        &self,
        config: &RunConfig,
        values: Option<S::Update>,
        as_node: Option<&str>,
    ) -> Result<CheckpointConfig, GraphError> {
        let saver = self.saver()?;
        let thread = self.thread_of(config)?;
        let saved = saver.get_tuple(&config.checkpoint_config(thread)).await?;
        if as_node == Some(AS_COPY) {
            return self.copy_checkpoint(config, saved, values.is_some()).await;
        }
        let (mut checkpoint, step, parent, parents) = match &saved {
            Some(t) => (
                t.checkpoint.clone(),
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
        let as_node = match as_node {
            Some(n) => n.to_owned(),
            None => self.default_as_node(&checkpoint)?,
        };
        if as_node != START && !self.nodes.iter().any(|n| n.name == as_node) {
            return Err(GraphError::InvalidUpdate {
                channel: as_node.clone(),
                message: format!("as_node: node `{as_node}` does not exist"),
            });
        }
        let mut channels = channels_from_checkpoint(&self.channel_specs, &checkpoint);
        let mut writes = match values {
            Some(v) => S::into_writes(v)?,
            None => Vec::new(),
        };
        self.check_state_writes(&writes)?;
        let edges = self
            .edge_writes(&as_node, &channels, &writes)
            .map_err(|e| GraphError::NodeFailed {
                node: as_node.clone(),
                task_id: String::new(),
                message: e.message,
            })?;
        writes.extend(edges);

        // The pseudo-task's id: the prepared task of `as_node` if there is one, else
        // uuid5(checkpoint id, "__interrupt__").
        let prepared = prepare_next_tasks(
            &checkpoint,
            &channels,
            &self.node_triggers(),
            step + 1,
            &parent.checkpoint_ns,
            None,
        );
        let task_id = prepared
            .iter()
            .find(|t| t.name == as_node)
            .map(|t| t.id.clone())
            .unwrap_or_else(|| update_task_id(&checkpoint.id));
        let task = Task {
            id: task_id,
            name: as_node.clone(),
            path: vec![INTERRUPT.to_owned(), format!("{:010}", 0)],
            triggers: vec![INTERRUPT.to_owned()],
            writes,
            input: None,
        };
        let next = |cur: Option<&ChannelVersion>| saver.get_next_version(cur);
        apply_writes(
            &mut checkpoint,
            &mut channels,
            &[&task],
            Some(&next),
            &self.trigger_channels,
        )?;

        // LangGraph also records the update's writes on the checkpoint it was applied to,
        // when that checkpoint is still the thread's latest.
        if let Some(t) = &saved {
            let latest = saver
                .get_tuple(&CheckpointConfig::new(thread).with_ns(t.config.checkpoint_ns.clone()))
                .await?;
            let state_writes: Vec<(String, Value)> = task
                .writes
                .iter()
                .filter(|(k, _)| self.schema.contains(k))
                .cloned()
                .collect();
            if latest.is_some_and(|l| l.checkpoint.id == t.checkpoint.id)
                && !state_writes.is_empty()
            {
                saver
                    .put_writes(
                        &t.config,
                        &state_writes,
                        &update_task_id(&t.checkpoint.id),
                        &task_path_str(&task.path),
                    )
                    .await?;
            }
        }

        let new = create_checkpoint(&checkpoint, Some(&channels), step + 1, None);
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Update, step + 1);
        metadata.parents = Some(parents);
        config.merge_into_metadata(&mut metadata);
        let previous = saved
            .as_ref()
            .map(|t| t.checkpoint.channel_versions.clone())
            .unwrap_or_default();
        let changed = new_versions(&previous, &new.channel_versions);
        Ok(saver.put(&parent, &new, &metadata, &changed).await?)
    }

    /// `as_node="__copy__"`: the same checkpoint under a new id, as a sibling (`fork`).
    async fn copy_checkpoint(
        &self,
        config: &RunConfig,
        saved: Option<stategraph_checkpoint::CheckpointTuple>,
        has_values: bool,
    ) -> Result<CheckpointConfig, GraphError> {
        let saver = self.saver()?;
        let Some(t) = saved else {
            return Err(GraphError::InvalidConfig(
                "as_node=\"__copy__\" needs an existing checkpoint to copy".into(),
            ));
        };
        if has_values {
            return Err(GraphError::InvalidUpdate {
                channel: AS_COPY.into(),
                message: "a copy takes no values; update the copy afterwards".into(),
            });
        }
        let step = t.metadata.step.unwrap_or(-1) + 1;
        let mut copy = create_checkpoint(&t.checkpoint, None, step, None);
        copy.updated_channels = None;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Fork, step);
        metadata.parents = t.metadata.parents.clone();
        config.merge_into_metadata(&mut metadata);
        let parent = match t.parent_config {
            Some(p) => p,
            None => CheckpointConfig::new(t.config.thread_id.clone())
                .with_ns(t.config.checkpoint_ns.clone()),
        };
        Ok(saver
            .put(&parent, &copy, &metadata, &Default::default())
            .await?)
    }

    /// LangGraph's default `as_node`: the only node; `__start__` on a thread no node has run
    /// on; else the node that saw the newest version, if exactly one did.
    fn default_as_node(&self, checkpoint: &Checkpoint) -> Result<String, GraphError> {
        let user_nodes: Vec<&str> = self
            .nodes
            .iter()
            .filter(|n| n.name != START)
            .map(|n| n.name.as_str())
            .collect();
        if let [only] = user_nodes.as_slice() {
            return Ok((*only).to_owned());
        }
        let any_seen = checkpoint.versions_seen.values().any(|v| !v.is_empty());
        if !any_seen {
            return Ok(START.to_owned());
        }
        let mut seen: Vec<(&ChannelVersion, &str)> = checkpoint
            .versions_seen
            .iter()
            .filter(|(n, _)| self.nodes.iter().any(|x| x.name == **n))
            .flat_map(|(n, vs)| vs.values().map(move |v| (v, n.as_str())))
            .collect();
        seen.sort();
        match seen.as_slice() {
            [.., (a, _), (b, n)] if a != b => Ok((*n).to_owned()),
            [(_, n)] => Ok((*n).to_owned()),
            _ => Err(GraphError::InvalidUpdate {
                channel: END.to_owned(),
                message: "ambiguous update: several nodes updated the state last; pass as_node"
                    .into(),
            }),
        }
    }
}

/// `uuid5(UUID(checkpoint_id), "__interrupt__")`, the task id of an update.
pub(crate) fn update_task_id(checkpoint_id: &str) -> String {
    match uuid::Uuid::parse_str(checkpoint_id) {
        Ok(ns) => uuid::Uuid::new_v5(&ns, INTERRUPT.as_bytes()).to_string(),
        Err(_) => INTERRUPT.to_owned(),
    }
}
