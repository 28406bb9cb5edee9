//! Connecting a run queue: the connection settings, the lease, the attempts; the setup of its
//! tables (stategraph's own migrations, in `stategraph_run_migrations`).

use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, Result};

use super::PostgresRunQueue;
use super::listen::channel_for;
use crate::config::PostgresConfig;
use crate::error::{BACKEND, db};
use crate::migrate::{create_schema, run_migrations, with_setup_lock};

/// Default of [`RunQueueConfig::lease`].
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Default of [`RunQueueConfig::max_attempts`].
const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Seed of the session advisory-lock key that serialises concurrent run-queue setups on one
/// schema (hashed with the schema name; distinct from the saver's and the store's).
const SETUP_LOCK_SEED: i64 = 0x5354_4752_5255_4e31; // "STGRRUN1"

/// stategraph's run-queue migrations, indexed by version and recorded in
/// `stategraph_run_migrations` (LangGraph has no such tables; nothing of Python's is touched).
/// Each runs as one implicit transaction (several statements in one simple query).
const MIGRATIONS: [&str; 4] = [
    // v0: the runs, the one-running-run-per-thread guarantee, the queue's indexes, the events.
    "CREATE TABLE IF NOT EXISTS stategraph_runs (
    run_id text PRIMARY KEY,
    thread_id text NOT NULL,
    status text NOT NULL,
    payload jsonb NOT NULL,
    seq bigserial NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    worker text,
    lease_until timestamptz,
    cancel text CHECK (cancel IN ('interrupt', 'rollback')),
    events bigint NOT NULL DEFAULT 0,
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout', 'interrupted'))
);
CREATE UNIQUE INDEX IF NOT EXISTS stategraph_runs_one_running
    ON stategraph_runs (thread_id) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS stategraph_runs_pending
    ON stategraph_runs (seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS stategraph_runs_thread ON stategraph_runs (thread_id, seq);
CREATE INDEX IF NOT EXISTS stategraph_runs_lease
    ON stategraph_runs (lease_until) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS stategraph_run_events (
    run_id text NOT NULL REFERENCES stategraph_runs (run_id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    event text NOT NULL,
    data jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
)",
    // v1: keys taken once across processes (`claim_once`: a cron's due ticks).
    "CREATE TABLE IF NOT EXISTS stategraph_run_claims (
    key text PRIMARY KEY,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS stategraph_run_claims_at ON stategraph_run_claims (claimed_at)",
    // v2: finished runs by when they ended, for `purge_finished`.
    "CREATE INDEX IF NOT EXISTS stategraph_runs_finished
    ON stategraph_runs (updated_at) WHERE status NOT IN ('pending', 'running')",
    // v3: why a run was asked to stop, for its worker in whichever process.
    "ALTER TABLE stategraph_runs ADD COLUMN IF NOT EXISTS cancel_reason text",
];

/// Builds a [`PostgresRunQueue`]: the connection (URL, schema, pool size, timeouts), how long a claim
/// holds a run without a heartbeat ([`lease`](Self::lease)), how often a run is tried
/// ([`max_attempts`](Self::max_attempts)); [`connect`](Self::connect) connects and, unless
/// [`without_setup`](Self::without_setup), creates or upgrades the queue's tables.
///
/// ```no_run
/// use std::time::Duration;
/// use stategraph_postgres::RunQueueConfig;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// let queue = RunQueueConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
///     .schema("agents")
///     .pool_size(8)
///     .lease(Duration::from_secs(30))
///     .max_attempts(3)
///     .connect()
///     .await?;
/// # let _ = queue;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RunQueueConfig {
    pg: PostgresConfig,
    lease: Duration,
    max_attempts: u32,
}

impl RunQueueConfig {
    /// Parses a `postgres://` / `postgresql://` URL (or a libpq key=value string) as
    /// [`PostgresConfig::from_url`] does, timeouts included.
    pub fn from_url(url: &str) -> Result<Self> {
        PostgresConfig::from_url(url).map(Self::from)
    }

    /// Keeps the queue's tables in this schema (created by the setup if missing) instead of
    /// the connection's default `search_path`. Queues in different schemas are independent,
    /// notifications included.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.pg = self.pg.schema(schema);
        self
    }

    /// Connections kept in the pool (default 8). Each concurrent operation holds one for its
    /// duration; a [`Listener`](super::Listener) has a connection of its own.
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pg = self.pg.pool_size(n);
        self
    }

    /// How long a claim holds a run without a [`heartbeat`](stategraph_checkpoint::runs::RunQueue::heartbeat) (default
    /// 30 s, at least 1 ms): after that, [`requeue_expired`](stategraph_checkpoint::runs::RunQueue::requeue_expired) hands
    /// the run to another worker.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// How many claims a run gets before a lease running out ends it in `error` (default 3,
    /// at least 1). Stored with each run when it is enqueued.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// How long to wait for the server: connecting, each operation, and how long a pooled
    /// connection may idle (see [`Timeouts`]). A limit that runs out is an `Error::Timeout`
    /// naming the operation.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.pg = self.pg.timeouts(timeouts);
        self
    }

    /// Connects without creating or changing anything: the tables must exist (a deploy step
    /// or another process set them up); missing ones are an `Error::NotFound` naming them.
    pub fn without_setup(mut self) -> Self {
        self.pg = self.pg.without_setup();
        self
    }

    /// Connects and, unless [`without_setup`](Self::without_setup), creates or upgrades the
    /// queue's tables (idempotent; concurrent setups, from several processes too, take turns
    /// on an advisory lock).
    pub async fn connect(self) -> Result<PostgresRunQueue> {
        let pg = self.pg;
        let timeouts = pg.timeouts;
        let pool = crate::pool::shared(&pg.pg, pg.pool_size, timeouts.idle)
            .map_err(|e| Error::backend(BACKEND, "building the connection pool", e))?;
        let mut queue = PostgresRunQueue {
            pool,
            pg: pg.pg.clone(),
            target: crate::saver::describe(&pg.pg),
            timeouts,
            lease: self.lease,
            max_attempts: i32::try_from(self.max_attempts).unwrap_or(i32::MAX),
            channel: String::new(),
            relation: String::new(),
            database: String::new(),
        };
        let schema = pg.schema.clone();
        let setup = pg.run_setup;
        let work = async {
            let client = queue.client().await?;
            if setup {
                if let Some(schema) = &schema {
                    create_schema(&client, schema).await?;
                }
                with_setup_lock(&client, SETUP_LOCK_SEED, async {
                    run_migrations(&client, "stategraph_run_migrations", &MIGRATIONS).await
                })
                .await?;
            } else {
                check_tables(&client, &queue.target).await?;
            }
            let schema = match schema {
                Some(schema) => schema,
                None => current_schema(&client).await?,
            };
            let database = crate::error::database_identity(&client).await?;
            Ok::<_, Error>((schema, database))
        };
        let (schema, database) = timeouts
            .statement(BACKEND, "setting up the run queue", work)
            .await?;
        queue.database = database;
        queue.channel = channel_for(&schema);
        queue.relation = format!("\"{}\".stategraph_runs", schema.replace('"', "\"\""));
        Ok(queue)
    }
}

/// A saver's connection settings, pool size and timeouts, with the default lease and
/// attempts; with [`PostgresConfig::without_setup`], the queue connects without setup too.
impl From<PostgresConfig> for RunQueueConfig {
    fn from(pg: PostgresConfig) -> Self {
        Self {
            pg,
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// The first schema of the connection's `search_path` (where unqualified tables are made).
async fn current_schema(client: &tokio_postgres::Client) -> Result<String> {
    let row = client
        .query_one("SELECT COALESCE(current_schema(), '')", &[])
        .await
        .map_err(db("reading the current schema"))?;
    row.try_get(0).map_err(db("reading the current schema"))
}

/// Fails, naming them, if the queue's tables are missing.
async fn check_tables(client: &tokio_postgres::Client, target: &str) -> Result<()> {
    let rows = client
        .query(
            "SELECT t FROM unnest(ARRAY['stategraph_runs', 'stategraph_run_events', \
             'stategraph_run_migrations']) WITH ORDINALITY AS w(t, i) \
             WHERE to_regclass(quote_ident(t)) IS NULL ORDER BY i",
            &[],
        )
        .await
        .map_err(db("checking the run queue's tables"))?;
    let missing = rows
        .iter()
        .map(|r| r.try_get::<_, String>(0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(db("checking the run queue's tables"))?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::NotFound {
        what: format!(
            "the run queue's tables {} in the PostgreSQL database {target}",
            missing.join(", ")
        ),
    })
}
