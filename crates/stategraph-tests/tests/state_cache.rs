//! What a graph remembers of the checkpoints its runs ended on (`with_state_cache`) and the
//! typed state its nodes last read (`State::from_values_reusing`) never changes what a node
//! sees: every node of every turn sees exactly the state a graph without the cache sees, when
//! lists grow, when an item in the middle is replaced, when another graph (another process)
//! moves the thread on between turns, and when a node keeps its state after it returns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, InMemorySaver, SqliteSaver};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Note {
    id: String,
    text: String,
}

fn merge_notes(mut cur: Vec<Note>, upd: Vec<Note>) -> Vec<Note> {
    for n in upd {
        match cur.iter_mut().find(|c| c.id == n.id) {
            Some(slot) => *slot = n,
            None => cur.push(n),
        }
    }
    cur
}

#[derive(State, Clone, Debug, Default, PartialEq)]
struct Book {
    #[reducer(append)]
    lines: Vec<String>,
    /// Replaced by id, so an item in the middle changes.
    #[reducer(custom = merge_notes)]
    notes: Vec<Note>,
    count: i64,
    title: String,
}

/// Everything the `write` node saw, turn by turn.
type Seen = Arc<Mutex<Vec<Book>>>;

/// START → write → END. `write` records the state it reads, appends a line, replaces the
/// note `n{turn % 3}` (so notes in the middle change), bumps the count and keeps the title.
/// With `keep`, it also holds on to its state after returning.
fn book_graph(
    saver: Arc<dyn CheckpointSaver>,
    delta: bool,
    cache: usize,
    seen: Seen,
    keep: Option<Arc<Mutex<Vec<Arc<Book>>>>>,
) -> CompiledGraph<Book> {
    let mut g = StateGraph::<Book>::new();
    g.add_node("write", move |s, _c| {
        let seen = Arc::clone(&seen);
        let keep = keep.clone();
        async move {
            seen.lock().unwrap().push((*s).clone());
            let turn = s.count;
            if let Some(k) = keep {
                k.lock().unwrap().push(Arc::clone(&s));
            }
            Ok(BookUpdate::default()
                .lines([format!("line {turn}")])
                .notes([Note {
                    id: format!("n{}", turn % 3),
                    text: format!("written in turn {turn}"),
                }])
                .count(turn + 1))
        }
    });
    g.add_edge(START, "write");
    if delta {
        g.delta_storage(3);
    }
    g.compile()
        .unwrap()
        .with_checkpointer(saver)
        .with_state_cache(cache)
}

async fn turn(graph: &CompiledGraph<Book>, thread: &str, t: usize) {
    graph
        .invoke(
            BookUpdate::default().lines([format!("user {t}")]),
            RunConfig::thread(thread),
        )
        .await
        .unwrap();
}

/// Runs `turns` turns with the cache on and off (separate threads of the same saver) and
/// returns what the nodes saw on each.
async fn both_ways(
    saver: Arc<dyn CheckpointSaver>,
    delta: bool,
    turns: usize,
) -> (Vec<Book>, Vec<Book>) {
    let (with, without): (Seen, Seen) = Default::default();
    let cached = book_graph(Arc::clone(&saver), delta, 8, Arc::clone(&with), None);
    let plain = book_graph(Arc::clone(&saver), delta, 0, Arc::clone(&without), None);
    for t in 0..turns {
        turn(&cached, &format!("cached-{delta}"), t).await;
        turn(&plain, &format!("plain-{delta}"), t).await;
    }
    let with = with.lock().unwrap().clone();
    let without = without.lock().unwrap().clone();
    (with, without)
}

async fn savers() -> Vec<(&'static str, Arc<dyn CheckpointSaver>)> {
    vec![
        ("memory", Arc::new(InMemorySaver::new())),
        (
            "sqlite",
            Arc::new(SqliteSaver::connect("sqlite::memory:").await.unwrap()),
        ),
    ]
}

#[tokio::test]
async fn nodes_see_the_same_state_with_and_without_the_cache() {
    for (name, saver) in savers().await {
        for delta in [false, true] {
            let (with, without) = both_ways(Arc::clone(&saver), delta, 9).await;
            assert_eq!(with.len(), 9);
            assert_eq!(with, without, "{name}, delta {delta}");
            // The last turn saw every line so far and the notes replaced in place.
            let last = with.last().unwrap();
            assert_eq!(last.lines.len(), 2 * 8 + 1);
            assert_eq!(last.notes.len(), 3);
            assert_eq!(last.notes[1].text, "written in turn 7");
            assert_eq!(last.count, 8);
        }
    }
}

#[tokio::test]
async fn a_thread_moved_on_elsewhere_is_read_again() {
    for (name, saver) in savers().await {
        for delta in [false, true] {
            let seen: Seen = Default::default();
            let ours = book_graph(Arc::clone(&saver), delta, 8, Arc::clone(&seen), None);
            // Another graph on the same database: another process, as far as ours knows.
            let theirs = book_graph(Arc::clone(&saver), delta, 8, Default::default(), None);
            let thread = format!("shared-{delta}");
            turn(&ours, &thread, 0).await;
            turn(&theirs, &thread, 1).await;
            turn(&theirs, &thread, 2).await;
            turn(&ours, &thread, 3).await;
            let last = seen.lock().unwrap().last().unwrap().clone();
            assert_eq!(
                last.lines,
                [
                    "user 0", "line 0", "user 1", "line 1", "user 2", "line 2", "user 3"
                ],
                "{name}, delta {delta}: our second turn sees what the other graph wrote"
            );
            assert_eq!(last.count, 3);
            let state = ours.get_state(&RunConfig::thread(&thread)).await.unwrap();
            assert_eq!(state.values["count"], Value::from(4));
        }
    }
}

#[tokio::test]
async fn a_node_keeping_its_state_is_not_affected() {
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let kept: Arc<Mutex<Vec<Arc<Book>>>> = Default::default();
    let seen: Seen = Default::default();
    let g = book_graph(saver, false, 8, Arc::clone(&seen), Some(Arc::clone(&kept)));
    for t in 0..4 {
        turn(&g, "kept", t).await;
    }
    let kept = kept.lock().unwrap();
    // What each node kept is what it saw, untouched by the turns after it.
    for (k, s) in kept.iter().zip(seen.lock().unwrap().iter()) {
        assert_eq!(**k, *s);
    }
    assert_eq!(kept[0].lines, ["user 0"]);
    assert_eq!(kept[3].lines.len(), 7);
}
