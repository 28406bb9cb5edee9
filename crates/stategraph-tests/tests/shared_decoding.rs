//! A history listing decodes each distinct stored message once: on a 1,000-turn chat thread
//! stored in full (every checkpoint holds every earlier message again), the serializer is
//! asked to decode each message's bytes once and shares that value with every later
//! checkpoint — on SQLite (every value inside the checkpoint row) and on Postgres and MySQL
//! (LangGraph's blob layout: a blob per channel version).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use stategraph::value::DecodeCache;
use stategraph::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    JsonPlusSerializer, ListOptions, Message, SerdeError, Serializer, SqliteConfig, Value,
};

const TURNS: usize = 1_000;

/// The default serializer, counting what it is asked to decode: values decoded alone, and
/// for reads of many values the cache's figures after the last call.
#[derive(Debug, Default)]
struct Counting {
    inner: JsonPlusSerializer,
    alone: AtomicU64,
    shared: Mutex<(u64, u64)>,
}

impl Serializer for Counting {
    fn dumps_typed(&self, value: &Value) -> Result<(String, Vec<u8>), SerdeError> {
        self.inner.dumps_typed(value)
    }
    fn loads_typed(&self, type_tag: &str, data: &[u8]) -> Result<Value, SerdeError> {
        self.alone.fetch_add(1, Ordering::Relaxed);
        self.inner.loads_typed(type_tag, data)
    }
    fn loads_typed_shared(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: &mut DecodeCache,
    ) -> Result<Value, SerdeError> {
        let value = self.inner.loads_typed_shared(type_tag, data, cache)?;
        *self.shared.lock().unwrap() = (cache.decoded(), cache.reused());
        Ok(value)
    }
}

/// Turn `t`: the user's message and the model's answer (LangChain messages, as Python and
/// the agents store them).
fn turn(t: usize) -> [Value; 2] {
    [
        Message::human(format!("question {t}")).to_value(),
        Message::ai(format!("answer {t}"), Vec::new()).to_value(),
    ]
}

/// A thread of `TURNS` checkpoints, checkpoint t holding the messages of turns 0..=t (none
/// at all with `chat: false`: the same checkpoints without messages).
async fn thread(saver: &dyn CheckpointSaver, chat: bool) -> String {
    let thread = stategraph::uuid4();
    let mut parent = CheckpointConfig::new(&thread);
    let mut messages: Vec<Value> = Vec::new();
    let mut version = None;
    for t in 0..TURNS {
        if chat {
            messages.extend(turn(t));
        }
        let next = saver.get_next_version(version.as_ref());
        let mut cp = Checkpoint::empty();
        cp.id = stategraph::CheckpointId::for_step(i64::try_from(t).unwrap());
        cp.channel_values
            .insert("messages".into(), Value::from(messages.clone()));
        cp.channel_versions.insert("messages", next.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, i64::try_from(t).unwrap());
        parent = saver
            .put(&parent, &cp, &meta, &cp.channel_versions)
            .await
            .unwrap();
        version = Some(next);
    }
    thread
}

/// Lists `thread`: the checkpoints, and how many values long enough to share the listing
/// decoded and shared.
async fn list(
    saver: &dyn CheckpointSaver,
    counting: &Counting,
    thread: &str,
) -> (Vec<stategraph::CheckpointTuple>, u64, u64) {
    let listed = saver.list(&ListOptions::thread(thread)).await.unwrap();
    assert_eq!(listed.len(), TURNS);
    assert_eq!(
        counting.alone.load(Ordering::Relaxed),
        0,
        "a listing decodes its values together"
    );
    let (decoded, reused) = *counting.shared.lock().unwrap();
    (listed, decoded, reused)
}

async fn each_message_decoded_once(saver: &dyn CheckpointSaver, counting: &Counting) {
    // The same checkpoints without messages: what the rest of a checkpoint costs (its id,
    // timestamp and versions are strings long enough to count, each distinct).
    let bare = thread(saver, false).await;
    let (_, bare_decoded, bare_reused) = list(saver, counting, &bare).await;
    let chat = thread(saver, true).await;
    let (listed, decoded, reused) = list(saver, counting, &chat).await;
    // What the listing returns is what it stored: checkpoint t (newest first) holds the
    // messages of turns 0..=t, each older list the start of the newer ones.
    let all: Vec<Value> = (0..TURNS).flat_map(turn).collect();
    for (i, tuple) in listed.iter().enumerate() {
        let turns = TURNS - i;
        let messages = tuple.checkpoint.channel_values.get("messages").unwrap();
        assert_eq!(
            messages,
            &Value::from(all[..2 * turns].to_vec()),
            "checkpoint of turn {}",
            turns - 1
        );
    }
    // A list shared with a newer one is still a list of its own to change.
    let mut oldest = listed[TURNS - 1].checkpoint.channel_values["messages"].clone();
    let Value::List(items) = &mut oldest else {
        panic!("messages are a list")
    };
    items.push(Value::from("changed"));
    assert_eq!(items.len(), 3);
    assert_eq!(
        listed[TURNS - 2].checkpoint.channel_values["messages"]
            .as_list()
            .unwrap()[2],
        all[2]
    );
    let distinct = 2 * TURNS as u64;
    let occurrences: u64 = (1..=TURNS as u64).map(|t| 2 * t).sum();
    assert_eq!(
        decoded - bare_decoded,
        distinct,
        "each distinct message decoded once"
    );
    assert_eq!(reused - bare_reused, occurrences - distinct);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let counting = Arc::new(Counting::default());
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteConfig::file(dir.path().join("chat.sqlite"))
        .serializer(counting.clone())
        .connect()
        .await
        .unwrap();
    each_message_decoded_once(&saver, &counting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let counting = Arc::new(Counting::default());
    let (saver, _schema) =
        stategraph_testkit::postgres::saver_with(|c| c.serializer(counting.clone())).await;
    each_message_decoded_once(&saver, &counting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    let counting = Arc::new(Counting::default());
    let (saver, _database) =
        stategraph_testkit::mysql::saver_with(|c| c.serializer(counting.clone())).await;
    each_message_decoded_once(&saver, &counting).await;
}
