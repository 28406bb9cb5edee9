//! What a run needs before it starts: its graph, config, input and stream modes, from its record.

use super::*;

/// A claimed run, as the executor takes it.
pub(super) struct Prepared {
    /// Its arguments, as it runs with them (its attempt recorded).
    pub(super) kwargs: RunKwargs,
    pub(super) graph: Arc<dyn ServedGraph>,
    pub(super) config: RunConfig,
    pub(super) modes: Vec<StreamMode>,
    /// The stream modes as the run's request named them.
    pub(super) mode_names: Vec<String>,
    pub(super) start: RunStart,
}

/// Rebuilds a claimed run from its arguments; a takeover (`attempt > 1`) of a run that
/// checkpointed carries on from its last checkpoint without input.
pub(super) async fn prepare(state: &AppState, claimed: &RunRow) -> Result<Prepared, ApiError> {
    let mut kwargs = RunKwargs::from_object(&claimed.run_id, &claimed.kwargs)?;
    let graph_id = kwargs.graph_id().unwrap_or_default();
    let graph = state
        .graphs
        .get(&graph_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let graph = if claimed.temporary {
        // A temporary thread lives and dies with its run, unseen by any other request: its
        // checkpoints are kept in memory, so a stateless run writes none to the database
        // (and a process killed mid-run leaves nothing behind). The store is still the
        // server's.
        graph.with_saver(Arc::new(stategraph_checkpoint::InMemorySaver::new()))
    } else {
        graph
    };
    kwargs.started(claimed.attempt);
    let mut config = kwargs.engine_config(&claimed.thread_id)?;
    let (modes, mode_names) = kwargs.modes()?;
    let mut start = kwargs.start()?;
    if claimed.attempt > 1 {
        let latest = graph
            .get_state(&RunConfig::thread(&claimed.thread_id), false)
            .await?;
        let ours = latest
            .metadata
            .as_ref()
            .and_then(|m| m.run_id())
            .is_some_and(|id| id == claimed.run_id);
        if ours {
            // LangGraph's `invoke(None)`: on from the run's last checkpoint.
            start = RunStart::Continue;
            config.checkpoint_id = None;
        }
    }
    Ok(Prepared {
        kwargs,
        graph,
        config,
        modes,
        mode_names,
        start,
    })
}

/// Resolves when the run is asked to stop; never for a run whose stop signal is gone.
pub(super) async fn stopped_by(rx: &mut watch::Receiver<Option<Stop>>) -> Stop {
    loop {
        if let Some(s) = rx.borrow_and_update().clone() {
            return s;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
