//! Several processes opening one new SQLite file at the same moment: every open (saver,
//! store, run queue: setting up the file, switching it to WAL, creating and migrating their
//! tables) succeeds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stategraph_sqlite::{SqliteConfig, SqliteRunQueueConfig, SqliteStoreConfig};

/// The file a child opens.
const FILE: &str = "STATEGRAPH_TEST_OPEN_FILE";
/// When (Unix microseconds) the children open it.
const START: &str = "STATEGRAPH_TEST_OPEN_START";

const PROCESSES: usize = 8;
const ROUNDS: usize = 20;

fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The child: sleeps until the shared start instant, then opens the saver, the store and
/// the queue on the file at once.
#[test]
#[ignore = "a child process of `processes_open_one_new_file_at_once`"]
fn open_child() {
    let (Ok(file), Ok(start)) = (std::env::var(FILE), std::env::var(START)) else {
        return;
    };
    let start: u64 = start.parse().unwrap();
    std::thread::sleep(Duration::from_micros(start.saturating_sub(micros_now())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let (saver, store, queue) = tokio::join!(
            SqliteConfig::file(&file).connect(),
            SqliteStoreConfig::file(&file).connect(),
            SqliteRunQueueConfig::file(&file).connect(),
        );
        saver.expect("the saver opens");
        store.expect("the store opens");
        queue.expect("the run queue opens");
    });
}

#[test]
fn processes_open_one_new_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let file = dir.path().join(format!("open-{round}.sqlite"));
        let start = micros_now() + 500_000;
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "open_child", "--ignored", "--nocapture"])
                    .env(FILE, &file)
                    .env(START, start.to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: a process failed to open the file: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Set up once: WAL, each migration recorded once.
        let conn = rusqlite::Connection::open(&file).unwrap();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(count("SELECT count(*) FROM store_migrations"), 5);
        assert_eq!(count("SELECT count(*) FROM stategraph_run_migrations"), 1);
        assert_eq!(count("SELECT count(*) FROM checkpoints"), 0);
    }
}
