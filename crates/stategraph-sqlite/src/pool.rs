//! The connections of one SQLite database: one writer (SQLite allows one at a time), opened
//! when first needed, and a small pool of readers (WAL lets them read while the writer
//! writes). An in-memory database has only the writer.
//!
//! **One writer per database handle, and group commit.** Every pool built from one
//! [`SqliteDatabase`](crate::SqliteDatabase) (the saver's, the store's and the run queue's)
//! shares its writer connection: two writer connections on one file would take turns through
//! SQLite's busy handler, which sleeps (1, 2, 5, … 100 ms) between tries. Writes from concurrent callers share transactions: a write opens a group
//! transaction (`BEGIN IMMEDIATE`) if none is open, runs in a savepoint of its own (its
//! failure rolls back its own changes only), and then commits the group if no other write is
//! waiting for the connection; otherwise it leaves the group open for the next writer and
//! waits until the group's commit. The last write of a burst commits for all, so one disk
//! sync covers every write queued meanwhile, as databases do for concurrent committers. A
//! write returns only once the commit that holds it is done (durability per write is
//! unchanged: what a caller was told is stored survives a crash), and a failed commit is
//! each write's error.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use rusqlite::Connection;
use stategraph_checkpoint::BoxError;
use stategraph_runs::DatabaseId;

use crate::config::{Location, SqliteConfig};
use crate::error::BACKEND;

/// Opening or preparing a connection failed: what was being done, and the cause.
#[derive(Debug)]
pub(crate) struct OpenError {
    pub(crate) doing: &'static str,
    pub(crate) source: BoxError,
}

impl OpenError {
    /// `doing` failed with a driver error.
    pub(crate) fn at(doing: &'static str) -> impl Fn(rusqlite::Error) -> Self {
        move |source| Self {
            doing,
            source: source.into(),
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.doing, self.source)
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl From<OpenError> for stategraph_checkpoint::Error {
    fn from(e: OpenError) -> Self {
        stategraph_checkpoint::Error::Backend {
            backend: BACKEND,
            message: e.doing.to_owned(),
            source: Some(e.source),
        }
    }
}

/// What a user of the pool sets up on every connection it opens (SQL functions, pragmas).
pub(crate) type Prepare = fn(&Connection) -> Result<(), OpenError>;

/// The most writes one group transaction holds before it commits, waiting writers or not
/// (bounds the latency of the group's first write under a steady stream of writes).
const MAX_GROUP: usize = 128;

/// Prepared statements kept per connection (the writer is shared by the saver, the store and
/// the run queue of a file).
const STATEMENT_CACHE: usize = 128;

/// Runs one statement without parameters, prepared once per connection (the group
/// transaction's `BEGIN`, savepoints and `COMMIT` run for every write).
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Rolls back the transaction open on `conn`, if any (a failed `COMMIT` may leave it open).
fn roll_back(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = run(conn, "ROLLBACK");
    }
}

/// The connections.
pub(crate) struct Pool {
    /// The writer, shared with every other pool built from the same database handle.
    writer: Arc<Writer>,
    /// The database handle's id (a new one for a pool of its own).
    id: DatabaseId,
    /// Idle reader connections; empty and unused for in-memory databases.
    readers: Mutex<Vec<Connection>>,
    config: SqliteConfig,
    prepare: Prepare,
}

/// One database's writer connection and its group transaction.
pub(crate) struct Writer {
    state: Mutex<WriterState>,
    /// Signalled when a group transaction ends.
    ended: Condvar,
    /// Callers waiting to take `state` (a write that finds one leaves its group open for it).
    arriving: AtomicUsize,
    /// Group transactions committed (for tests).
    #[cfg(test)]
    commits: AtomicUsize,
}

#[derive(Default)]
struct WriterState {
    /// Opened on first use (opening it puts a database file in WAL mode, unless the
    /// configuration opens without setup).
    conn: Option<Connection>,
    /// The preparations run on `conn` (each pool's, once).
    prepared: Vec<Prepare>,
    /// The group transaction open on `conn`, and how many writes it holds.
    open: Option<(Arc<Group>, usize)>,
}

/// A group transaction: how it ended (`Err`: why its commit failed), once it has.
#[derive(Default)]
struct Group {
    ended: OnceLock<Result<(), Arc<str>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A connection stays consistent even if a panic happened while it was held: SQLite rolls
    // back any open transaction when its handle is next used.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Writer {
    /// A writer, its connection opened on first use.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(WriterState::default()),
            ended: Condvar::new(),
            arriving: AtomicUsize::new(0),
            #[cfg(test)]
            commits: AtomicUsize::new(0),
        })
    }

    /// Takes the connection's state, counted among the arriving callers meanwhile.
    fn take(&self) -> MutexGuard<'_, WriterState> {
        self.arriving.fetch_add(1, Ordering::SeqCst);
        self.arrive()
    }

    /// Takes the connection's state for a caller already counted among the arriving ones.
    fn arrive(&self) -> MutexGuard<'_, WriterState> {
        let state = lock(&self.state);
        self.arriving.fetch_sub(1, Ordering::SeqCst);
        state
    }

    /// Ends the open group transaction, if any: commits it (rolls it back if the commit
    /// fails) and wakes the writes waiting for it.
    fn end_group(&self, state: &mut WriterState) {
        let Some((group, _)) = state.open.take() else {
            return;
        };
        let outcome = match &state.conn {
            Some(conn) => run(conn, "COMMIT").map_err(|e| {
                roll_back(conn);
                Arc::<str>::from(e.to_string())
            }),
            None => Err(Arc::from("the writer connection is gone")),
        };
        #[cfg(test)]
        if outcome.is_ok() {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
        let _ = group.ended.set(outcome);
        self.ended.notify_all();
    }

    /// What a write does as it lets the connection go: commits the group unless another
    /// caller is about to take the connection (and the group is not full).
    fn leave(&self, state: &mut WriterState) {
        let full = state.open.as_ref().is_some_and(|(_, n)| *n >= MAX_GROUP);
        if full || self.arriving.load(Ordering::SeqCst) == 0 {
            self.end_group(state);
        }
    }

    /// Ends the open group, rolled back, with `why` as its writes' error.
    fn fail_group(&self, state: &mut WriterState, why: &rusqlite::Error) {
        if let Some(conn) = &state.conn {
            roll_back(conn);
        }
        if let Some((group, _)) = state.open.take() {
            let _ = group.ended.set(Err(Arc::from(why.to_string())));
        }
        self.ended.notify_all();
    }
}

/// A write on its way to the writer connection, counted among the arriving callers from the
/// moment it is announced — before it waits for a thread of the blocking pool — so that a
/// write ending meanwhile leaves its group open for it (two writes a caller makes at once
/// share one commit). Dropped without writing, it lets the group go as the write would have.
pub(crate) struct Arrival {
    writer: Option<Arc<Writer>>,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            let mut state = writer.arrive();
            writer.leave(&mut state);
        }
    }
}

impl Pool {
    /// Announces a write about to be made with [`Pool::write_arrived`].
    pub(crate) fn arrival(&self) -> Arrival {
        self.writer.arriving.fetch_add(1, Ordering::SeqCst);
        Arrival {
            writer: Some(Arc::clone(&self.writer)),
        }
    }

    /// No connection yet; every connection opened gets `prepare` run on it. A configuration
    /// made from a [`SqliteDatabase`](crate::SqliteDatabase) shares the database's writer and
    /// connection settings; another has a writer of its own.
    pub(crate) fn new(config: SqliteConfig, prepare: Prepare) -> Self {
        let (config, writer, id) = match config.database {
            // The database's connection settings; the component's own serializer and setup.
            Some(db) => (
                SqliteConfig {
                    serializer: config.serializer,
                    run_setup: config.run_setup,
                    ..db.config().clone()
                },
                db.writer(),
                db.id(),
            ),
            None => (config, Writer::new(), DatabaseId::new()),
        };
        Self {
            writer,
            id,
            readers: Mutex::new(Vec::new()),
            config,
            prepare,
        }
    }

    /// The id of the database handle the pool was built from.
    pub(crate) fn id(&self) -> DatabaseId {
        self.id
    }

    /// The configuration the connections are opened with.
    pub(crate) fn config(&self) -> &SqliteConfig {
        &self.config
    }

    fn open(&self, read_only: bool) -> Result<Connection, OpenError> {
        let conn = crate::config::open_connection(&self.config, read_only)
            .map_err(|(doing, source)| OpenError::at(doing)(source))?;
        // Room for the saver's, the store's and the run queue's statements and the group
        // transaction's own.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        (self.prepare)(&conn)?;
        Ok(conn)
    }

    /// The writer connection (opened if needed), with this pool's preparation run on it once.
    fn ready<'s>(
        &self,
        conn: &'s mut Option<Connection>,
        prepared: &mut Vec<Prepare>,
    ) -> Result<&'s mut Connection, OpenError> {
        let conn = match conn {
            Some(conn) => conn,
            slot @ None => {
                let conn = slot.insert(self.open(false)?);
                prepared.push(self.prepare);
                conn
            }
        };
        if !prepared
            .iter()
            .any(|p| std::ptr::fn_addr_eq(*p, self.prepare))
        {
            (self.prepare)(conn)?;
            prepared.push(self.prepare);
        }
        Ok(conn)
    }

    /// The writer connection, ready, inside a group transaction (the open one, or a new one).
    fn begin<'s>(
        &self,
        state: &'s mut WriterState,
    ) -> Result<(Arc<Group>, &'s mut Connection), OpenError> {
        let WriterState {
            conn,
            prepared,
            open,
        } = state;
        let conn = self.ready(conn, prepared)?;
        let group = match open {
            Some((group, _)) => Arc::clone(group),
            None => {
                run(conn, "BEGIN IMMEDIATE")
                    .map_err(OpenError::at("starting a write transaction"))?;
                let group = Arc::new(Group::default());
                *open = Some((Arc::clone(&group), 0));
                group
            }
        };
        Ok((group, conn))
    }

    /// Runs the write `f` on the writer connection inside the group transaction (opening one
    /// if none is open), in a savepoint of its own: when `f` fails or panics, only its own
    /// changes are rolled back. Returns once the group that holds the write is committed; a
    /// failed commit is this write's error. `f` must not begin or commit transactions of its
    /// own (nested savepoints are fine).
    pub(crate) fn write<T, E: From<OpenError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        self.write_arrived(self.arrival(), f)
    }

    /// [`Pool::write`], announced earlier by `arrival` (of this pool).
    pub(crate) fn write_arrived<T, E: From<OpenError>>(
        &self,
        mut arrival: Arrival,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let writer = &*self.writer;
        debug_assert!(
            arrival
                .writer
                .as_ref()
                .is_some_and(|w| Arc::ptr_eq(w, &self.writer))
        );
        arrival.writer = None;
        let mut state = writer.arrive();
        let (group, conn) = match self.begin(&mut state) {
            Ok(ready) => ready,
            Err(e) => {
                writer.leave(&mut state);
                return Err(e.into());
            }
        };
        let out = match run(conn, "SAVEPOINT stategraph_write") {
            Ok(()) => catch_unwind(AssertUnwindSafe(|| f(conn))),
            Err(e) => Ok(Err(E::from(OpenError::at("starting a write")(e)))),
        };
        let kept = matches!(out, Ok(Ok(_)));
        let closed = if kept {
            run(conn, "RELEASE stategraph_write")
        } else {
            run(conn, "ROLLBACK TO stategraph_write")
                .and_then(|()| run(conn, "RELEASE stategraph_write"))
        };
        if let Some((_, writes)) = state.open.as_mut() {
            *writes += 1;
        }
        match closed {
            // The transaction cannot be trusted past a failed savepoint: it ends, failed.
            Err(e) => writer.fail_group(&mut state, &e),
            Ok(()) => writer.leave(&mut state),
        }
        if kept {
            // Another write took the connection next and carries the group on: wait for the
            // commit that holds this write.
            while group.ended.get().is_none() {
                state = writer.ended.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        }
        drop(state);
        finish(out, group.ended.get().cloned().unwrap_or(Ok(())))
    }

    /// Runs `f` on the writer connection alone, outside any group transaction (the open one
    /// is committed first): for schema set-up and the reads of an in-memory database.
    pub(crate) fn exclusive<T, E: From<OpenError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut state = self.writer.take();
        self.writer.end_group(&mut state);
        let WriterState { conn, prepared, .. } = &mut *state;
        f(self.ready(conn, prepared)?)
    }

    /// Runs `f` on a reader connection (the writer, alone, for in-memory databases).
    pub(crate) fn read<T, E: From<OpenError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        if self.config.location == Location::Memory {
            return self.exclusive(f);
        }
        let pooled = lock(&self.readers).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.open(true)?,
        };
        let out = f(&mut conn);
        let mut idle = lock(&self.readers);
        if idle.len() < self.config.max_readers {
            idle.push(conn);
        }
        out
    }
}

/// A write's result once its group ended: its own error if it failed, the commit's if the
/// commit failed, the panic resumed if it panicked.
fn finish<T, E: From<OpenError>>(
    out: std::thread::Result<Result<T, E>>,
    ended: Result<(), Arc<str>>,
) -> Result<T, E> {
    match out {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(v)) => match ended {
            Ok(()) => Ok(v),
            Err(why) => Err(E::from(OpenError {
                doing: "committing a write transaction",
                source: why.to_string().into(),
            })),
        },
    }
}

#[cfg(test)]
mod tests;
