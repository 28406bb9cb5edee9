//! Connecting a run queue: the connection settings, the lease, the attempts; the setup of its
//! tables (stategraph's own migrations, in `stategraph_run_migrations`).

use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, Result};

use super::PostgresRunQueue;
use super::listen::channel_for;
use super::migrations::{LATEST, MIGRATIONS};
use crate::config::PostgresConfig;
use crate::error::{BACKEND, db};
use crate::migrate::{create_schema, missing_tables, run_migrations, with_setup_lock};

/// Default of [`RunQueueConfig::lease`].
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Default of [`RunQueueConfig::max_attempts`].
const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Seed of the session advisory-lock key that serialises concurrent run-queue setups on one
/// schema (hashed with the schema name; distinct from the saver's and the store's).
const SETUP_LOCK_SEED: i64 = 0x5354_4752_5255_4e31; // "STGRRUN1"

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
    /// Connections of the queue's own, to the same database (see
    /// [`separate_pool`](Self::separate_pool)).
    separate: Option<PostgresConfig>,
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

    /// How long a claim holds a run without a [`heartbeat`](stategraph_runs::RunQueue::heartbeat) (default
    /// 30 s, at least 1 ms): after that, [`requeue_expired`](stategraph_runs::RunQueue::requeue_expired) hands
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

    /// The queue's connections (its pool and its listener's) from a pool of their own, built
    /// from `connections` — the same database, reached as they say (another address, a
    /// pooler, other limits) — so that a run's heartbeats never wait behind checkpoint writes
    /// for a pooled connection. The queue still belongs to the database this configuration
    /// was made from: its schema is that database's, and the savers built from that database
    /// take its fences (it is on you that `connections` reach the same database).
    pub fn separate_pool(mut self, connections: PostgresConfig) -> Self {
        self.separate = Some(connections);
        self
    }

    /// Connects and, unless [`without_setup`](Self::without_setup), creates or upgrades the
    /// queue's tables (idempotent; concurrent setups, from several processes too, take turns
    /// on an advisory lock).
    pub async fn connect(self) -> Result<PostgresRunQueue> {
        let db = self.pg.open()?;
        let connections = match &self.separate {
            Some(config) => config.clone().schema_of(&db).open()?,
            None => db.clone(),
        };
        let timeouts = connections.timeouts();
        let mut queue = PostgresRunQueue {
            pool: connections.pool().clone(),
            pg: connections.connect_settings().cloned(),
            target: connections.target().to_owned(),
            timeouts,
            lease: self.lease,
            max_attempts: i32::try_from(self.max_attempts).unwrap_or(i32::MAX),
            channel: String::new(),
            relation: String::new(),
            database: db.id(),
        };
        let schema = db.schema().map(str::to_owned);
        let setup = self.pg.run_setup;
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
                check_tables(&client, schema.as_deref(), &queue.target).await?;
            }
            let schema = match schema {
                Some(schema) => schema,
                None => current_schema(&client).await?,
            };
            Ok::<_, Error>(schema)
        };
        let schema = timeouts
            .statement(BACKEND, "setting up the run queue", work)
            .await?;
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
            separate: None,
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

/// Fails, naming them, if the queue's tables are missing, or if their migrations stop short
/// of the version this queue needs (a setup of an earlier version made them).
async fn check_tables(
    client: &tokio_postgres::Client,
    schema: Option<&str>,
    target: &str,
) -> Result<()> {
    const OP: &str = "checking the run queue's tables";
    let missing = missing_tables(
        client,
        schema,
        &[
            "stategraph_runs",
            "stategraph_run_events",
            "stategraph_run_threads",
            "stategraph_run_migrations",
        ],
    )
    .await
    .map_err(db(OP))?;
    if !missing.iter().any(|t| t == "stategraph_run_migrations") {
        let row = client
            .query_one(
                "SELECT COALESCE(max(v), -1) FROM stategraph_run_migrations",
                &[],
            )
            .await
            .map_err(db(OP))?;
        let version: i32 = row.try_get(0).map_err(db(OP))?;
        if version < LATEST {
            return Err(Error::NotFound {
                what: format!(
                    "the run queue's migration v{LATEST} in the PostgreSQL database {target} \
                     (its tables are at v{version}: connect once with the setup to upgrade them)"
                ),
            });
        }
    }
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
