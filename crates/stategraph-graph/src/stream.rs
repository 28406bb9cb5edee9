//! Streaming a run: LangGraph's stream modes, as the run happens.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use stategraph_checkpoint::{Map, Value, now_iso};
use tokio::sync::mpsc;

use crate::error::GraphError;
use crate::state::Values;

/// What a stream carries (several modes can be asked for at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum StreamMode {
    /// The whole state after each super-step.
    Values,
    /// `{node: update}` as each task finishes.
    Updates,
    /// Each checkpoint as it is saved: `{config, parent_config, values, metadata, next, tasks}`.
    Checkpoints,
    /// Task starts `{id, name, input, triggers}` and results `{id, name, error, result,
    /// interrupts}`.
    Tasks,
    /// Checkpoints and tasks wrapped as `{step, timestamp, type, payload}`.
    Debug,
    /// Whatever nodes write with [`NodeContext::write_custom`](crate::NodeContext::write_custom).
    Custom,
}

impl StreamMode {
    /// LangGraph's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Values => "values",
            StreamMode::Updates => "updates",
            StreamMode::Checkpoints => "checkpoints",
            StreamMode::Tasks => "tasks",
            StreamMode::Debug => "debug",
            StreamMode::Custom => "custom",
        }
    }
}

/// One streamed event: its mode and payload (LangGraph's dict shapes, as [`Value`] maps).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamPart {
    /// The mode it belongs to.
    pub mode: StreamMode,
    /// The payload.
    pub data: Value,
}

/// Sends events of the requested modes.
#[derive(Clone, Debug)]
pub(crate) struct Emitter {
    modes: BTreeSet<StreamMode>,
    tx: mpsc::UnboundedSender<StreamPart>,
}

impl Emitter {
    pub(crate) fn wants(&self, mode: StreamMode) -> bool {
        self.modes.contains(&mode)
    }

    pub(crate) fn emit(&self, mode: StreamMode, data: impl FnOnce() -> Value) {
        if self.wants(mode) {
            // The receiver may be gone (the caller stopped reading); the run goes on.
            let _ = self.tx.send(StreamPart { mode, data: data() });
        }
    }

    /// A checkpoint or task event, also wrapped for `debug`.
    pub(crate) fn emit_debug(
        &self,
        mode: StreamMode,
        kind: &str,
        step: i64,
        payload: impl Fn() -> Value,
    ) {
        self.emit(mode, &payload);
        self.emit(StreamMode::Debug, || {
            let mut m = Map::new();
            m.insert("step", step);
            m.insert("timestamp", now_iso());
            m.insert("type", kind);
            m.insert("payload", payload());
            Value::Map(m)
        });
    }
}

type RunFuture<'g> = Pin<Box<dyn Future<Output = Result<Values, GraphError>> + Send + 'g>>;

/// A running graph's event stream. Read events with [`next`](Self::next); when it returns
/// `None` the run is over and [`result`](Self::result) gives its outcome.
pub struct RunStream<'g> {
    rx: mpsc::UnboundedReceiver<StreamPart>,
    run: Option<RunFuture<'g>>,
    result: Option<Result<Values, GraphError>>,
}

impl std::fmt::Debug for RunStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

impl<'g> RunStream<'g> {
    pub(crate) fn new(modes: &[StreamMode], start: impl FnOnce(Emitter) -> RunFuture<'g>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let emitter = Emitter {
            modes: modes.iter().copied().collect(),
            tx,
        };
        Self {
            rx,
            run: Some(start(emitter)),
            result: None,
        }
    }

    /// The next event, or `None` once the run has ended and every event was read.
    pub async fn next(&mut self) -> Option<StreamPart> {
        loop {
            let Some(run) = self.run.as_mut() else {
                return self.rx.recv().await;
            };
            let finished = tokio::select! {
                biased;
                part = self.rx.recv() => match part {
                    Some(p) => return Some(p),
                    None => None,
                },
                result = run => Some(result),
            };
            let result = match (finished, self.run.as_mut()) {
                (Some(r), _) => r,
                // Every sender is gone but the run is not over: wait for it.
                (None, Some(run)) => run.await,
                (None, None) => continue,
            };
            self.result = Some(result);
            self.run = None;
        }
    }

    /// Reads the remaining events and returns the run's outcome: the final state values.
    pub async fn result(mut self) -> Result<Values, GraphError> {
        while self.next().await.is_some() {}
        self.result.unwrap_or_else(|| {
            Err(GraphError::Internal(
                "the run ended without a result".into(),
            ))
        })
    }
}
