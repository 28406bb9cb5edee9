//! How long the local MiniLM takes: loading it, one short sentence, and a batch of 32.
//! `cargo bench -p stategraph-embed --features minilm` (needs `scripts/install-model.sh`).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use stategraph_embed::MiniLm;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("minilm");
    g.sample_size(10);
    g.bench_function("load", |b| b.iter(|| MiniLm::from_env().unwrap()));
    let model = MiniLm::from_env().unwrap();
    let one = vec!["what does the user like to eat?".to_owned()];
    g.bench_function("embed_1_sentence", |b| {
        b.iter(|| model.embed_blocking(&one).unwrap())
    });
    let batch: Vec<String> = (0..32)
        .map(|i| format!("memory {i}: the user mentioned a preference for dish number {i}"))
        .collect();
    g.bench_function("embed_batch_32", |b| {
        b.iter(|| model.embed_blocking(&batch).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
