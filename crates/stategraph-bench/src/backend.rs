//! The backends a workload runs on: each opened fresh (a new SQLite file, Postgres schema,
//! MySQL database or Redis key prefix), measured (`db_bytes` and rows per table) and removed.

use std::path::PathBuf;
use std::sync::Arc;

use stategraph::{CheckpointSaver, InMemorySaver};

use crate::BenchError;

/// Which checkpointer a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// No checkpointer: the graph is compiled without one.
    None,
    /// `InMemorySaver`.
    Memory,
    /// The SQLite saver on a new file.
    Sqlite,
    /// The Postgres saver in a new schema.
    Postgres,
    /// The MySQL/MariaDB saver in a new database.
    Mysql,
    /// The Redis saver under a new key prefix.
    Redis,
    /// The MongoDB saver in a new database.
    Mongodb,
}

impl BackendKind {
    /// The name used on the command line and in the JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Memory => "memory",
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
            Self::Redis => "redis",
            Self::Mongodb => "mongodb",
        }
    }

    /// Whether the backend stores to a database whose size can be measured.
    pub fn persistent(self) -> bool {
        !matches!(self, Self::None | Self::Memory)
    }
}

/// The size of what a run stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DbSize {
    /// Bytes on disk (SQLite file with its WAL, Postgres relations with TOAST and indexes,
    /// MySQL data and index length) or in memory (Redis `MEMORY USAGE`).
    pub bytes: u64,
    /// Rows per table (Redis: keys per key kind).
    pub rows: Vec<(String, u64)>,
}

/// Where a backend stores (what `commit_floor` writes next to).
pub(crate) enum Place {
    Nothing,
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        url: String,
        schema: String,
    },
    Mysql {
        url: String,
        database: String,
    },
    Redis {
        client: redis::Client,
        prefix: String,
    },
    Mongodb {
        saver: stategraph::MongoSaver,
    },
}

/// An opened backend: the saver the graph uses and where it stores.
pub struct Backend {
    kind: BackendKind,
    saver: Option<Arc<dyn CheckpointSaver>>,
    place: Place,
}

/// `db` if given, else the URL in `var`, else `default` (the local test service).
fn server_url(db: Option<&str>, var: &str, default: &str) -> String {
    db.map_or_else(
        || std::env::var(var).unwrap_or_else(|_| default.to_owned()),
        str::to_owned,
    )
}

fn fail(backend: BackendKind, e: impl std::fmt::Display) -> BenchError {
    BenchError::Backend {
        backend: backend.as_str(),
        message: e.to_string(),
    }
}

impl Backend {
    /// Opens `kind` fresh. `db` overrides the default server URL (the local test services,
    /// or `STATEGRAPH_TEST_{POSTGRES,MYSQL,REDIS,MONGODB}_URL`); for SQLite it is the file to
    /// create.
    pub async fn open(kind: BackendKind, db: Option<&str>) -> Result<Self, BenchError> {
        let unique = stategraph::uuid6(None).replace('-', "");
        let unique = &unique[unique.len() - 16..];
        let err = |e: stategraph::CheckpointError| fail(kind, e);
        let (saver, place): (Option<Arc<dyn CheckpointSaver>>, Place) = match kind {
            BackendKind::None => (None, Place::Nothing),
            BackendKind::Memory => (Some(Arc::new(InMemorySaver::new())), Place::Nothing),
            BackendKind::Sqlite => {
                let dir = tempfile::tempdir().map_err(|e| fail(kind, e))?;
                let path = db.map_or_else(|| dir.path().join("bench.sqlite"), PathBuf::from);
                let saver = stategraph::SqliteConfig::file(&path)
                    .connect()
                    .await
                    .map_err(err)?;
                (Some(Arc::new(saver)), Place::Sqlite { _dir: dir, path })
            }
            BackendKind::Postgres => {
                let url = server_url(
                    db,
                    "STATEGRAPH_TEST_POSTGRES_URL",
                    "postgres://postgres@127.0.0.1:5432/test",
                );
                let schema = format!("sgb_{unique}");
                let saver = stategraph::PostgresConfig::from_url(&url)
                    .map_err(err)?
                    .schema(schema.clone())
                    .connect()
                    .await
                    .map_err(err)?;
                (Some(Arc::new(saver)), Place::Postgres { url, schema })
            }
            BackendKind::Mysql => {
                let url = server_url(
                    db,
                    "STATEGRAPH_TEST_MYSQL_URL",
                    "mysql://root@127.0.0.1:3306/test",
                );
                let database = format!("sgb_{unique}");
                let saver = stategraph::MySqlConfig::from_url(&url)
                    .map_err(err)?
                    .database(database.clone())
                    .connect()
                    .await
                    .map_err(err)?;
                (Some(Arc::new(saver)), Place::Mysql { url, database })
            }
            BackendKind::Redis => {
                let url = server_url(db, "STATEGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379");
                let prefix = format!("sgb:{unique}");
                let saver = stategraph::RedisConfig::from_url(&url)
                    .map_err(err)?
                    .prefix(prefix.clone())
                    .connect()
                    .await
                    .map_err(err)?;
                let client = redis::Client::open(url.as_str()).map_err(|e| fail(kind, e))?;
                (Some(Arc::new(saver)), Place::Redis { client, prefix })
            }
            BackendKind::Mongodb => {
                let url = server_url(
                    db,
                    "STATEGRAPH_TEST_MONGODB_URL",
                    "mongodb://127.0.0.1:27117/?directConnection=true",
                );
                let saver = stategraph::MongoConfig::from_url(&url)
                    .map_err(err)?
                    .database(format!("sgb_{unique}"))
                    .connect()
                    .await
                    .map_err(err)?;
                (Some(Arc::new(saver.clone())), Place::Mongodb { saver })
            }
        };
        Ok(Self { kind, saver, place })
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Where it stores.
    pub(crate) fn place(&self) -> &Place {
        &self.place
    }

    /// The saver graphs use (`None` for [`BackendKind::None`]).
    pub fn saver(&self) -> Option<Arc<dyn CheckpointSaver>> {
        self.saver.clone()
    }

    /// What the run stored so far (`None` for the in-process backends).
    pub async fn size(&self) -> Result<Option<DbSize>, BenchError> {
        let kind = self.kind;
        let size = match &self.place {
            Place::Nothing => return Ok(None),
            Place::Sqlite { path, .. } => sqlite_size(path).map_err(|e| fail(kind, e))?,
            Place::Postgres { url, schema } => postgres_size(url, schema)
                .await
                .map_err(|e| fail(kind, e))?,
            Place::Mysql { url, database } => {
                mysql_size(url, database).await.map_err(|e| fail(kind, e))?
            }
            Place::Redis { client, prefix } => redis_size(client, prefix)
                .await
                .map_err(|e| fail(kind, e))?,
            Place::Mongodb { saver } => mongodb_size(saver.database())
                .await
                .map_err(|e| fail(kind, e))?,
        };
        Ok(Some(size))
    }

    /// Removes what the run stored (the schema, database or keys; the SQLite file goes with
    /// its temporary directory).
    pub async fn remove(self) -> Result<(), BenchError> {
        let kind = self.kind;
        drop(self.saver);
        match self.place {
            Place::Nothing | Place::Sqlite { .. } => Ok(()),
            Place::Postgres { url, schema } => {
                let client = pg_connect(&url).await.map_err(|e| fail(kind, e))?;
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
                    .map_err(|e| fail(kind, e))
            }
            Place::Mysql { url, database } => {
                use mysql_async::prelude::Queryable;
                let pool = mysql_async::Pool::from_url(url.as_str()).map_err(|e| fail(kind, e))?;
                let mut conn = pool.get_conn().await.map_err(|e| fail(kind, e))?;
                conn.query_drop(format!("DROP DATABASE IF EXISTS `{database}`"))
                    .await
                    .map_err(|e| fail(kind, e))?;
                drop(conn);
                pool.disconnect().await.map_err(|e| fail(kind, e))
            }
            Place::Redis { client, prefix } => {
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| fail(kind, e))?;
                let keys = redis_keys(&mut conn, &prefix)
                    .await
                    .map_err(|e| fail(kind, e))?;
                for chunk in keys.chunks(500) {
                    let _: () = redis::cmd("DEL")
                        .arg(chunk)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| fail(kind, e))?;
                }
                Ok(())
            }
            Place::Mongodb { saver } => saver.database().drop().await.map_err(|e| fail(kind, e)),
        }
    }
}

/// `collStats` of the saver's collections: data and index bytes, documents.
async fn mongodb_size(db: &mongodb::Database) -> Result<DbSize, Box<dyn std::error::Error>> {
    use mongodb::bson::doc;
    let mut size = DbSize::default();
    for name in ["checkpoints", "checkpoint_writes"] {
        let stats = db.run_command(doc! { "collStats": name }).await?;
        let number = |key: &str| match stats.get(key) {
            Some(mongodb::bson::Bson::Int32(i)) => u64::try_from(*i).unwrap_or(0),
            Some(mongodb::bson::Bson::Int64(i)) => u64::try_from(*i).unwrap_or(0),
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(mongodb::bson::Bson::Double(f)) => *f as u64,
            _ => 0,
        };
        size.bytes += number("size") + number("totalIndexSize");
        size.rows.push((name.to_owned(), number("count")));
    }
    Ok(size)
}

fn sqlite_size(path: &std::path::Path) -> Result<DbSize, Box<dyn std::error::Error>> {
    let conn = rusqlite::Connection::open(path)?;
    // Fold the WAL into the file where no reader holds it back; whatever stays is counted.
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let file = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let bytes = file(path) + file(std::path::Path::new(&wal));
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    for t in tables {
        let n: i64 = conn.query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))?;
        rows.push((t, u64::try_from(n)?));
    }
    Ok(DbSize { bytes, rows })
}

/// A plain connection to the bench's database (the URL without the saver's own parameters,
/// such as `blob_compression`, which the driver does not know).
pub(crate) async fn pg_connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (url, _) = stategraph::backend::take_url_param(url, "blob_compression");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn postgres_size(url: &str, schema: &str) -> Result<DbSize, Box<dyn std::error::Error>> {
    let client = pg_connect(url).await?;
    let tables = client
        .query(
            "SELECT c.relname::text, pg_total_relation_size(c.oid) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
            &[&schema],
        )
        .await?;
    let mut size = DbSize::default();
    for t in tables {
        let name: String = t.get(0);
        let bytes: i64 = t.get(1);
        size.bytes += u64::try_from(bytes)?;
        let n: i64 = client
            .query_one(
                &format!("SELECT count(*) FROM \"{schema}\".\"{name}\""),
                &[],
            )
            .await?
            .get(0);
        size.rows.push((name, u64::try_from(n)?));
    }
    Ok(size)
}

async fn mysql_size(url: &str, database: &str) -> Result<DbSize, Box<dyn std::error::Error>> {
    use mysql_async::prelude::Queryable;
    let pool = mysql_async::Pool::from_url(url)?;
    let mut conn = pool.get_conn().await?;
    let tables: Vec<String> = conn
        .exec(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? \
             ORDER BY table_name",
            (database,),
        )
        .await?;
    let mut size = DbSize::default();
    for t in tables {
        // information_schema's lengths are statistics: refresh them first.
        conn.query_drop(format!("ANALYZE TABLE `{database}`.`{t}`"))
            .await?;
        let bytes: Option<u64> = conn
            .exec_first(
                "SELECT data_length + index_length FROM information_schema.tables \
                 WHERE table_schema = ? AND table_name = ?",
                (database, &t),
            )
            .await?;
        let n: Option<u64> = conn
            .query_first(format!("SELECT count(*) FROM `{database}`.`{t}`"))
            .await?;
        size.bytes += bytes.unwrap_or(0);
        size.rows.push((t, n.unwrap_or(0)));
    }
    drop(conn);
    pool.disconnect().await?;
    Ok(size)
}

async fn redis_keys(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

async fn redis_size(
    client: &redis::Client,
    prefix: &str,
) -> Result<DbSize, Box<dyn std::error::Error>> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    let keys = redis_keys(&mut conn, prefix).await?;
    let mut size = DbSize::default();
    let mut kinds: std::collections::BTreeMap<String, u64> = Default::default();
    for key in &keys {
        let bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut conn)
            .await?;
        size.bytes += bytes.unwrap_or(0);
        // `<prefix>:<kind>:…`: checkpoints (cp), writes (w), indexes (idx), namespaces, threads.
        let kind = key[prefix.len() + 1..]
            .split(':')
            .next()
            .unwrap_or_default();
        *kinds.entry(kind.to_owned()).or_default() += 1;
    }
    size.rows = kinds.into_iter().collect();
    Ok(size)
}
