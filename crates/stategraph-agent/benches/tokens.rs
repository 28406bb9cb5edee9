//! What token streaming costs: a model's answer of 1,000 pieces read from an OpenAI-compatible
//! server on loopback (HTTP, server-sent events, parsing), added up into the whole message,
//! and streamed through a graph's `messages` mode to its reader.
//! `cargo bench -p stategraph-agent --bench tokens`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::StreamExt;
use stategraph_agent::{
    ChatModel, ChatModelExt, ChatRequest, MessagesState, MessagesUpdate, OpenAiConfig,
};
use stategraph_graph::{RunConfig, START, StateGraph, StreamMode};
use stategraph_messages::{AiMessageChunk, Message};
use stategraph_testkit::chat::{Answer, ChatServer};

const PIECES: usize = 1_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The loopback server streams one piece per word.
    let answer: String = (0..PIECES).map(|i| format!("w{i} ")).collect();
    let server = rt.block_on(ChatServer::start(move |_| Answer::text(&answer)));
    let model = Arc::new(
        OpenAiConfig::new("bench")
            .base_url(server.base_url())
            .build()
            .unwrap(),
    );
    let request = ChatRequest::new([Message::human("go")]);

    let mut g = c.benchmark_group("tokens_1000");
    g.sample_size(20);
    g.bench_function("client_stream", |b| {
        b.to_async(&rt).iter(|| async {
            let n = model.stream(&request).await.unwrap().count().await;
            assert!(n > PIECES);
        })
    });

    let pieces: Vec<AiMessageChunk> = (0..PIECES)
        .map(|i| AiMessageChunk::text_piece(format!("w{i} ")).with_id("m"))
        .collect();
    g.bench_function("merge", |b| {
        b.iter(|| {
            let mut sum = pieces[0].clone();
            for p in &pieces[1..] {
                sum.merge(p.clone()).unwrap();
            }
            sum.into_message()
        })
    });

    let mut graph = StateGraph::<MessagesState>::new();
    let m = Arc::clone(&model);
    graph.add_node("agent", move |_s, ctx| {
        let m = Arc::clone(&m);
        async move {
            let reply = m
                .call(&ChatRequest::new([Message::human("go")]), &ctx)
                .await?;
            Ok(MessagesUpdate::messages([reply]))
        }
    });
    graph.add_edge(START, "agent");
    let graph = graph.compile().unwrap();
    g.bench_function("graph_messages_mode", |b| {
        b.to_async(&rt).iter(|| async {
            let input = MessagesUpdate::messages([Message::human("go")]);
            let n = graph
                .stream(input, RunConfig::default(), &[StreamMode::Messages])
                .count()
                .await;
            assert!(n > PIECES);
        })
    });
    g.bench_function("graph_invoke_no_stream", |b| {
        b.to_async(&rt).iter(|| async {
            let input = MessagesUpdate::messages([Message::human("go")]);
            graph.invoke(input, RunConfig::default()).await.unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
