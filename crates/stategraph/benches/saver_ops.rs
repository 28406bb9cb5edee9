//! Run with `cargo bench -p stategraph --bench saver_ops`.
//!
//! Per-operation cost of the checkpointer API on every backend, with the same workload:
//! `put` of a chat-sized checkpoint (a message list of 20 × 200 bytes plus two scalars),
//! `put_writes` of one task's two writes, and `get_tuple` of the latest checkpoint with its
//! writes. The servers are the local test services (`STATEGRAPH_TEST_*_URL`); each backend
//! uses its own fresh schema / database / key prefix.

#![allow(clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use stategraph::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    InMemorySaver, Value, checkpoint_id, value,
};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

async fn savers() -> Vec<(&'static str, Arc<dyn CheckpointSaver>)> {
    let unique = stategraph::uuid6(None).replace('-', "");
    let dir = std::env::temp_dir().join(format!("sg-bench-{unique}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sqlite = stategraph::SqliteSaver::builder(dir.join("bench.sqlite"))
        .synchronous(stategraph::Synchronous::Normal)
        .open()
        .expect("sqlite");
    let pg = stategraph_postgres::PostgresConfig::from_url(&env(
        "STATEGRAPH_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ))
    .expect("postgres url")
    .schema(format!("sg_bench_{unique}"))
    .connect()
    .await
    .expect("postgres");
    let mysql = stategraph_mysql::MySqlConfig::from_url(&env(
        "STATEGRAPH_TEST_MYSQL_URL",
        "mysql://root@127.0.0.1:3306/test",
    ))
    .expect("mysql url")
    .database(format!("sg_bench_{unique}"))
    .connect()
    .await
    .expect("mysql");
    let redis = stategraph_redis::RedisSaver::connect_with(
        &env("STATEGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
        &format!("sg_bench:{unique}"),
        Some(Duration::from_secs(600)),
    )
    .await
    .expect("redis");
    vec![
        ("memory", Arc::new(InMemorySaver::new())),
        ("sqlite", Arc::new(sqlite)),
        ("postgres", Arc::new(pg)),
        ("mysql", Arc::new(mysql)),
        ("redis", Arc::new(redis)),
    ]
}

fn chat_checkpoint(saver: &dyn CheckpointSaver, step: i64) -> Checkpoint {
    let mut cp = Checkpoint::empty();
    cp.id = checkpoint_id(step);
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
        cp.channel_versions.insert(ch.into(), v.clone());
    }
    cp
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (name, saver) in rt.block_on(savers()) {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(30)
            .measurement_time(Duration::from_secs(2));
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 1);
        let thread = format!("bench-{name}");
        let base = CheckpointConfig::new(thread.as_str());
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
        group.finish();
        rt.block_on(saver.delete_thread(&thread)).expect("cleanup");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
