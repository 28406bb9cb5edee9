//! `commit_floor`: what one bare durable commit of a row costs on a backend, through the
//! same driver and settings its saver uses — the physical floor every database figure is
//! also reported against (`× floor` in `bench/compare`'s table).
//!
//! Each timed run stores one new row of `n` random letters (default 2 KB, about a checkpoint)
//! in a table of its own in the backend's fresh place, as its own transaction:
//! - SQLite: rusqlite, WAL, `synchronous=FULL` (the saver's defaults), `INSERT` in
//!   `BEGIN IMMEDIATE … COMMIT` (what a save does).
//! - Postgres: tokio-postgres, `synchronous_commit` as the server has it, one autocommitted
//!   `INSERT` (one round trip and the WAL flush).
//! - MySQL/MariaDB: mysql_async, one autocommitted `INSERT` (InnoDB's log flush).
//! - Redis: one `SET` (the server's own persistence settings, as the saver runs on them).
//! - MongoDB: one `insert` command with the driver's default write concern (as the saver's
//!   writes).

use std::time::Instant;

use crate::backend::{Backend, BackendKind, Place};
use crate::{BenchError, Measurement, Params, Spec, Unit, Workload};

/// The `commit_floor` workload.
pub(crate) struct CommitFloor;

fn fail(backend: BackendKind, e: impl std::fmt::Display) -> BenchError {
    BenchError::Backend {
        backend: backend.as_str(),
        message: e.to_string(),
    }
}

/// `n` random lowercase letters, like the workloads' messages (text, so a database that
/// compresses large values tries to, as it does for the checkpoints').
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|_| b'a' + fastrand::u8(0..26)).collect()
}

#[async_trait::async_trait]
impl Workload for CommitFloor {
    fn spec(&self) -> Spec {
        Spec::new("commit_floor", 2048, 200, Unit::Commit)
    }

    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _params: &Params,
    ) -> Result<Measurement, BenchError> {
        let kind = backend.kind();
        let row = payload(n);
        // One untimed commit first (table pages, connection warm-up), then `runs` timed.
        let mut samples = Vec::with_capacity(runs);
        match backend.place() {
            Place::Nothing => {
                return Err(BenchError::Run {
                    workload: "commit_floor",
                    message: format!(
                        "there is no commit to measure without a database (backend {})",
                        kind.as_str()
                    ),
                });
            }
            Place::Sqlite { path, .. } => {
                let conn = rusqlite::Connection::open(path).map_err(|e| fail(kind, e))?;
                conn.pragma_update(None, "journal_mode", "WAL")
                    .map_err(|e| fail(kind, e))?;
                conn.pragma_update(None, "synchronous", "FULL")
                    .map_err(|e| fail(kind, e))?;
                conn.execute_batch("CREATE TABLE floor (id INTEGER PRIMARY KEY, body BLOB)")
                    .map_err(|e| fail(kind, e))?;
                for i in 0..=runs {
                    let t = Instant::now();
                    conn.execute_batch("BEGIN IMMEDIATE")
                        .map_err(|e| fail(kind, e))?;
                    conn.execute(
                        "INSERT INTO floor (id, body) VALUES (?1, ?2)",
                        (i64::try_from(i).unwrap_or(i64::MAX), &row),
                    )
                    .map_err(|e| fail(kind, e))?;
                    conn.execute_batch("COMMIT").map_err(|e| fail(kind, e))?;
                    if i > 0 {
                        samples.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            Place::Postgres { url, schema } => {
                let client = crate::backend::pg_connect(url)
                    .await
                    .map_err(|e| fail(kind, e))?;
                client
                    .batch_execute(&format!(
                        "CREATE TABLE \"{schema}\".floor (id bigint PRIMARY KEY, body bytea)"
                    ))
                    .await
                    .map_err(|e| fail(kind, e))?;
                let insert = client
                    .prepare(&format!(
                        "INSERT INTO \"{schema}\".floor (id, body) VALUES ($1, $2)"
                    ))
                    .await
                    .map_err(|e| fail(kind, e))?;
                for i in 0..=runs {
                    let id = i64::try_from(i).unwrap_or(i64::MAX);
                    let t = Instant::now();
                    client
                        .execute(&insert, &[&id, &row])
                        .await
                        .map_err(|e| fail(kind, e))?;
                    if i > 0 {
                        samples.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            Place::Mysql { url, database } => {
                use mysql_async::prelude::Queryable;
                let pool = mysql_async::Pool::from_url(url.as_str()).map_err(|e| fail(kind, e))?;
                let mut conn = pool.get_conn().await.map_err(|e| fail(kind, e))?;
                conn.query_drop(format!(
                    "CREATE TABLE `{database}`.floor (id BIGINT PRIMARY KEY, body LONGBLOB) \
                     ENGINE=InnoDB"
                ))
                .await
                .map_err(|e| fail(kind, e))?;
                let insert = format!("INSERT INTO `{database}`.floor (id, body) VALUES (?, ?)");
                for i in 0..=runs {
                    let t = Instant::now();
                    conn.exec_drop(&insert, (i, &row))
                        .await
                        .map_err(|e| fail(kind, e))?;
                    if i > 0 {
                        samples.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
                drop(conn);
                pool.disconnect().await.map_err(|e| fail(kind, e))?;
            }
            Place::Mongodb { saver } => {
                use mongodb::bson::{Binary, doc, spec::BinarySubtype};
                let db = saver.database();
                for i in 0..=runs {
                    let row = Binary {
                        subtype: BinarySubtype::Generic,
                        bytes: row.clone(),
                    };
                    let t = Instant::now();
                    db.run_command(doc! { "insert": "floor", "documents": [{ "i": i64::try_from(i).unwrap_or(0), "row": row }] })
                        .await
                        .map_err(|e| fail(kind, e))?;
                    if i > 0 {
                        samples.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            Place::Redis { client, prefix } => {
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| fail(kind, e))?;
                for i in 0..=runs {
                    let t = Instant::now();
                    let _: () = redis::cmd("SET")
                        .arg(format!("{prefix}:floor:{i}"))
                        .arg(&row)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| fail(kind, e))?;
                    if i > 0 {
                        samples.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
        }
        let mut m = Measurement {
            samples_ms: samples,
            ..Measurement::default()
        };
        m.extra.insert("row_bytes".into(), serde_json::json!(n));
        Ok(m)
    }
}
