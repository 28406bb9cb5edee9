//! Store conformance: semantic search and what gets embedded.

use super::*;

pub(super) async fn memories(
    make: MakeStore<'_>,
    embed: Arc<CountingEmbeddings>,
) -> (StoreFixture, String) {
    let f = make(indexed(embed, &["text"])).await;
    let r = root();
    let docs = [
        ("u1", "pizza", "I like pizza with extra cheese", 1),
        ("u1", "hike", "We went hiking in the mountains", 2),
        ("u1", "code", "Rust programming is my job", 3),
        ("u2", "pizza", "pizza is the worst food", 4),
        ("u2", "cat", "my cat sleeps all day", 5),
    ];
    for (user, key, text, n) in docs {
        f.store()
            .put(&[&r, user, "memories"], key, json!({"text": text, "n": n}))
            .await
            .unwrap();
    }
    (f, r)
}

pub async fn semantic_search_ranks_by_meaning(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store().as_ref();
    let got = search(
        s,
        &[&r, "u1"],
        SearchOptions::new().query("cheese pizza").limit(2),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert_eq!(got[0].namespace, ns(&[&r, "u1", "memories"]));
    let got = search(
        s,
        &[&r, "u1"],
        SearchOptions::new().query("mountains hiking"),
    )
    .await;
    assert_eq!(got[0].key, "hike");
    assert_eq!(got.len(), 3);
}

pub async fn semantic_search_respects_prefix_and_filter(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store().as_ref();
    let got = search(s, &[&r, "u2"], SearchOptions::new().query("pizza")).await;
    assert!(
        got.iter().all(|i| i.namespace[1] == "u2"),
        "only u2's memories"
    );
    assert_eq!(got[0].key, "pizza");
    let got = search(
        s,
        &[&r],
        SearchOptions::new()
            .query("pizza")
            .filter(json!({"n": {"$gte": 4}})),
    )
    .await;
    assert_eq!(keys(&got), ["pizza", "cat"]);
    assert_eq!(got[0].namespace[1], "u2");
}

pub async fn semantic_search_scores_descending(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let got = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("my cat"),
    )
    .await;
    assert_eq!(got.len(), 5);
    let scores: Vec<f64> = got.iter().map(|i| i.score.expect("scored")).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1] - 1e-6), "{scores:?}");
    assert!(scores[0] > 0.5 && scores[0] <= 1.0 + 1e-6, "{scores:?}");
    let page = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("my cat").offset(1).limit(2),
    )
    .await;
    assert_eq!(keys(&page), keys(&got[1..3]));
}

pub async fn semantic_search_without_index_ignores_query(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store()
        .put(&[&r], "a", json!({"text": "pizza"}))
        .await
        .unwrap();
    let got = search(
        f.store().as_ref(),
        &[&r],
        SearchOptions::new().query("pizza"),
    )
    .await;
    assert_eq!(keys(&got), ["a"]);
    assert_eq!(got[0].score, None);
}

pub async fn index_false_is_not_embedded(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["text"])).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "yes", json!({"text": "green apples"}))
        .await
        .unwrap();
    let opts = PutOptions {
        index: IndexFields::Disabled,
        ttl: Ttl::Default,
    };
    s.put_with(&[&r], "no", json!({"text": "green apples"}), opts)
        .await
        .unwrap();
    assert_eq!(embed.documents.load(Ordering::SeqCst), 1);
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("green apples"),
    )
    .await;
    assert_eq!(
        keys(&got),
        ["yes", "no"],
        "unembedded items come after scored ones"
    );
    assert!(got[0].score.is_some());
    assert_eq!(got[1].score, None);
}

pub async fn index_fields_override(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["text"])).await;
    let r = root();
    let s = f.store();
    let opts = PutOptions {
        index: IndexFields::Fields(vec!["title".into()]),
        ttl: Ttl::Default,
    };
    s.put_with(
        &[&r],
        "a",
        json!({"title": "volcano facts", "text": "ocean"}),
        opts,
    )
    .await
    .unwrap();
    s.put(
        &[&r],
        "b",
        json!({"title": "ocean", "text": "volcano facts"}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("volcano facts"),
    )
    .await;
    let top: Vec<&str> = keys(&got);
    assert_eq!(
        got[0].score, got[1].score,
        "both embed the text `volcano facts`: {top:?}"
    );
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("ocean")).await;
    assert!(
        got[0].score.unwrap() < 0.5,
        "neither embedded `ocean`: {:?}",
        got[0].score
    );
}

pub async fn index_array_paths_embed_each_element(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["notes[*].body"])).await;
    let r = root();
    let s = f.store();
    let doc = json!({"notes": [{"body": "tax return deadline"}, {"body": "buy oat milk"}]});
    s.put(&[&r], "a", doc).await.unwrap();
    s.put(
        &[&r],
        "b",
        json!({"notes": [{"body": "dentist appointment"}]}),
    )
    .await
    .unwrap();
    assert_eq!(embed.documents.load(Ordering::SeqCst), 3);
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("oat milk")).await;
    assert_eq!(got[0].key, "a", "the second element alone makes `a` match");
    assert!(got[0].score.unwrap() > 0.7);
}

pub async fn reembeds_only_changed_text(make: MakeStore<'_>) {
    let embed = counting();
    let f = make(indexed(embed.clone(), &["title", "body"])).await;
    let r = root();
    let s = f.store();
    let count = || embed.documents.load(Ordering::SeqCst);
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b one", "n": 1}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 2);
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b one", "n": 2}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 2, "unindexed change: nothing re-embedded");
    s.put(
        &[&r],
        "k",
        json!({"title": "t one", "body": "b two", "n": 2}),
    )
    .await
    .unwrap();
    assert_eq!(count(), 3, "only the changed field is re-embedded");
    let opts = PutOptions {
        index: IndexFields::Disabled,
        ttl: Ttl::Default,
    };
    s.put_with(&[&r], "k", json!({"title": "t one", "body": "b two"}), opts)
        .await
        .unwrap();
    assert_eq!(count(), 3);
    let got = search(s.as_ref(), &[&r], SearchOptions::new().query("t one")).await;
    assert_eq!(got[0].score, None, "index=false dropped the vectors");
    s.put(&[&r], "k", json!({"title": "t one", "body": "b two"}))
        .await
        .unwrap();
    assert_eq!(count(), 5, "vectors dropped earlier are computed again");
}

pub async fn reindex_after_text_change(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store();
    s.put(
        &[&r, "u1", "memories"],
        "pizza",
        json!({"text": "I now prefer sushi rolls", "n": 1}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("sushi rolls"),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert!(got[0].score.unwrap() > 0.5);
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("extra cheese"),
    )
    .await;
    assert!(
        got[0].score.unwrap() < 0.5,
        "the old text is no longer indexed"
    );
}

pub async fn delete_removes_vectors(make: MakeStore<'_>) {
    let (f, r) = memories(make, counting()).await;
    let s = f.store();
    s.delete(&[&r, "u1", "memories"], "pizza").await.unwrap();
    let got = search(
        s.as_ref(),
        &[&r],
        SearchOptions::new().query("pizza cheese"),
    )
    .await;
    assert_eq!(got.len(), 4);
    assert!(
        !got.iter()
            .any(|i| i.key == "pizza" && i.namespace[1] == "u1")
    );
    // Putting the key again embeds it again.
    s.put(
        &[&r, "u1", "memories"],
        "pizza",
        json!({"text": "pizza cheese"}),
    )
    .await
    .unwrap();
    let got = search(
        s.as_ref(),
        &[&r, "u1"],
        SearchOptions::new().query("pizza cheese"),
    )
    .await;
    assert_eq!(got[0].key, "pizza");
    assert!(got[0].score.unwrap() > 0.99);
}
