//! `OpenAiEmbeddings` over real HTTP against a local OpenAI-compatible server started by the
//! test: it answers `POST /v1/embeddings` in OpenAI's format with real vectors (the local
//! MiniLM when the `minilm` feature is on, otherwise the model-free `HashingEmbeddings`),
//! listing them in shuffled order as the API may. The API key picks the server's behaviour:
//! `good` answers, `bad` is a 401 with OpenAI's error body, `short` drops a vector.

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use serde_json::{Value as Json, json};
#[cfg(not(feature = "minilm"))]
use stategraph_embed::HashingEmbeddings;
use stategraph_embed::{EmbeddingError, Embeddings, OpenAiEmbeddings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A request the server received: its headers (lower-cased names) and JSON body.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Json,
}

fn model() -> Arc<dyn Embeddings> {
    #[cfg(feature = "minilm")]
    {
        stategraph_embed::MiniLm::shared().unwrap_or_else(|e| panic!("model required: {e}"))
    }
    #[cfg(not(feature = "minilm"))]
    {
        Arc::new(HashingEmbeddings::new(384))
    }
}

/// Starts the server; returns its base URL and the requests it has seen.
async fn server() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let model = model();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let log = Arc::clone(&log);
            let model = Arc::clone(&model);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let head_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "client closed before the headers ended");
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.split("\r\n");
                let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_owned();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(": "))
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .map(|(_, v)| v.parse().unwrap())
                    .expect("a Content-Length");
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body: Json = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap();
                log.lock().unwrap().push(Seen {
                    path,
                    headers: headers.clone(),
                    body: body.clone(),
                });
                let auth = headers
                    .iter()
                    .find(|(k, _)| k == "authorization")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let (status, reply) = if auth == "Bearer bad" {
                    (
                        "401 Unauthorized",
                        json!({"error": {"message": "Incorrect API key provided: bad",
                                         "type": "invalid_request_error"}}),
                    )
                } else {
                    let texts: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap();
                    let vectors = model.embed_documents(&texts).await.unwrap();
                    let mut data: Vec<Json> = vectors
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
                        .collect();
                    data.reverse(); // the API does not promise input order
                    if auth == "Bearer short" {
                        data.pop();
                    }
                    (
                        "200 OK",
                        json!({"object": "list", "data": data, "model": body["model"],
                               "usage": {"prompt_tokens": 0, "total_tokens": 0}}),
                    )
                };
                let payload = reply.to_string();
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                    payload.len()
                );
                sock.write_all(response.as_bytes()).await.unwrap();
                sock.shutdown().await.ok();
            });
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("memory number {i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeds_in_order_in_batches_with_the_key() {
    let (url, seen) = server().await;
    let client = OpenAiEmbeddings::new("text-embedding-3-small")
        .base_url(url)
        .api_key("good")
        .dimensions(384)
        .batch_size(3);
    let input = texts(7);
    let got = client.embed_documents(&input).await.unwrap();

    // Order restored from `index`, and each vector is the model's own for that text.
    let want = model().embed_documents(&input).await.unwrap();
    assert_eq!(got, want);

    // 7 texts in batches of 3: three requests, each well-formed.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let sizes: Vec<usize> = seen
        .iter()
        .map(|s| s.body["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [3, 3, 1]);
    for s in &seen {
        assert_eq!(s.path, "/v1/embeddings");
        assert_eq!(s.body["model"], "text-embedding-3-small");
        assert_eq!(s.body["dimensions"], 384);
        assert_eq!(s.body["encoding_format"], "float");
        assert!(
            s.headers
                .iter()
                .any(|(k, v)| k == "authorization" && v == "Bearer good")
        );
    }
    assert_eq!(client.embed_query("x").await.unwrap().len(), 384);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_are_typed() {
    let (url, _) = server().await;
    let bad = OpenAiEmbeddings::new("m").base_url(&url).api_key("bad");
    let err = bad.embed_documents(&texts(2)).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, EmbeddingError::Provider { .. }), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");

    let short = OpenAiEmbeddings::new("m").base_url(&url).api_key("short");
    let err = short.embed_documents(&texts(4)).await.unwrap_err();
    assert!(
        matches!(
            err,
            EmbeddingError::Count {
                expected: 4,
                got: 3
            }
        ),
        "{err}"
    );

    let wrong_dims = OpenAiEmbeddings::new("m")
        .base_url(&url)
        .api_key("good")
        .dimensions(8);
    let err = wrong_dims.embed_documents(&texts(1)).await.unwrap_err();
    assert!(
        matches!(err, EmbeddingError::Dimensions { expected: 8, .. }),
        "{err}"
    );

    // Nothing listening: a clear provider error naming the URL.
    let gone = OpenAiEmbeddings::new("m").base_url("http://127.0.0.1:9/v1");
    let err = gone.embed_documents(&texts(1)).await.unwrap_err();
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
}

#[test]
fn debug_output_hides_the_key() {
    let c = OpenAiEmbeddings::new("m").api_key("sk-secret");
    let shown = format!("{c:?}");
    assert!(!shown.contains("sk-secret"), "{shown}");
    assert!(shown.contains("***"), "{shown}");
}
