//! Run with `cargo bench -p stategraph-tests --bench delta_read`.
//!
//! The cost of reading the latest state of a chat stored as deltas (a snapshot every 100
//! updates, two ~200-byte messages a turn) after 100, 500 and 1,000 turns, on SQLite and
//! Postgres, next to the same chat stored in full. A delta read replays at most one snapshot
//! interval of writes, so its time should not grow with the number of turns; a full read
//! decodes the whole history every time.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability};

#[derive(State, Clone, Debug, Default)]
struct Chat {
    #[reducer(append)]
    messages: Vec<String>,
}

fn message(who: &str, turn: usize) -> String {
    format!(
        "{who} message of turn {turn}: {}",
        "lorem ipsum ".repeat(20)
    )[..200]
        .to_owned()
}

fn chat_graph(saver: Arc<dyn CheckpointSaver>, delta: bool) -> CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("reply", |s, _c| async move {
        Ok(ChatUpdate::default().messages([message("AI", s.messages.len() / 2)]))
    });
    g.add_edge(START, "reply");
    if delta {
        g.delta_storage(100);
    }
    g.compile().unwrap().with_checkpointer(saver)
}

async fn savers(unique: &str) -> Vec<(&'static str, Arc<dyn CheckpointSaver>)> {
    let dir = std::env::temp_dir().join(format!("sg-delta-bench-{unique}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sqlite = SqliteConfig::file(dir.join("bench.sqlite"))
        .synchronous(stategraph::Synchronous::Normal)
        .connect()
        .await
        .expect("sqlite");
    let url = stategraph_testkit::services::postgres_url();
    let pg = stategraph_postgres::PostgresConfig::from_url(&url)
        .expect("postgres url")
        .schema(format!("sg_bench_{unique}"))
        .connect()
        .await
        .expect("postgres");
    vec![("sqlite", Arc::new(sqlite)), ("postgres", Arc::new(pg))]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let unique = stategraph::uuid6(None).replace('-', "");
    let savers = rt.block_on(savers(&unique));
    let mut group = c.benchmark_group("get_state_latest");
    group.sample_size(20);
    for (backend, saver) in &savers {
        for delta in [true, false] {
            let graph = chat_graph(Arc::clone(saver), delta);
            let storage = if delta { "delta" } else { "full" };
            let mut done = 0;
            for turns in [100, 500, 1000] {
                let thread = format!("{storage}-{unique}");
                rt.block_on(async {
                    for turn in done..turns {
                        let mut config = RunConfig::thread(&thread);
                        config.durability = Durability::Exit;
                        graph
                            .invoke(
                                ChatUpdate::default().messages([message("user", turn)]),
                                config,
                            )
                            .await
                            .unwrap();
                    }
                });
                done = turns;
                let config = RunConfig::thread(&thread);
                group.bench_with_input(
                    BenchmarkId::new(format!("{backend}/{storage}"), turns),
                    &turns,
                    |b, _| b.iter(|| rt.block_on(graph.get_state(&config)).unwrap()),
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
