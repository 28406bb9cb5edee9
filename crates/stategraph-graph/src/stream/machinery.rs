//! The stream machinery: the bounded queue between a run and its reader, the emitter a run\nwrites through, and [`RunStream`], what a caller reads.

use super::*;
use crate::state::DynState;

/// An event as the engine emits it, before it is typed for the stream's state.
pub(crate) type Raw = StreamEvent<()>;

impl Raw {
    /// The values of a graph whose output is `output` ([`CompiledGraph::output_channel`]),
    /// with the interrupts a task just stopped on, if any.
    ///
    /// [`CompiledGraph::output_channel`]: crate::CompiledGraph::output_channel
    pub(crate) fn values(
        values: Values,
        output: Option<&'static str>,
        interrupts: Vec<Interrupt>,
    ) -> Self {
        StreamEvent::Values(ValuesEvent {
            values,
            interrupts,
            output,
            state: PhantomData,
        })
    }

    fn typed<S>(self) -> StreamEvent<S> {
        match self {
            StreamEvent::Values(v) => StreamEvent::Values(ValuesEvent {
                values: v.values,
                interrupts: v.interrupts,
                output: v.output,
                state: PhantomData,
            }),
            StreamEvent::Updates(u) => StreamEvent::Updates(u),
            StreamEvent::Custom(v) => StreamEvent::Custom(v),
            StreamEvent::Messages(m) => StreamEvent::Messages(m),
            StreamEvent::Tasks(t) => StreamEvent::Tasks(t),
            StreamEvent::Checkpoints(c) => StreamEvent::Checkpoints(c),
            StreamEvent::Debug(d) => StreamEvent::Debug(d),
            StreamEvent::Events(e) => StreamEvent::Events(e),
            StreamEvent::Subgraph(e) => StreamEvent::Subgraph(e),
        }
    }
}

/// The queue between a run and its reader.
#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<Raw>,
    /// The reader, waiting for an event.
    reader: Option<Waker>,
    /// The reader is gone: nothing waits for room any more.
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when the reader takes an event (or leaves).
    room: Notify,
    /// `messages` mode: the ids of the messages shown, or in the state when a task started
    /// (shared by the run, its nodes and its subgraphs, as LangGraph's one handler).
    seen: Mutex<std::collections::HashSet<String>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sends events of the requested modes.
#[derive(Clone, Debug)]
pub(crate) struct Emitter {
    modes: BTreeSet<StreamMode>,
    shared: Arc<Shared>,
    /// The namespace of the run emitting (empty: the streamed graph itself).
    namespace: Arc<[String]>,
    /// Whether subgraph runs stream their events too.
    subgraphs: bool,
}

impl Emitter {
    pub(crate) fn wants(&self, mode: StreamMode) -> bool {
        self.modes.contains(&mode)
    }

    /// Whether subgraph runs stream their events too.
    pub(crate) fn streams_subgraphs(&self) -> bool {
        self.subgraphs
    }

    /// The modes streamed.
    pub(crate) fn modes(&self) -> impl Iterator<Item = StreamMode> + '_ {
        self.modes.iter().copied()
    }

    /// Queues `event` of a subgraph run in namespace `namespace` (whole, outermost first),
    /// if subgraph events and its mode are streamed.
    pub(crate) fn emit_nested(&self, namespace: Vec<String>, event: StreamEvent<DynState>) {
        if !self.subgraphs || !self.wants(event.mode()) {
            return;
        }
        self.enqueue(match event {
            StreamEvent::Events(e) => StreamEvent::Events(e),
            other => StreamEvent::Subgraph(SubgraphEvent {
                namespace,
                event: Box::new(other),
            }),
        });
    }

    /// Records a message id as shown; whether it was new.
    pub(crate) fn mark_seen(&self, id: &str) -> bool {
        let mut seen = self.shared.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(id) {
            return false;
        }
        seen.insert(id.to_owned())
    }

    /// Queues an event of `mode` (built only when the mode is streamed).
    pub(crate) fn emit(&self, mode: StreamMode, event: impl FnOnce() -> Raw) {
        if self.wants(mode) {
            self.push(event());
        }
    }

    /// The emitter for a subgraph run in namespace `checkpoint_ns`, if subgraph events are
    /// streamed.
    /// The emitter for a subgraph run in namespace `checkpoint_ns`: every mode if subgraph
    /// events are streamed, else only [`StreamMode::Events`] if that is (a subgraph's
    /// runnables are part of the run's events either way).
    pub(crate) fn nested(&self, checkpoint_ns: &str) -> Option<Emitter> {
        let modes = if self.subgraphs {
            self.modes.clone()
        } else if self.wants(StreamMode::Events) {
            BTreeSet::from([StreamMode::Events])
        } else {
            return None;
        };
        Some(Emitter {
            modes,
            shared: Arc::clone(&self.shared),
            namespace: checkpoint_ns.split('|').map(str::to_owned).collect(),
            subgraphs: self.subgraphs,
        })
    }

    fn push(&self, event: Raw) {
        // A runnable's event says where it ran by its `parent_ids`; it is never wrapped.
        let event = if self.namespace.is_empty() || matches!(event, StreamEvent::Events(_)) {
            event
        } else {
            StreamEvent::Subgraph(SubgraphEvent {
                namespace: self.namespace.to_vec(),
                event: Box::new(event.typed()),
            })
        };
        self.enqueue(event);
    }

    /// Queues `event` for the reader (dropped if the reader left) and wakes it.
    fn enqueue(&self, event: Raw) {
        let reader = {
            let mut q = self.shared.lock();
            if q.closed {
                return;
            }
            q.events.push_back(event);
            q.reader.take()
        };
        if let Some(w) = reader {
            w.wake();
        }
    }

    /// Waits until the reader has room for more events (at once if it has, or left).
    pub(crate) async fn room(&self) {
        loop {
            let notified = self.shared.room.notified();
            {
                let q = self.shared.lock();
                if q.closed || q.events.len() < STREAM_CAPACITY {
                    return;
                }
            }
            notified.await;
        }
    }

    /// A checkpoint event, also wrapped for `debug`.
    pub(crate) fn checkpoint(&self, step: i64, event: impl FnOnce() -> CheckpointEvent) {
        self.debug_pair(
            StreamMode::Checkpoints,
            step,
            event,
            StreamEvent::Checkpoints,
            |c| DebugPayload::Checkpoint(Box::new(c)),
        );
    }

    /// A task start, also wrapped for `debug`.
    pub(crate) fn task_start(&self, step: i64, event: impl FnOnce() -> TaskStart) {
        self.debug_pair(
            StreamMode::Tasks,
            step,
            event,
            |t| StreamEvent::Tasks(TaskEvent::Start(t)),
            DebugPayload::Task,
        );
    }

    /// A task result, also wrapped for `debug`.
    pub(crate) fn task_result(&self, step: i64, event: impl FnOnce() -> TaskResult) {
        self.debug_pair(
            StreamMode::Tasks,
            step,
            event,
            |t| StreamEvent::Tasks(TaskEvent::Result(t)),
            DebugPayload::TaskResult,
        );
    }

    fn debug_pair<T: Clone>(
        &self,
        mode: StreamMode,
        step: i64,
        event: impl FnOnce() -> T,
        plain: impl FnOnce(T) -> Raw,
        wrapped: impl FnOnce(T) -> DebugPayload,
    ) {
        let (want_plain, want_debug) = (self.wants(mode), self.wants(StreamMode::Debug));
        if !want_plain && !want_debug {
            return;
        }
        let event = event();
        if want_plain {
            self.push(plain(event.clone()));
        }
        if want_debug {
            self.push(StreamEvent::Debug(DebugEvent {
                step,
                timestamp: now_iso(),
                payload: wrapped(event),
            }));
        }
    }
}

type RunFuture = Pin<Box<dyn Future<Output = Result<RunEnd, GraphError>> + Send + 'static>>;

/// How a streamed run ended: its final values (with `__interrupt__` when it stopped on
/// interrupts) and whether it completed (stopped because no task was left to run).
pub(crate) struct RunEnd {
    pub(crate) values: Values,
    pub(crate) complete: bool,
}

/// A running graph's events: a [`futures_core::Stream`] of `Result<StreamEvent<S>,
/// GraphError>` that drives the run as it is read.
///
/// Every item is an event until the run ends; if the run fails, its error is the last item.
/// [`result`](Self::result) reads what is left and returns the final values instead. It owns
/// what it needs (no borrow of the graph), so it can be moved into `tokio::spawn` or used
/// as an HTTP response body; see the [module docs](super) for backpressure.
#[must_use = "a stream does nothing unless read"]
pub struct RunStream<S> {
    shared: Arc<Shared>,
    run: Option<RunFuture>,
    /// How the run ended, once it has.
    outcome: Option<Result<Values, GraphError>>,
    /// The run ended with no task left to run.
    complete: bool,
    /// The run's error was returned as an item.
    error_taken: bool,
    state: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for RunStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> RunStream<S> {
    pub(crate) fn new(
        modes: &[StreamMode],
        subgraphs: bool,
        start: impl FnOnce(Emitter) -> RunFuture,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let emitter = Emitter {
            modes: modes.iter().copied().collect(),
            shared: Arc::clone(&shared),
            namespace: Arc::from([]),
            subgraphs,
        };
        Self {
            run: Some(start(emitter)),
            shared,
            outcome: None,
            complete: false,
            error_taken: false,
            state: PhantomData,
        }
    }

    /// A stream of a run that failed before it started.
    pub(crate) fn failed(error: GraphError) -> Self {
        Self {
            shared: Arc::new(Shared::default()),
            run: None,
            outcome: Some(Err(error)),
            complete: false,
            error_taken: false,
            state: PhantomData,
        }
    }

    /// Takes the next queued event, or registers the reader to be woken by the next one.
    fn take(&self, cx: &Context<'_>) -> Option<Raw> {
        let event = {
            let mut q = self.shared.lock();
            match q.events.pop_front() {
                Some(e) => Some(e),
                None => {
                    q.reader = Some(cx.waker().clone());
                    None
                }
            }
        };
        if event.is_some() {
            self.shared.room.notify_waiters();
        }
        event
    }

    fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<StreamEvent<S>, GraphError>>> {
        loop {
            if let Some(raw) = self.take(cx) {
                return Poll::Ready(Some(Ok(raw.typed())));
            }
            if let Some(run) = self.run.as_mut() {
                match run.as_mut().poll(cx) {
                    Poll::Ready(outcome) => {
                        self.run = None;
                        self.outcome = Some(outcome.map(|end| {
                            self.complete = end.complete;
                            end.values
                        }));
                    }
                    Poll::Pending => {
                        if self.shared.lock().events.is_empty() {
                            return Poll::Pending;
                        }
                    }
                }
                continue;
            }
            return Poll::Ready(match self.outcome.take() {
                Some(Err(e)) => {
                    self.error_taken = true;
                    Some(Err(e))
                }
                other => {
                    self.outcome = other;
                    None
                }
            });
        }
    }

    /// Once the stream has returned its last item: the final values of a run that
    /// *completed*, i.e. stopped because no task was left to run — not on an interrupt
    /// (raised by a node, or `interrupt_before`/`interrupt_after`), an error or a dropped
    /// stream. The thread's latest state ([`CompiledGraph::get_state`]) then holds exactly
    /// these values, with no next nodes, tasks or interrupts, so a caller that needs it
    /// (to record how a thread was left) need not read it back from the saver. `None`
    /// before the end and for a run that did not complete.
    ///
    /// [`CompiledGraph::get_state`]: crate::CompiledGraph::get_state
    pub fn completed(&self) -> Option<&Values> {
        match &self.outcome {
            Some(Ok(values))
                if self.complete && self.run.is_none() && self.shared.lock().events.is_empty() =>
            {
                Some(values)
            }
            _ => None,
        }
    }

    /// Reads the remaining events and returns the run's outcome: the final state values.
    /// (If the run's error was already read as the stream's last item, this is an
    /// [`GraphError::Internal`] saying so.)
    pub async fn result(mut self) -> Result<Values, GraphError> {
        while let Some(item) = std::future::poll_fn(|cx| self.poll_event(cx)).await {
            item?;
        }
        match self.outcome.take() {
            Some(outcome) => outcome,
            None if self.error_taken => Err(GraphError::Internal(
                "the run's error was already returned by the stream".into(),
            )),
            None => Err(GraphError::Internal(
                "the run ended without a result".into(),
            )),
        }
    }
}

impl<S> futures_core::Stream for RunStream<S> {
    type Item = Result<StreamEvent<S>, GraphError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_event(cx)
    }
}

impl<S> Drop for RunStream<S> {
    fn drop(&mut self) {
        // Nobody reads any more: let a run waiting for room go on (and stop at its next
        // await, as its future is dropped with this stream).
        self.shared.lock().closed = true;
        self.shared.room.notify_waiters();
    }
}
