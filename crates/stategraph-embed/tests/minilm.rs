//! `MiniLm` against sentence-transformers: the fixture (`tests/fixtures/minilm.json`, recorded
//! by `scripts/record-minilm-fixture.py`) holds the vectors sentence-transformers computes for
//! a few sentences — short, non-ASCII, empty, and one past the 256-token window. Ours must
//! agree to cosine ≥ 0.999 each, batched or one by one.
//!
//! Needs the model (`scripts/install-model.sh`, which `scripts/test.sh` runs); a missing model
//! fails these tests, it does not skip them.

#![cfg(feature = "minilm")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph_embed::{EmbeddingError, Embeddings, MiniLm};

#[derive(serde::Deserialize)]
struct Fixture {
    sentences: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn fixture() -> Fixture {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/minilm.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn model() -> Arc<MiniLm> {
    MiniLm::shared().unwrap_or_else(|e| panic!("the MiniLM model is required: {e}"))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_match_sentence_transformers() {
    let fx = fixture();
    assert!(fx.sentences.len() >= 5);
    let ours = model().embed_documents(&fx.sentences).await.unwrap();
    assert_eq!(ours.len(), fx.sentences.len());
    for ((text, theirs), mine) in fx.sentences.iter().zip(&fx.embeddings).zip(&ours) {
        assert_eq!(mine.len(), 384);
        let c = cosine(mine, theirs);
        let shown: String = text.chars().take(40).collect();
        eprintln!("cosine {c:.6}  {shown:?}");
        assert!(c >= 0.999, "{shown:?}: cosine {c}");
        let norm: f32 = mine.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length, got {norm}");
    }
    // The values sentence-transformers gives for "I like pizza" (first dimensions).
    let pizza = &ours[0];
    for (got, want) in pizza
        .iter()
        .zip([-0.11168, 0.00138, -0.02432, 0.06124, -0.10420])
    {
        assert!((got - want).abs() < 5e-4, "{got} vs {want}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_and_padding_do_not_change_vectors() {
    let fx = fixture();
    let m = model();
    let small = MiniLm::clone(&m).with_batch_size(2);
    let batched = small.embed_documents(&fx.sentences).await.unwrap();
    for (text, whole) in fx.sentences.iter().zip(&batched) {
        let alone = m.embed_query(text).await.unwrap();
        assert!(cosine(&alone, whole) >= 0.9999, "{text:?}");
    }
    assert!(m.embed_documents(&[]).await.unwrap().is_empty());
    assert_eq!(m.dims(), Some(384));
}

#[test]
fn a_missing_model_names_the_install_command() {
    let dir = std::env::temp_dir().join("stategraph-no-model-here");
    let err = MiniLm::from_dir(&dir).unwrap_err();
    assert!(matches!(err, EmbeddingError::ModelUnavailable(_)), "{err}");
    let message = err.to_string();
    assert!(message.contains("scripts/install-model.sh"), "{message}");
    assert!(message.contains("STATEGRAPH_MINILM_DIR"), "{message}");
    assert!(message.contains("stategraph-no-model-here"), "{message}");
}
