//! Opening a database by its URL: the saver, the store and the run queue of the backend the\nURL's scheme names.

use super::*;

/// Opens (and sets up) the checkpoint saver a database URL names, with LangGraph's default
/// serializer ([`JsonPlusSerializer`]). For a backend's other settings, use its config
/// (`SqliteConfig`, `PostgresConfig`, `MySqlConfig`, `RedisConfig`, `MongoConfig`:
/// `from_url(url)?.….connect().await`).
///
/// `memory:` is an [`InMemorySaver`]; `sqlite:` URLs need the `sqlite` feature (on by default),
/// `postgres://` / `postgresql://` the `postgres` feature, `mysql://` the `mysql` feature and
/// `redis://` / `rediss://` the `redis` feature and `mongodb://` / `mongodb+srv://` the
/// `mongodb` feature. An unknown scheme, or one whose feature is off, is a
/// [`CheckpointError::InvalidInput`] that says so. A Redis URL may carry `prefix=NAME` (the key
/// prefix, default `stategraph`) and `ttl=SECONDS` among its query parameters; a MongoDB URL
/// names its database in its path (default `checkpointing_db`, as Python's saver) and may carry
/// `ttl=SECONDS`, `checkpoint_collection=NAME` and `writes_collection=NAME`. Networked
/// databases take `connect_timeout`, `statement_timeout` and `idle_timeout` (seconds, `0` for
/// none) as query parameters: no call waits on a silent server forever (see
/// [`backend::Timeouts`]).
pub async fn open_saver(url: &str) -> Result<Arc<dyn CheckpointSaver>, CheckpointError> {
    open_saver_with(url, OpenOptions::new()).await
}

/// How [`open_saver_with`] opens a database.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    serializer: Arc<dyn Serializer>,
    existing: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// LangGraph's default serializer; the database is created and migrated as needed.
    pub fn new() -> Self {
        Self {
            serializer: Arc::new(JsonPlusSerializer::new()),
            existing: false,
        }
    }

    /// Another serializer for checkpoints and writes, for example an [`EncryptedSerializer`]
    /// to read and write threads encrypted with `LANGGRAPH_AES_KEY`.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// `config` with these options (the serializer; no setup for [`existing`](Self::existing)).
    #[cfg(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis",
        feature = "mongodb"
    ))]
    pub(crate) fn apply<C: backend::SaverConfig>(&self, config: C) -> C {
        let config = config.serializer(Arc::clone(&self.serializer));
        if self.existing {
            config.without_setup()
        } else {
            config
        }
    }

    /// Opens only a database that exists, without creating or changing anything: no file,
    /// database or table is created and no migration runs (a SQLite file also keeps its
    /// journal mode). A missing SQLite file, MySQL database or checkpoint tables are an
    /// [`CheckpointError::NotFound`] naming them. Tools that only read use this.
    pub fn existing(mut self) -> Self {
        self.existing = true;
        self
    }
}

/// [`open_saver`] with [`OpenOptions`].
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// let serde = stategraph::EncryptedSerializer::aes(b"0123456789abcdef")?;
/// let options = stategraph::OpenOptions::new().serializer(Arc::new(serde));
/// let saver = stategraph::open_saver_with("sqlite::memory:", options).await?;
/// assert_eq!(saver.name(), "sqlite");
/// # Ok::<(), stategraph::Error>(()) }).unwrap();
/// ```
pub async fn open_saver_with(
    url: &str,
    options: OpenOptions,
) -> Result<Arc<dyn CheckpointSaver>, CheckpointError> {
    let scheme = url.split(':').next().unwrap_or_default();
    #[cfg(not(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis",
        feature = "mongodb"
    )))]
    let _ = &options;
    match scheme {
        "memory" => Ok(Arc::new(InMemorySaver::new())),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Arc::new(open_config::<SqliteConfig>(url, options).await?)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            Ok(Arc::new(open_config::<PostgresConfig>(url, options).await?))
        }
        #[cfg(feature = "mysql")]
        "mysql" => Ok(Arc::new(open_config::<MySqlConfig>(url, options).await?)),
        #[cfg(feature = "redis")]
        "redis" | "rediss" => Ok(Arc::new(open_config::<RedisConfig>(url, options).await?)),
        #[cfg(feature = "mongodb")]
        "mongodb" | "mongodb+srv" => Ok(Arc::new(open_config::<MongoConfig>(url, options).await?)),
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(missing_feature(scheme)),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(missing_feature(scheme)),
        #[cfg(not(feature = "mysql"))]
        "mysql" => Err(missing_feature(scheme)),
        #[cfg(not(feature = "redis"))]
        "redis" | "rediss" => Err(missing_feature(scheme)),
        #[cfg(not(feature = "mongodb"))]
        "mongodb" | "mongodb+srv" => Err(missing_feature(scheme)),
        _ => Err(CheckpointError::invalid(
            "database URL",
            format!(
                "`{}`: unknown scheme (expected memory:, sqlite:, postgres://, mysql://, redis:// or mongodb://)",
                redact_url(url)
            ),
        )),
    }
}

/// Opens the saver of one backend's config as [`OpenOptions`] say.
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis",
    feature = "mongodb"
))]
async fn open_config<C: backend::SaverConfig>(
    url: &str,
    options: OpenOptions,
) -> Result<C::Saver, CheckpointError> {
    options.apply(C::from_url(url)?).connect().await
}

/// Opens (and sets up) the run queue of an Agent Server on the database a URL names: the one
/// owner of the server's runs, shared by every server process on that database.
///
/// `memory:` is an [`InMemoryRunQueue`](runs::InMemoryRunQueue) (one process only);
/// `sqlite:` URLs (feature `sqlite`, on by default) open a [`SqliteRunQueue`] in the same
/// file as the checkpoints, and `postgres://` / `postgresql://` URLs (feature `postgres`) a
/// `PostgresRunQueue`, each creating or upgrading its tables. The other databases have no
/// run queue: an [`CheckpointError::InvalidInput`] says so.
///
/// ```
/// use stategraph::runs::{NewRun, RunQueue};
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let url = format!("sqlite:{}", dir.path().join("app.sqlite").display());
/// let queue = stategraph::open_run_queue(&url).await?;
/// queue.enqueue(NewRun::new("run-1", "thread-1")).await?;
/// // Another process opening the file sees the run.
/// let again = stategraph::open_run_queue(&url).await?;
/// assert!(again.get("run-1").await?.is_some());
/// # Ok::<(), stategraph::Error>(()) }).unwrap();
/// ```
pub async fn open_run_queue(url: &str) -> Result<Arc<dyn runs::RunQueue>, CheckpointError> {
    let scheme = url.split(':').next().unwrap_or_default();
    match scheme {
        "memory" => Ok(Arc::new(runs::InMemoryRunQueue::new())),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Arc::new(SqliteRunQueue::connect(url).await?)),
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(missing_feature(scheme)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(Arc::new(PostgresRunQueue::connect(url).await?)),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(missing_feature(scheme)),
        "mysql" | "redis" | "rediss" | "mongodb" | "mongodb+srv" => Err(CheckpointError::invalid(
            "database URL",
            format!(
                "`{}`: {scheme} has no run queue (sqlite: and postgres:// have one); a server \
                 over it runs as one process, with its runs in memory (`memory:`)",
                redact_url(url)
            ),
        )),
        _ => Err(CheckpointError::invalid(
            "database URL",
            format!(
                "`{}`: unknown scheme (expected memory:, sqlite: or postgres://)",
                redact_url(url)
            ),
        )),
    }
}

/// Opens (and sets up) the cross-thread memory [`Store`](store::Store) a database URL names.
///
/// `memory:` is an [`InMemoryStore`](store::InMemoryStore); `sqlite:` URLs (feature `sqlite`,
/// on by default) open a [`SqliteStore`] and `postgres://` / `postgresql://` URLs (feature
/// `postgres`) a `PostgresStore`, creating or upgrading their tables (as
/// [`SqliteStoreConfig`]`::from_url(url)?.….connect()` does, which has every other setting).
/// `options` carries the semantic search index and the TTL behaviour; a TTL sweeper is *not*
/// started (see [`store::spawn_ttl_sweeper`]).
///
/// ```
/// use std::sync::Arc;
/// use stategraph::prelude::*;
/// use stategraph::store::HashingEmbeddings;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64)));
/// let store = stategraph::open_store("sqlite::memory:", StoreOptions::new().index(index)).await?;
/// store.put(&["user-1", "memories"], "m1", serde_json::json!({"text": "I like pizza"})).await?;
/// let hits = store.search(&["user-1"], SearchOptions::new().query("pizza")).await?;
/// assert_eq!(hits[0].key, "m1");
/// # Ok::<(), stategraph::store::StoreError>(()) }).unwrap();
/// ```
pub async fn open_store(
    url: &str,
    options: store::StoreOptions,
) -> std::result::Result<Arc<dyn store::Store>, store::StoreError> {
    open_store_as(url, options, true).await
}

/// [`open_store`] for tools that only read: opens the store a database URL names without
/// creating or changing anything (as the store configs' `without_setup`). A SQLite file must
/// exist and a database must already have the store's tables (which [`open_store`]
/// creates): otherwise the error is
/// [`StoreError::MissingTables`](store::StoreError::MissingTables), naming them. Writing
/// through the store still works where the tables exist.
///
/// ```
/// use stategraph::store::{StoreError, StoreOptions};
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let url = format!("sqlite:{}", dir.path().join("app.sqlite").display());
/// let err = stategraph::open_existing_store(&url, StoreOptions::new()).await.unwrap_err();
/// assert!(matches!(err, StoreError::MissingTables { .. }));
/// assert!(!dir.path().join("app.sqlite").exists());
/// # });
/// ```
pub async fn open_existing_store(
    url: &str,
    options: store::StoreOptions,
) -> std::result::Result<Arc<dyn store::Store>, store::StoreError> {
    open_store_as(url, options, false).await
}

/// Opens the store of `url`; `setup`: create and migrate its tables, else only check them.
async fn open_store_as(
    url: &str,
    options: store::StoreOptions,
    setup: bool,
) -> std::result::Result<Arc<dyn store::Store>, store::StoreError> {
    let scheme = url.split(':').next().unwrap_or_default();
    let store::StoreOptions { index, ttl } = options;
    #[cfg(not(all(feature = "sqlite", feature = "postgres")))]
    let _ = setup;
    match scheme {
        "memory" => Ok(Arc::new(store::InMemoryStore::from_options(
            store::StoreOptions { index, ttl },
        ))),
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let mut config = SqliteStoreConfig::from_url(url)?.ttl(ttl);
            if let Some(index) = index {
                config = config.index(index);
            }
            if !setup {
                config = config.without_setup();
            }
            Ok(Arc::new(config.connect().await?))
        }
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            let mut config = PostgresStoreConfig::from_url(url)?.ttl(ttl);
            if let Some(index) = index {
                config = config.index(index);
            }
            if !setup {
                config = config.without_setup();
            }
            Ok(Arc::new(config.connect().await?))
        }
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(store_missing_feature(scheme, "sqlite")),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(store_missing_feature(scheme, "postgres")),
        _ => Err(store::StoreError::InvalidConfig(format!(
            "store URL `{url}`: unknown scheme (expected memory:, sqlite: or postgres://)"
        ))),
    }
}

#[cfg(not(all(feature = "sqlite", feature = "postgres")))]
fn store_missing_feature(scheme: &str, feature: &str) -> store::StoreError {
    store::StoreError::InvalidConfig(format!(
        "`{scheme}:` store URLs need the stategraph feature `{feature}`, which this build lacks"
    ))
}

#[cfg(not(all(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis",
    feature = "mongodb"
)))]
fn missing_feature(scheme: &str) -> CheckpointError {
    CheckpointError::invalid(
        "database URL",
        format!("`{scheme}:` URLs need a stategraph backend feature that this build lacks"),
    )
}
