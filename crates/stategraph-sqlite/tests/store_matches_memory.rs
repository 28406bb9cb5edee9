//! Differential test: the same pseudo-random batches on `SqliteStore` and `InMemoryStore` (the
//! reference semantics) give the same results — values, ordering (ties within a batch
//! included, by namespace label by label, then key), filters, pages and namespaces; semantic
//! searches give the same items with the same scores (to f32 precision).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph_sqlite::SqliteStoreConfig;
use stategraph_store::{
    GetOp, HashingEmbeddings, InMemoryStore, IndexConfig, IndexFields, ListNamespacesOp,
    MatchCondition, MatchType, Op, OpResult, PutOp, SearchOp, Store,
};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Labels chosen to catch text-vs-label ordering and LIKE pitfalls.
const LABELS: [&str; 6] = ["a", "a-x", "a_", "A", "b", "a.b"];
const WORDS: [&str; 6] = ["red", "apple", "pear", "blue", "sky", "stone"];

fn namespace(rng: &mut Rng) -> Vec<String> {
    let depth = 1 + rng.below(3);
    (0..depth)
        .map(|_| {
            let l = *rng.pick(&LABELS);
            // `a.b` is not a valid label: use it as two.
            if l == "a.b" { "ab" } else { l }.to_owned()
        })
        .collect()
}

fn value(rng: &mut Rng) -> Json {
    let text: Vec<&str> = (0..1 + rng.below(3)).map(|_| *rng.pick(&WORDS)).collect();
    let n: Json = match rng.below(3) {
        0 => json!(rng.below(10)),
        1 => json!(rng.below(10) as f64 + 0.5),
        _ => json!(format!("{}", rng.below(10))),
    };
    let mut v = json!({"text": text.join(" "), "n": n, "kind": *rng.pick(&["x", "y"])});
    if rng.below(3) == 0 {
        v["o"] = json!({"k": rng.below(2), "l": [rng.below(3)]});
    }
    v
}

fn filter(rng: &mut Rng) -> Option<serde_json::Map<String, Json>> {
    let f = match rng.below(8) {
        0 => json!({"kind": "x"}),
        1 => json!({"n": {"$gt": 4}}),
        2 => json!({"n": {"$lte": "5"}}),
        3 => json!({"kind": {"$ne": "y"}, "n": {"$gte": 2.5}}),
        4 => json!({"o": {"k": 1}}),
        5 => json!({"n": 3}),
        _ => return None,
    };
    f.as_object().cloned()
}

fn op(rng: &mut Rng) -> Op {
    match rng.below(10) {
        0..=4 => Op::Put(PutOp {
            namespace: namespace(rng),
            key: format!("k{}", rng.below(4)),
            value: (rng.below(6) != 0).then(|| value(rng)),
            index: match rng.below(4) {
                0 => IndexFields::Disabled,
                1 => IndexFields::Fields(vec!["kind".into(), "text".into()]),
                _ => IndexFields::Default,
            },
            ttl: None,
        }),
        5 => Op::Get(GetOp {
            namespace: namespace(rng),
            key: format!("k{}", rng.below(4)),
            refresh_ttl: true,
        }),
        6..=8 => {
            let mut prefix = namespace(rng);
            prefix.truncate(rng.below(3));
            Op::Search(SearchOp {
                namespace_prefix: prefix,
                filter: filter(rng),
                limit: 1 + rng.below(8),
                offset: rng.below(3),
                query: (rng.below(2) == 0).then(|| (*rng.pick(&WORDS)).to_owned()),
                refresh_ttl: true,
            })
        }
        _ => {
            let mut match_conditions = Vec::new();
            if rng.below(2) == 0 {
                let mut path = namespace(rng);
                path.truncate(1 + rng.below(2));
                if rng.below(3) == 0 {
                    path[0] = "*".into();
                }
                match_conditions.push(MatchCondition {
                    match_type: if rng.below(2) == 0 {
                        MatchType::Prefix
                    } else {
                        MatchType::Suffix
                    },
                    path,
                });
            }
            Op::ListNamespaces(ListNamespacesOp {
                match_conditions,
                max_depth: (rng.below(2) == 0).then(|| 1 + rng.below(2)),
                limit: 1 + rng.below(10),
                offset: rng.below(3),
            })
        }
    }
}

/// How much the batches exercised: non-empty gets, searches and scored searches, lists.
#[derive(Debug, Default)]
struct Coverage {
    gets: usize,
    searches: usize,
    scored: usize,
    lists: usize,
}

fn assert_same(i: usize, ours: &OpResult, reference: &OpResult, cov: &mut Coverage) {
    match (ours, reference) {
        (OpResult::Get(a), OpResult::Get(b)) => {
            let key = |x: &Option<stategraph_store::Item>| {
                x.as_ref()
                    .map(|x| (x.namespace.clone(), x.key.clone(), x.value.clone()))
            };
            assert_eq!(key(a), key(b), "op {i}: get");
            cov.gets += usize::from(a.is_some());
        }
        (OpResult::Search(a), OpResult::Search(b)) => {
            let rows = |v: &[stategraph_store::SearchItem]| {
                v.iter()
                    .map(|x| (x.namespace.clone(), x.key.clone(), x.value.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(rows(a), rows(b), "op {i}: search");
            cov.searches += usize::from(a.len() > 1);
            cov.scored += usize::from(a.iter().any(|x| x.score.is_some()));
            for (x, y) in a.iter().zip(b) {
                match (x.score, y.score) {
                    (Some(p), Some(q)) => assert!((p - q).abs() < 1e-5, "op {i}: {p} vs {q}"),
                    (p, q) => assert_eq!(p, q, "op {i}: score"),
                }
            }
        }
        (a, b) => {
            assert_eq!(a, b, "op {i}");
            cov.lists += usize::from(matches!(a, OpResult::ListNamespaces(l) if !l.is_empty()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_results_as_in_memory_store() {
    let mut cov = Coverage::default();
    for seed in 1..=6u64 {
        let embed = Arc::new(HashingEmbeddings::new(16));
        let index = IndexConfig::new(16, embed).with_fields(["text", "o"]);
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStoreConfig::file(dir.path().join("s.sqlite"))
            .index(index.clone())
            .connect()
            .await
            .unwrap();
        let memory = InMemoryStore::new().with_index(index);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1234_5678_9abc_def1));
        let mut n = 0;
        for _ in 0..60 {
            let batch: Vec<Op> = (0..1 + rng.below(5)).map(|_| op(&mut rng)).collect();
            let ours = sqlite.batch(batch.clone()).await.unwrap();
            let reference = memory.batch(batch).await.unwrap();
            assert_eq!(ours.len(), reference.len());
            for (a, b) in ours.iter().zip(&reference) {
                assert_same(n, a, b, &mut cov);
                n += 1;
            }
        }
    }
    println!("{cov:?}");
    assert!(
        cov.gets > 5 && cov.searches > 50 && cov.scored > 30 && cov.lists > 20,
        "{cov:?}"
    );
}
