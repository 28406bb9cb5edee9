//! The read floor of a history listing: the rows a listing of one thread reads, fetched
//! through the same driver into byte buffers and not decoded — the physical limit of a
//! listing that returns values. `history` reports it beside its own figure, measured on the
//! same thread in the same run.
//!
//! - SQLite (rusqlite, one connection mapping the file as the saver's read connections do,
//!   one read transaction as the saver's): every column of the thread's `checkpoints` rows,
//!   newest first, and every column of its `writes`.
//! - Postgres (tokio-postgres, binary results): the thread's `checkpoints` rows (the `jsonb`
//!   columns as their raw bytes), its `checkpoint_blobs` rows and its `checkpoint_writes`
//!   rows — the three reads of the saver's listing, each one statement.
//!
//! Other backends have no read floor here.

use tokio_postgres::types::{FromSql, Type};

use crate::BenchError;
use crate::backend::{Backend, Place};

/// Any column's bytes as the server sent them (binary format), not decoded.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(
        _ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }
    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// A connection to the backend's database, ready to fetch one thread's rows.
pub(crate) enum RawReader {
    Sqlite(std::sync::Mutex<rusqlite::Connection>),
    Postgres {
        client: tokio_postgres::Client,
        statements: [tokio_postgres::Statement; 3],
    },
}

fn fail(e: impl std::fmt::Display) -> BenchError {
    BenchError::Run {
        workload: "history",
        message: format!("read floor: {e}"),
    }
}

impl RawReader {
    /// A reader for `backend`, if it has a read floor.
    pub(crate) async fn open(backend: &Backend) -> Result<Option<Self>, BenchError> {
        Ok(Some(match backend.place() {
            Place::Sqlite { path, .. } => {
                let conn = rusqlite::Connection::open(path).map_err(fail)?;
                // Reading as the saver's read connections do: the file mapped into memory.
                let mapped = i64::try_from(stategraph::backend::SQLITE_DEFAULT_MMAP_SIZE)
                    .unwrap_or(i64::MAX);
                conn.pragma_update(None, "mmap_size", mapped)
                    .map_err(fail)?;
                RawReader::Sqlite(conn.into())
            }
            Place::Postgres { url, schema } => {
                let client = crate::backend::pg_connect(url).await.map_err(fail)?;
                let s = |sql: String| {
                    let client = &client;
                    async move { client.prepare(&sql).await.map_err(fail) }
                };
                let statements = [
                    s(format!(
                        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                         checkpoint, metadata FROM \"{schema}\".checkpoints \
                         WHERE thread_id = $1 AND checkpoint_ns = '' ORDER BY checkpoint_id DESC"
                    ))
                    .await?,
                    s(format!(
                        "SELECT channel, version, type, blob FROM \"{schema}\".checkpoint_blobs \
                         WHERE thread_id = $1 AND checkpoint_ns = ''"
                    ))
                    .await?,
                    s(format!(
                        "SELECT checkpoint_id, task_id, task_path, idx, channel, type, blob \
                         FROM \"{schema}\".checkpoint_writes \
                         WHERE thread_id = $1 AND checkpoint_ns = ''"
                    ))
                    .await?,
                ];
                RawReader::Postgres { client, statements }
            }
            _ => return Ok(None),
        }))
    }

    /// Fetches `thread`'s rows into byte buffers; returns how many bytes they hold.
    pub(crate) async fn fetch(&self, thread: &str) -> Result<usize, BenchError> {
        match self {
            RawReader::Sqlite(conn) => {
                let mut conn = conn.lock().map_err(fail)?;
                let tx = conn.transaction().map_err(fail)?;
                let mut bytes = 0;
                for sql in [
                    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, \
                     checkpoint, metadata FROM checkpoints \
                     WHERE thread_id = ?1 AND checkpoint_ns = '' ORDER BY checkpoint_id DESC",
                    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, \
                     value, task_path FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ''",
                ] {
                    let mut stmt = tx.prepare_cached(sql).map_err(fail)?;
                    let columns = stmt.column_count();
                    let mut rows = stmt.query([thread]).map_err(fail)?;
                    while let Some(row) = rows.next().map_err(fail)? {
                        let mut buffers: Vec<Vec<u8>> = Vec::with_capacity(columns);
                        for i in 0..columns {
                            use rusqlite::types::ValueRef;
                            buffers.push(match row.get_ref(i).map_err(fail)? {
                                ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
                                ValueRef::Integer(n) => n.to_le_bytes().to_vec(),
                                ValueRef::Real(x) => x.to_le_bytes().to_vec(),
                                ValueRef::Null => Vec::new(),
                            });
                        }
                        bytes += buffers.iter().map(Vec::len).sum::<usize>();
                        std::hint::black_box(buffers);
                    }
                }
                Ok(bytes)
            }
            RawReader::Postgres { client, statements } => {
                let mut bytes = 0;
                for statement in statements {
                    let rows = client.query(statement, &[&thread]).await.map_err(fail)?;
                    for row in &rows {
                        let mut buffers: Vec<Vec<u8>> = Vec::with_capacity(row.len());
                        for i in 0..row.len() {
                            let raw: Option<Raw> = row.try_get(i).map_err(fail)?;
                            buffers.push(raw.map(|r| r.0).unwrap_or_default());
                        }
                        bytes += buffers.iter().map(Vec::len).sum::<usize>();
                        std::hint::black_box(buffers);
                    }
                }
                Ok(bytes)
            }
        }
    }
}
