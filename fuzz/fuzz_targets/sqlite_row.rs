//! The SQLite saver reading a row it did not write: arbitrary bytes as the checkpoint blob,
//! the metadata and a pending write, under an arbitrary type tag. `get_tuple` and `list` must
//! return a tuple or a typed error.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stategraph_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions};
use stategraph_sqlite::{SqliteConfig, SqliteSaver};

struct Db {
    path: std::path::PathBuf,
    saver: SqliteSaver,
    rt: tokio::runtime::Runtime,
}

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("stategraph-fuzz-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let saver = rt
            .block_on(SqliteConfig::file(&path).connect())
            .expect("open the fuzz database");
        Db { path, saver, rt }
    })
}

const TAGS: [&str; 5] = ["msgpack", "json", "bytes", "null", "msgpack+aes"];

fuzz_target!(|data: &[u8]| {
    let db = db();
    let (tag, rest) = match data.split_first() {
        Some((&s, rest)) => (TAGS[usize::from(s) % TAGS.len()], rest),
        None => ("msgpack", data),
    };
    let cut = rest.len() / 2;
    let (blob, meta) = rest.split_at(cut);
    let conn = rusqlite::Connection::open(&db.path).expect("open");
    conn.execute_batch("DELETE FROM checkpoints; DELETE FROM writes;")
        .expect("clear");
    conn.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
         type, checkpoint, metadata) VALUES ('t', '', '1ef00000-0000-6000-8000-000000000000', \
         NULL, ?1, ?2, ?3)",
        rusqlite::params![tag, blob, meta],
    )
    .expect("insert checkpoint");
    conn.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, \
         type, value) VALUES ('t', '', '1ef00000-0000-6000-8000-000000000000', 'task', 0, 'c', \
         ?1, ?2)",
        rusqlite::params![tag, meta],
    )
    .expect("insert write");
    drop(conn);
    db.rt.block_on(async {
        let _ = db.saver.get_tuple(&CheckpointConfig::new("t")).await;
        let _ = db.saver.list(&ListOptions::all()).await;
    });
});
