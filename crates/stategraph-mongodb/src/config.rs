//! Connecting a MongoDB saver: URL, database, collections, TTL, serializer, timeouts.

use std::sync::Arc;
use std::time::Duration;

use mongodb::options::{ClientOptions, ConnectionString};
use stategraph_checkpoint::backend::{Timeouts, take_url_param, ttl_param};
use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer, redact_url};

use crate::error::{BACKEND, db};
use crate::saver::{Collections, MongoSaver};

/// The database Python's `MongoDBSaver` uses by default.
pub const DEFAULT_DATABASE: &str = "checkpointing_db";

/// Builds a [`MongoSaver`]: the server, database, collection names, TTL, serializer and
/// timeouts; [`connect`](Self::connect) connects.
///
/// The defaults are those of Python's `MongoDBSaver`: database `checkpointing_db` (unless the
/// URL names one), collections `checkpoints` and `checkpoint_writes`, no TTL.
///
/// ```no_run
/// use std::time::Duration;
/// use stategraph_mongodb::MongoConfig;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// let saver = MongoConfig::from_url("mongodb+srv://user:pass@cluster0.example.net/agents")?
///     .ttl(Duration::from_secs(7 * 24 * 60 * 60))
///     .connect()
///     .await?;
/// # let _ = saver;
/// # Ok(()) }
/// ```
///
/// The same settings as URL query parameters:
///
/// ```
/// use std::time::Duration;
/// use stategraph_mongodb::MongoConfig;
///
/// let config = MongoConfig::from_url(
///     "mongodb://127.0.0.1:27017/agents?ttl=3600&checkpoint_collection=cps&directConnection=true",
/// )?;
/// assert_eq!(config.database_name(), "agents");
/// assert_eq!(config.checkpoint_collection_name(), "cps");
/// assert_eq!(config.writes_collection_name(), "checkpoint_writes");
/// assert_eq!(config.checkpoint_ttl(), Some(Duration::from_secs(3600)));
/// # Ok::<(), stategraph_checkpoint::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MongoConfig {
    url: String,
    database: String,
    collections: Collections,
    ttl: Option<Duration>,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
    setup: bool,
    /// A client of the user's ([`from_client`](Self::from_client)), used instead of the URL.
    client: Option<mongodb::Client>,
}

impl MongoConfig {
    /// Parses a `mongodb://` / `mongodb+srv://` URL (the driver's own options included). The
    /// database is the URL's path (default `checkpointing_db`). Besides the driver's options
    /// it may carry, as query parameters: `ttl` (seconds: each checkpoint and write expires
    /// that long after it was written, through a TTL index, as with the Python saver's `ttl`),
    /// `checkpoint_collection` / `writes_collection` (collection names), and
    /// `connect_timeout` / `statement_timeout` / `idle_timeout` (seconds, `0` for none; see
    /// [`Timeouts`]).
    pub fn from_url(url: &str) -> Result<Self> {
        let (rest, timeouts) = Timeouts::default().take_from_url(url)?;
        let (rest, ttl) = take_url_param(&rest, "ttl");
        let ttl = ttl.map(|t| ttl_param("ttl", &t)).transpose()?;
        let (rest, checkpoints) = take_url_param(&rest, "checkpoint_collection");
        let (rest, writes) = take_url_param(&rest, "writes_collection");
        if let Some(at) = bad_percent_escape(&rest) {
            return Err(Error::invalid(
                "database URL",
                format!(
                    "`{}`: `%` at byte {at} does not start a percent-escape (`%` and two hex digits)",
                    redact_url(url)
                ),
            ));
        }
        let parsed = ConnectionString::parse(&rest).map_err(|e| {
            Error::invalid(
                "database URL",
                format!("`{}`: not a MongoDB URL: {e}", redact_url(url)),
            )
        })?;
        let database = parsed
            .default_database
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
        let mut collections = Collections::default();
        if let Some(name) = checkpoints {
            collections.checkpoints = name;
        }
        if let Some(name) = writes {
            collections.writes = name;
        }
        collections.validate()?;
        Ok(Self {
            url: rest,
            database,
            collections,
            ttl,
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts,
            setup: true,
            client: None,
        })
    }

    /// A saver on a client you own (its connection pool shared with your other uses of it),
    /// in database `database`; the other settings are the defaults, as
    /// [`from_url`](Self::from_url) gives them. The client's own options (timeouts, pool
    /// size) stay as you set them; [`timeouts`](Self::timeouts) still bound each operation.
    pub fn from_client(client: mongodb::Client, database: impl Into<String>) -> Self {
        Self {
            url: "the client's deployment".to_owned(),
            database: database.into(),
            collections: Collections::default(),
            ttl: None,
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts: Timeouts::default(),
            setup: true,
            client: Some(client),
        }
    }

    /// The database (default: the URL's, else `checkpointing_db`).
    pub fn database(mut self, name: impl Into<String>) -> Self {
        self.database = name.into();
        self
    }

    /// The checkpoints collection (default `checkpoints`).
    pub fn checkpoint_collection(mut self, name: impl Into<String>) -> Self {
        self.collections.checkpoints = name.into();
        self
    }

    /// The pending writes collection (default `checkpoint_writes`).
    pub fn writes_collection(mut self, name: impl Into<String>) -> Self {
        self.collections.writes = name.into();
        self
    }

    /// Each checkpoint and each write expires `ttl` after it was written (a `created_at`
    /// field and a TTL index on it in both collections, as the Python saver's `ttl`; MongoDB
    /// counts whole seconds and removes expired documents in the background, about once a
    /// minute). Default: never. An existing TTL index with another duration is changed to
    /// this one when the saver sets up.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Uses another serializer for checkpoints, metadata values and writes.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// How long to wait for the server: connecting (server selection included) and each
    /// operation of the saver (default 10 s and 60 s; idle pooled connections are closed
    /// after 5 minutes; see [`Timeouts`]). A limit that runs out is an error naming the
    /// operation.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Connects without creating anything: the checkpoints collection must exist
    /// ([`Error::NotFound`] naming it otherwise) and no index is created. Read-only tools
    /// use this.
    pub fn without_setup(mut self) -> Self {
        self.setup = false;
        self
    }

    /// The database the saver uses.
    pub fn database_name(&self) -> &str {
        &self.database
    }

    /// The checkpoints collection's name.
    pub fn checkpoint_collection_name(&self) -> &str {
        &self.collections.checkpoints
    }

    /// The pending writes collection's name.
    pub fn writes_collection_name(&self) -> &str {
        &self.collections.writes
    }

    /// The TTL of checkpoints and writes (`None`: they never expire).
    pub fn checkpoint_ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// Connects (a pool the driver manages), checks the server answers, and — unless
    /// [`without_setup`](Self::without_setup) — creates the collections' indexes: Python's
    /// unique indexes and the TTL indexes.
    pub async fn connect(self) -> Result<MongoSaver> {
        let target = redact_url(&self.url);
        let client = match &self.client {
            Some(client) => client.clone(),
            None => self.client_of_url(&target).await?,
        };
        let database = client.database(&self.database);
        self.timeouts
            .connect(BACKEND, &target, async {
                database
                    .run_command(mongodb::bson::doc! { "ping": 1 })
                    .await
                    .map(drop)
                    .map_err(db("cannot connect to MongoDB"))
            })
            .await?;
        let saver = MongoSaver::new(
            client,
            &self.database,
            &self.collections,
            self.ttl,
            self.serializer,
            self.timeouts,
        );
        if self.setup {
            saver.setup().await?;
        } else {
            saver.check_existing().await?;
        }
        Ok(saver)
    }
}

impl MongoConfig {
    /// A client of the URL's deployment, with the timeouts applied to its options.
    async fn client_of_url(&self, target: &str) -> Result<mongodb::Client> {
        let mut options = self
            .timeouts
            .connect(BACKEND, target, async {
                ClientOptions::parse(self.url.as_str())
                    .await
                    .map_err(|e| Error::invalid("database URL", format!("`{target}`: {e}")))
            })
            .await?;
        options.connect_timeout = self.timeouts.connect.or(options.connect_timeout);
        options.server_selection_timeout =
            self.timeouts.connect.or(options.server_selection_timeout);
        options.max_idle_time = self.timeouts.idle.or(options.max_idle_time);
        if options.app_name.is_none() {
            options.app_name = Some("stategraph".to_owned());
        }
        mongodb::Client::with_options(options).map_err(db("cannot connect"))
    }
}

/// The byte offset of a `%` not followed by two hex digits, if any. (Every `%` of a URL starts
/// an escape; checked here because the driver's parser panics on some of these.)
fn bad_percent_escape(url: &str) -> Option<usize> {
    let bytes = url.as_bytes();
    bytes.iter().enumerate().find_map(|(i, b)| {
        let escaped = bytes
            .get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
        (*b == b'%' && !escaped).then_some(i)
    })
}

impl stategraph_checkpoint::backend::SaverConfig for MongoConfig {
    type Saver = MongoSaver;

    fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        MongoConfig::from_url(url)
    }

    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self {
        MongoConfig::serializer(self, serializer)
    }

    fn without_setup(self) -> Self {
        MongoConfig::without_setup(self)
    }

    async fn connect(self) -> stategraph_checkpoint::Result<MongoSaver> {
        MongoConfig::connect(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let c = MongoConfig::from_url(
            "mongodb://h:27017/app?writes_collection=w&statement_timeout=2&directConnection=true",
        )
        .unwrap();
        assert_eq!(c.url, "mongodb://h:27017/app?directConnection=true");
        assert_eq!(c.database_name(), "app");
        assert_eq!(c.writes_collection_name(), "w");
        assert_eq!(c.checkpoint_collection_name(), "checkpoints");
        assert_eq!(c.timeouts.statement, Some(Duration::from_secs(2)));
        let d = MongoConfig::from_url("mongodb://h").unwrap();
        assert_eq!(d.database_name(), DEFAULT_DATABASE);
        assert!(MongoConfig::from_url("mongodb://h?ttl=soon").is_err());
        assert!(MongoConfig::from_url("mongodb://h?checkpoint_collection=a$b").is_err());
        assert!(MongoConfig::from_url("redis://h").is_err());
        assert!(MongoConfig::from_url("mongodb://").is_err());
        // The driver's own parser panics on this one.
        assert!(MongoConfig::from_url("mongodb://%aé@").is_err());
    }

    proptest::proptest! {
        #[test]
        fn from_url_never_panics(url in proptest::arbitrary::any::<String>()) {
            let _ = MongoConfig::from_url(&url);
        }

        #[test]
        fn from_url_near_the_format_never_panics(
            url in "(mongodb|mongodb\\+srv)://([a-zé%]{0,4}(:[a-z%]{0,4})?@)?[a-z0-9.\\[\\]:,é]{0,16}(/[0-9a-z%.$]{0,4})?(\\?(([a-zA-Z_]{1,16}|ttl|checkpoint_collection|writes_collection|connect_timeout|statement_timeout|directConnection|replicaSet|tls|authSource)=(-?[0-9]{0,22}(\\.[0-9]{0,3})?|[a-z%é$-]{0,8})&?){0,4})?",
        ) {
            let _ = MongoConfig::from_url(&url);
        }
    }
}
