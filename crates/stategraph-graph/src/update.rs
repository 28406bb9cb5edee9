//! `update_state`: editing a thread as if a node had written, creating a new checkpoint.

use std::collections::BTreeSet;

use stategraph_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata,
    CheckpointSource, Map, Value,
};

use crate::compiled::CompiledGraph;
use crate::config::RunConfig;
use crate::error::GraphError;
use crate::graph::{END, START};
use crate::state::State;
use crate::step::{
    INTERRUPT, Task, ValuesFrom, apply_writes, channels_from_checkpoint, create_checkpoint,
    new_versions, prepare_next_tasks, task_path_str,
};

mod superstep;

/// An update whose values are already channel writes.
type RawUpdate = StateUpdate<Vec<(String, Value)>>;

/// The node an [`update_state`](CompiledGraph::update_state) is made as (LangGraph's
/// `as_node`): it decides, through that node's edges, what runs next.
///
/// A node name converts into it, so `update_state(&config, values, "node_a")` works; pass
/// [`AsNode::Inferred`] for LangGraph's default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsNode {
    /// LangGraph's default (`as_node=None`): the graph's only node; on a thread no node has
    /// run on, the graph input ([`AsNode::Start`]); else the node that updated the state
    /// last. An error if that is ambiguous, and in a super-step of several updates.
    #[default]
    Inferred,
    /// As the graph input (LangGraph's `as_node=START`, `"__start__"`): START's edges run
    /// next, as after an `invoke`'s input.
    Start,
    /// As this node.
    Node(String),
    /// LangGraph's `as_node="__copy__"`: no values; the checkpoint is copied under a new id as
    /// a sibling (`source: "fork"`). [`fork`](CompiledGraph::fork) is the direct call; in
    /// [`bulk_update_state`](CompiledGraph::bulk_update_state) (see [`StateUpdate::fork`]) it
    /// must be alone in its super-step.
    Fork,
}

impl AsNode {
    /// The node's name, if one is named (`__start__` for [`AsNode::Start`]).
    pub fn name(&self) -> Option<&str> {
        match self {
            AsNode::Start => Some(START),
            AsNode::Node(n) => Some(n),
            AsNode::Inferred | AsNode::Fork => None,
        }
    }
}

impl From<&str> for AsNode {
    /// A node by name; [`START`] is [`AsNode::Start`].
    fn from(name: &str) -> Self {
        if name == START {
            AsNode::Start
        } else {
            AsNode::Node(name.to_owned())
        }
    }
}

impl From<String> for AsNode {
    /// A node by name; [`START`] is [`AsNode::Start`].
    fn from(name: String) -> Self {
        if name == START {
            AsNode::Start
        } else {
            AsNode::Node(name)
        }
    }
}

impl From<&String> for AsNode {
    /// A node by name; [`START`] is [`AsNode::Start`].
    fn from(name: &String) -> Self {
        AsNode::from(name.as_str())
    }
}

impl<S: State> CompiledGraph<S> {
    /// Applies `values` to the thread's checkpoint (the latest, or `config.checkpoint_id`) as
    /// if node `as_node` had returned them: through the reducers, followed by that node's
    /// edges, so `as_node` decides what runs next ([`AsNode::Inferred`]: LangGraph's default,
    /// the node that last updated the state). Writes a new checkpoint (`source: "update"`,
    /// step + 1) whose parent is the one updated — updating an older checkpoint forks the
    /// thread. Returns the new checkpoint's address. (LangGraph's
    /// `update_state(config, values, as_node)`; an update without values is a
    /// [`StateUpdate::without_values`], a copy is [`fork`](Self::fork).)
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>) -> Result<(), stategraph_graph::GraphError> {
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::{AsNode, RunConfig};
    /// let config = RunConfig::thread("1");
    /// let values = Map::from_iter([("foo", value!("edited"))]);
    /// graph.update_state(&config, values.clone(), "node_a").await?; // node_a's edges run next
    /// graph.update_state(&config, values, AsNode::Inferred).await?; // LangGraph's default
    /// # Ok(()) }
    /// ```
    pub async fn update_state(
        &self,
        config: &RunConfig,
        values: S::Update,
        as_node: impl Into<AsNode>,
    ) -> Result<CheckpointConfig, GraphError> {
        self.bulk_update_state(
            config,
            vec![vec![StateUpdate {
                values: Some(values),
                as_node: as_node.into(),
                task_id: None,
            }]],
        )
        .await
    }

    /// Copies the thread's checkpoint (the latest, or `config.checkpoint_id`) under a new id,
    /// as a sibling with the same parent (`source: "fork"`, step + 1), and returns the copy's
    /// address: LangGraph's `update_state(config, None, as_node="__copy__")`. Continuing from
    /// the copy (or updating it) branches the thread there.
    pub async fn fork(&self, config: &RunConfig) -> Result<CheckpointConfig, GraphError> {
        self.bulk_update_state(config, vec![vec![StateUpdate::fork()]])
            .await
    }

    /// Applies several super-steps of updates in one call (LangGraph's `bulk_update_state`):
    /// each super-step's updates are applied together, as parallel tasks, and produce one
    /// checkpoint; the next super-step builds on it. With several updates in one super-step
    /// every update needs its `as_node`.
    pub async fn bulk_update_state(
        &self,
        config: &RunConfig,
        supersteps: Vec<Vec<StateUpdate<S::Update>>>,
    ) -> Result<CheckpointConfig, GraphError> {
        let mut raw = Vec::with_capacity(supersteps.len());
        for updates in supersteps {
            let mut step = Vec::with_capacity(updates.len());
            for u in updates {
                step.push(StateUpdate {
                    values: u.values.map(S::into_writes).transpose()?,
                    as_node: u.as_node,
                    task_id: u.task_id,
                });
            }
            raw.push(step);
        }
        self.bulk_update_writes(config, raw).await
    }

    /// [`update_state`](Self::update_state) with LangGraph's raw values: a map of state keys
    /// to values (`None`: no values, only `as_node`'s edges), as a client sends it (e.g. the
    /// Agent Server's `POST /threads/{id}/state`). Keys are validated as typed updates are.
    ///
    /// ```no_run
    /// # async fn demo(graph: stategraph_graph::CompiledGraph<stategraph_graph::DynState>) -> Result<(), stategraph_graph::GraphError> {
    /// use stategraph_checkpoint::{Map, value};
    /// use stategraph_graph::RunConfig;
    /// let values = Map::from_iter([("foo", value!("edited"))]);
    /// let at = graph.update_state_values(&RunConfig::thread("1"), Some(values), "node_a").await?;
    /// println!("new checkpoint {:?}", at.checkpoint_id);
    /// # Ok(()) }
    /// ```
    pub async fn update_state_values(
        &self,
        config: &RunConfig,
        values: Option<Map>,
        as_node: impl Into<AsNode>,
    ) -> Result<CheckpointConfig, GraphError> {
        let update = StateUpdate {
            values: values.map(crate::state::map_writes).transpose()?,
            as_node: as_node.into(),
            task_id: None,
        };
        self.bulk_update_writes(config, vec![vec![update]]).await
    }

    /// [`bulk_update_state`](Self::bulk_update_state) on updates already turned into writes.
    async fn bulk_update_writes(
        &self,
        config: &RunConfig,
        supersteps: Vec<Vec<RawUpdate>>,
    ) -> Result<CheckpointConfig, GraphError> {
        if supersteps.is_empty() || supersteps.iter().any(Vec::is_empty) {
            return Err(GraphError::InvalidArgument {
                what: "supersteps".into(),
                message: "bulk_update_state needs at least one update in every super-step".into(),
            });
        }
        let thread = self.thread_of(config)?.to_owned();
        let mut current = config.clone();
        let mut last = None;
        for (i, updates) in supersteps.into_iter().enumerate() {
            let at = self.update_superstep(&current, updates, i == 0).await?;
            current.checkpoint_id.clone_from(&at.checkpoint_id);
            current.checkpoint_ns.clone_from(&at.checkpoint_ns);
            last = Some(at);
        }
        last.ok_or_else(|| GraphError::Internal(format!("no update applied to `{thread}`")))
    }

    /// [`AsNode::Fork`] (`as_node="__copy__"`): the same checkpoint under a new id, as a
    /// sibling (`fork`).
    async fn copy_checkpoint(
        &self,
        config: &RunConfig,
        saved: Option<stategraph_checkpoint::CheckpointTuple>,
        has_values: bool,
    ) -> Result<CheckpointConfig, GraphError> {
        let saver = self.saver()?;
        let Some(t) = saved else {
            return Err(GraphError::NotFound {
                what: "a checkpoint to fork".into(),
            });
        };
        if has_values {
            return Err(GraphError::InvalidArgument {
                what: "fork".into(),
                message: "a fork takes no values; update the copy afterwards".into(),
            });
        }
        let step = t.metadata.step.unwrap_or(-1) + 1;
        let mut copy = (*t.checkpoint).clone();
        create_checkpoint(&mut copy, ValuesFrom::Base, step, None, &BTreeSet::new());
        copy.updated_channels = None;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Fork, step);
        metadata.parents = t.metadata.parents.clone();
        config.merge_into_metadata(&mut metadata);
        // The copy stores what the original stores and has the same parent, so its delta
        // channels rebuild the same way; it carries on the original's counters.
        crate::delta::set_counters(&mut metadata, &crate::delta::counters_of(&t.metadata));
        let parent = match t.parent_config {
            Some(p) => p,
            None => CheckpointConfig::new(t.config.thread_id.clone())
                .with_ns(t.config.checkpoint_ns.clone()),
        };
        let latest = self.latest_id(saver, &parent).await?;
        Ok(saver
            .put_if_latest(
                &parent,
                &copy,
                &metadata,
                &Default::default(),
                latest.as_deref(),
            )
            .await?)
    }

    /// The id of the newest checkpoint in `config`'s namespace.
    async fn latest_id(
        &self,
        saver: &std::sync::Arc<dyn stategraph_checkpoint::CheckpointSaver>,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointId>, GraphError> {
        let latest = CheckpointConfig {
            checkpoint_id: None,
            ..config.clone()
        };
        Ok(saver
            .get_tuple(&latest)
            .await?
            .map(|t| t.checkpoint.id.clone()))
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
            .flat_map(|(n, vs)| vs.values().map(move |v| (v, n)))
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

/// The task id of the `i`-th update of a super-step that has no prepared task to reuse:
/// `uuid5(UUID(checkpoint_id), "__interrupt__")`, then `"__interrupt__:<i>"`.
pub(crate) fn update_task_id(checkpoint_id: &str, i: usize) -> String {
    let name = if i == 0 {
        INTERRUPT.to_owned()
    } else {
        format!("{INTERRUPT}:{i}")
    };
    match uuid::Uuid::parse_str(checkpoint_id) {
        Ok(ns) => uuid::Uuid::new_v5(&ns, name.as_bytes()).to_string(),
        Err(_) => name,
    }
}

/// One update of [`CompiledGraph::bulk_update_state`] (LangGraph's `StateUpdate`).
#[derive(Clone, Debug)]
pub struct StateUpdate<U> {
    /// The values, applied through the reducers (`None`: only the node's edges).
    pub values: Option<U>,
    /// The node the update is made as.
    pub as_node: AsNode,
    /// The task id to record it under (default: the prepared task of `as_node`, if any).
    pub task_id: Option<String>,
}

impl<U> StateUpdate<U> {
    /// An update of `values` made as `as_node` (a node name, or an [`AsNode`]).
    pub fn new(values: U, as_node: impl Into<AsNode>) -> Self {
        Self {
            values: Some(values),
            as_node: as_node.into(),
            task_id: None,
        }
    }

    /// An update that writes no values but follows `as_node`'s edges (LangGraph's
    /// `update_state(config, None, as_node)`): what runs next is what would after that node.
    pub fn without_values(as_node: impl Into<AsNode>) -> Self {
        Self {
            values: None,
            as_node: as_node.into(),
            task_id: None,
        }
    }

    /// A copy of the checkpoint as a fork sibling ([`AsNode::Fork`], LangGraph's
    /// `StateUpdate(None, "__copy__")`); alone in its super-step, typically followed by
    /// super-steps that update the copy.
    pub fn fork() -> Self {
        Self {
            values: None,
            as_node: AsNode::Fork,
            task_id: None,
        }
    }

    /// Records the update under task id `task_id` (LangGraph's `StateUpdate.task_id`).
    pub fn with_task_id(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }
}
