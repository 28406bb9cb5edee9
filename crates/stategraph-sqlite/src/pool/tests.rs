#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::sync::Barrier;

fn no_preparation(_: &Connection) -> Result<(), OpenError> {
    Ok(())
}

fn other_preparation(conn: &Connection) -> Result<(), OpenError> {
    conn.execute_batch("CREATE TEMP TABLE IF NOT EXISTS prepared (x)")
        .map_err(OpenError::at("preparing"))
}

#[derive(Debug)]
struct Failed(String);

impl From<OpenError> for Failed {
    fn from(e: OpenError) -> Self {
        Self(e.to_string())
    }
}

fn pool_on(path: &std::path::Path, prepare: Prepare) -> Pool {
    let config = SqliteConfig::from_url(&format!("sqlite:{}", path.display())).unwrap();
    Pool::new(config, prepare)
}

/// `n` writers queue up while the connection is held, then all run: their writes share
/// one commit, a failing one and a panicking one roll back only their own rows.
#[test]
fn queued_writes_share_one_commit_and_fail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(pool_on(&dir.path().join("g.db"), no_preparation));
    pool.exclusive(|c| {
        c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .map_err(|e| Failed(e.to_string()))
    })
    .unwrap();
    let n = 12;
    let held = Arc::new(Barrier::new(2));
    let blocker = {
        let (pool, held) = (Arc::clone(&pool), Arc::clone(&held));
        std::thread::spawn(move || {
            pool.exclusive(|_| {
                held.wait(); // the connection is held
                held.wait(); // every writer has arrived
                Ok::<_, Failed>(())
            })
            .unwrap();
        })
    };
    held.wait();
    let commits_before = pool.writer.commits.load(Ordering::SeqCst);
    let writers: Vec<_> = (0..n as i64)
        .map(|k| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    pool.write(|c| {
                        c.execute("INSERT INTO t (k) VALUES (?1)", [k])
                            .map_err(|e| Failed(e.to_string()))?;
                        match k {
                            3 => Err(Failed("refused".into())),
                            5 => panic!("a write panicked"),
                            _ => Ok(k),
                        }
                    })
                }))
            })
        })
        .collect();
    while pool.writer.arriving.load(Ordering::SeqCst) < n {
        std::thread::yield_now();
    }
    held.wait();
    blocker.join().unwrap();
    let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for (k, r) in results.iter().enumerate() {
        match k {
            3 => assert!(
                matches!(r, Ok(Err(Failed(m))) if m == "refused"),
                "{k}: {r:?}"
            ),
            5 => assert!(r.is_err(), "the panic is the caller's"),
            _ => assert_eq!(r.as_ref().unwrap().as_ref().unwrap(), &(k as i64)),
        }
    }
    assert_eq!(
        pool.writer.commits.load(Ordering::SeqCst) - commits_before,
        1,
        "the queued writes committed together"
    );
    // What the other connections see: every write but the failed and the panicked one.
    let stored: Vec<i64> = pool
        .read(|c| {
            let mut s = c.prepare("SELECT k FROM t ORDER BY k").unwrap();
            let rows = s.query_map([], |r| r.get(0)).unwrap();
            Ok::<_, Failed>(rows.map(Result::unwrap).collect())
        })
        .unwrap();
    let expected: Vec<i64> = (0..n as i64).filter(|k| *k != 3 && *k != 5).collect();
    assert_eq!(stored, expected);
}

/// A write announced before another one runs shares that one's commit, even when it
/// reaches the connection after it; an announced write that is dropped lets the group
/// it kept open commit.
#[test]
fn an_announced_write_shares_the_commit_of_the_write_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(pool_on(&dir.path().join("a.db"), no_preparation));
    let insert = |k: i64| {
        move |c: &mut Connection| {
            c.execute("INSERT INTO t (k) VALUES (?1)", [k])
                .map_err(|e| Failed(e.to_string()))
        }
    };
    pool.exclusive(|c| {
        c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .map_err(|e| Failed(e.to_string()))
    })
    .unwrap();
    let commits = || pool.writer.commits.load(Ordering::SeqCst);
    // Writes `k` on another thread; returns once the write is in its group, waiting for
    // the group to end (it must not commit while a write is announced).
    let write_in_group = |k: i64| {
        let handle = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.write(insert(k)).unwrap())
        };
        while lock(&pool.writer.state)
            .open
            .as_ref()
            .is_none_or(|(_, n)| *n < 1)
        {
            std::thread::yield_now();
        }
        assert!(
            !handle.is_finished(),
            "the write waits for its group's commit"
        );
        handle
    };
    let before = commits();
    let second = pool.arrival();
    let first = write_in_group(1);
    assert_eq!(pool.write_arrived(second, insert(2)).unwrap(), 1);
    first.join().unwrap();
    assert_eq!(commits() - before, 1, "both writes committed together");

    let before = commits();
    let dropped = pool.arrival();
    let first = write_in_group(3);
    drop(dropped);
    first.join().unwrap();
    assert_eq!(commits() - before, 1, "the dropped write's group committed");
    let stored: i64 = pool
        .read(|c| {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .map_err(|e| Failed(e.to_string()))
        })
        .unwrap();
    assert_eq!(stored, 3);
}

/// Pools built from one database handle share its writer, each preparing it once; a pool of
/// its own, even on the same file, has its own writer (as another process would).
#[test]
fn pools_of_one_database_share_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let db = SqliteConfig::from_url(&format!("sqlite:{}", path.display()))
        .unwrap()
        .open();
    let a = Pool::new(db.saver(), no_preparation);
    let b = Pool::new(
        db.saver().synchronous(crate::Synchronous::Off),
        other_preparation,
    );
    assert!(Arc::ptr_eq(&a.writer, &b.writer));
    assert_eq!(a.id(), b.id());
    assert_eq!(
        b.config().synchronous,
        crate::Synchronous::Full,
        "the database's settings"
    );
    a.write(|c| {
        c.execute_batch("CREATE TABLE t (x)")
            .map_err(|e| Failed(e.to_string()))
    })
    .unwrap();
    b.write(|c| {
        c.execute_batch("INSERT INTO prepared VALUES (1)")
            .map_err(|e| Failed(e.to_string()))
    })
    .unwrap();
    let c = pool_on(&path, no_preparation);
    assert!(!Arc::ptr_eq(&a.writer, &c.writer));
    assert_ne!(a.id(), c.id());
}
