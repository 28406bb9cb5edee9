//! Run with `cargo bench -p stategraph-bench --bench hot_paths`.
//!
//! The hot paths, each on its own: the serializer (a chat-sized checkpoint to and from
//! LangGraph's msgpack), and on every backend `put` of that checkpoint, `put_writes` of one
//! task's two writes, `get_tuple` of the latest checkpoint, and one super-step as a user
//! sees it (`invoke` of a one-node graph continuing a thread: the input checkpoint, the
//! node, its checkpoint). The servers are the local test services
//! (`STATEGRAPH_TEST_*_URL`); each backend is opened fresh (a new file, schema, database or
//! key prefix) and removed afterwards.

#![allow(clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use stategraph::prelude::*;
use stategraph::{CheckpointId, JsonPlusSerializer, Serializer};
use stategraph_bench::{Backend, BackendKind};

const BACKENDS: [BackendKind; 5] = [
    BackendKind::Memory,
    BackendKind::Sqlite,
    BackendKind::Postgres,
    BackendKind::Mysql,
    BackendKind::Redis,
];

/// A checkpoint with 20 chat messages of 200 bytes and two scalars.
fn chat_checkpoint(saver: &dyn CheckpointSaver, step: i64) -> Checkpoint {
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(step);
    let message = "x".repeat(200);
    cp.channel_values.insert(
        "messages".into(),
        Value::List(
            (0..20)
                .map(|i| value!({"type": "human", "content": message, "id": i}))
                .collect(),
        ),
    );
    cp.channel_values.insert("turn".into(), Value::Int(step));
    cp.channel_values.insert("user".into(), "u-1".into());
    let v = saver.get_next_version(None);
    for ch in ["messages", "turn", "user"] {
        cp.channel_versions.insert(ch, v.clone());
    }
    cp
}

/// A turn's state: the last question and answer (last value wins, so the thread's state
/// stays the same size however many iterations criterion runs).
#[derive(State, Clone, Debug, Default)]
struct Turns {
    question: String,
    answer: String,
}

fn serializer(c: &mut Criterion) {
    let serde = JsonPlusSerializer::default();
    let cp = chat_checkpoint(&InMemorySaver::new(), 1).to_value();
    let (tag, bytes) = serde.dumps_typed(&cp).expect("dumps");
    let mut group = c.benchmark_group("serializer");
    group.bench_function("dumps_checkpoint", |b| {
        b.iter(|| serde.dumps_typed(&cp).expect("dumps"));
    });
    group.bench_function("loads_checkpoint", |b| {
        b.iter(|| serde.loads_typed(&tag, &bytes).expect("loads"));
    });
    group.finish();
}

fn savers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for kind in BACKENDS {
        let backend = rt.block_on(Backend::open(kind, None)).expect("backend");
        let saver = backend.saver().expect("a saver");
        let mut group = c.benchmark_group(kind.as_str());
        group
            .sample_size(30)
            .measurement_time(Duration::from_secs(2));
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 1);
        let base = CheckpointConfig::new("bench");
        let first = chat_checkpoint(saver.as_ref(), 0);
        let at = rt
            .block_on(saver.put(&base, &first, &meta, &first.channel_versions))
            .expect("put");
        group.bench_function("put", |b| {
            b.to_async(&rt).iter(|| async {
                let cp = chat_checkpoint(saver.as_ref(), 1);
                saver
                    .put(&at, &cp, &meta, &cp.channel_versions)
                    .await
                    .expect("put")
            });
        });
        group.bench_function("put_writes", |b| {
            b.to_async(&rt).iter(|| async {
                let writes = [
                    (
                        "messages".to_owned(),
                        value!([{"type": "ai", "content": "y".repeat(200)}]),
                    ),
                    ("turn".to_owned(), Value::Int(2)),
                ];
                let task = stategraph::uuid6(None);
                saver
                    .put_writes(&at, &writes, &task, "~__pregel_pull, agent")
                    .await
                    .expect("put_writes")
            });
        });
        group.bench_function("get_tuple", |b| {
            b.to_async(&rt)
                .iter(|| async { saver.get_tuple(&base).await.expect("get_tuple") });
        });

        let mut g = StateGraph::<Turns>::new();
        g.add_node("reply", |_s, _c| async {
            Ok(TurnsUpdate::default().answer("y".repeat(200)))
        });
        g.add_edge(START, "reply");
        let graph = g
            .compile()
            .expect("graph")
            .with_checkpointer(Arc::clone(&saver));
        group.bench_function("super_step", |b| {
            b.to_async(&rt).iter(|| async {
                graph
                    .invoke(
                        TurnsUpdate::default().question("x".repeat(200)),
                        RunConfig::thread("graph"),
                    )
                    .await
                    .expect("invoke")
            });
        });
        group.finish();
        rt.block_on(backend.remove()).expect("cleanup");
    }
}

criterion_group!(benches, serializer, savers);
criterion_main!(benches);
