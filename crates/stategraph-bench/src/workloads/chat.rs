//! `chat` (one thread, a turn per invoke) and `history` (listing that thread's history).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::json;
use stategraph::{CompiledGraph, END, RunConfig, START, StateGraph};

use super::{attach, expect_count, failed, fresh_config, letters, unexpected};
use crate::{
    Backend, BenchError, Measurement, Params, Spec, Unit, Workload, median, ms, repeat, timed_runs,
};

#[derive(stategraph::State, Clone, Debug, Default)]
struct Chat {
    #[reducer(append)]
    messages: Vec<String>,
}

/// START → reply → END; with `--delta`, `messages` is stored as deltas.
fn chat_graph(backend: &Backend, params: &Params) -> Result<CompiledGraph<Chat>, BenchError> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("reply", |_s, _c| async {
        Ok(ChatUpdate::default().messages([letters(200)]))
    });
    g.add_edge(START, "reply").add_edge("reply", END);
    if params.delta {
        g.delta_storage(params.snapshot_every);
    }
    Ok(attach(g.compile().map_err(failed("chat"))?, backend))
}

/// One turn: the user's message in, the reply appended.
async fn turn(
    graph: &CompiledGraph<Chat>,
    config: &RunConfig,
    turn: usize,
    stateful: bool,
) -> Result<(), BenchError> {
    let out = graph
        .invoke(
            ChatUpdate::default().messages([letters(200)]),
            config.clone(),
        )
        .await
        .map_err(failed("chat"))?;
    let want = if stateful { 2 * (turn + 1) } else { 2 };
    expect_count("chat", "messages", out.messages.len(), want)
}

fn delta_fields(m: &mut Measurement, params: &Params) {
    m.extra.insert("delta".into(), json!(params.delta));
    m.extra.insert(
        "snapshot_every".into(),
        if params.delta {
            json!(params.snapshot_every)
        } else {
            json!(null)
        },
    );
}

/// `chat`: n turns on one thread, each turn timed.
pub(super) struct ChatTurns;

#[async_trait::async_trait]
impl Workload for ChatTurns {
    fn spec(&self) -> Spec {
        Spec::new("chat", 200, 1, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        _runs: usize,
        params: &Params,
    ) -> Result<Measurement, BenchError> {
        let graph = chat_graph(backend, params)?;
        let config = fresh_config(backend);
        let stateful = backend.saver().is_some();
        let mut turn_ms = Vec::with_capacity(n);
        let mut bytes_by_turn = Vec::new();
        for t in 0..n {
            let start = Instant::now();
            turn(&graph, &config, t, stateful).await?;
            turn_ms.push(start.elapsed().as_secs_f64() * 1e3);
            if ((t + 1).is_multiple_of(10) || t + 1 == n)
                && let Some(size) = backend.size().await?
            {
                bytes_by_turn.push(json!([t + 1, size.bytes]));
            }
        }
        let mut m = Measurement::default();
        let edge = 20.min(n);
        m.extra.insert(
            "turn_ms".into(),
            json!(turn_ms.iter().map(|&x| ms(x)).collect::<Vec<_>>()),
        );
        m.extra
            .insert("first20_ms".into(), ms(median(&turn_ms[..edge])));
        m.extra
            .insert("last20_ms".into(), ms(median(&turn_ms[n - edge..])));
        if backend.kind().persistent() {
            m.extra.insert("bytes_by_turn".into(), json!(bytes_by_turn));
        }
        delta_fields(&mut m, params);
        m.samples_ms = turn_ms;
        Ok(m)
    }
}

/// `history`: the whole history of an n-turn chat thread, listed `runs` times.
pub(super) struct History;

#[async_trait::async_trait]
impl Workload for History {
    fn spec(&self) -> Spec {
        Spec::new("history", 200, 10, Unit::Checkpoint)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        params: &Params,
    ) -> Result<Measurement, BenchError> {
        if backend.saver().is_none() {
            return Err(unexpected(
                "history",
                "listing history needs a checkpointer (not --backend none)".into(),
            ));
        }
        let graph = chat_graph(backend, params)?;
        let config = fresh_config(backend);
        for t in 0..n {
            turn(&graph, &config, t, true).await?;
        }
        // No warm-up listing (as on the Python side); each listing is dropped after its clock
        // stops, as Python frees its list outside the timed region.
        let listed = AtomicUsize::new(0);
        let samples = timed_runs(runs, || async {
            let history = graph
                .get_state_history(&config, Default::default())
                .await
                .map_err(failed("history"))?;
            listed.store(history.len(), Ordering::Relaxed);
            Ok(history)
        })
        .await?;
        let listed = listed.into_inner();
        let mut m = Measurement {
            samples_ms: samples,
            ..Measurement::default()
        };
        m.extra.insert("checkpoints".into(), json!(listed));
        // The same thread's rows fetched without decoding, by the same driver: the floor.
        if let Some(reader) = crate::read_floor::RawReader::open(backend).await? {
            let thread = config.thread_id.clone().unwrap_or_default();
            let fetched = AtomicUsize::new(0);
            let floor = repeat(runs, || async {
                fetched.store(reader.fetch(&thread).await?, Ordering::Relaxed);
                Ok(())
            })
            .await?;
            let floor_ms = median(&floor);
            m.extra.insert("read_floor_ms".into(), json!(floor_ms));
            m.extra.insert(
                "read_floor_ms_per_checkpoint".into(),
                json!(floor_ms / listed.max(1) as f64),
            );
            m.extra
                .insert("read_bytes".into(), json!(fetched.into_inner()));
        }
        delta_fields(&mut m, params);
        Ok(m)
    }
}
