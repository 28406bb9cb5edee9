//! Connecting a Postgres saver: URL, pool size, schema, serializer.

use std::sync::Arc;

use stategraph_checkpoint::backend::{Timeouts, take_url_param};
use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer};

use crate::database::PostgresDatabase;
use crate::saver::PostgresSaver;

/// Builds a [`PostgresSaver`]: the connection (URL, schema, pool size, timeouts), the
/// serializer; [`connect`](Self::connect) connects and, unless
/// [`without_setup`](Self::without_setup), creates or upgrades LangGraph's tables. (A
/// [`PostgresStoreConfig`](crate::PostgresStoreConfig) can be made from one, to share the
/// settings.)
///
/// ```no_run
/// use std::time::Duration;
/// use stategraph_checkpoint::backend::Timeouts;
/// use stategraph_postgres::PostgresConfig;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// let saver = PostgresConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
///     .schema("checkpoints")
///     .pool_size(4)
///     .timeouts(Timeouts { statement: Some(Duration::from_secs(30)), ..Timeouts::default() })
///     .connect()
///     .await?;
/// # let _ = saver;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PostgresConfig {
    pub(crate) pg: tokio_postgres::Config,
    pub(crate) pool_size: usize,
    pub(crate) schema: Option<String>,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) run_setup: bool,
    pub(crate) prepared_statements: bool,
    pub(crate) timeouts: Timeouts,
    pub(crate) compression: BlobCompression,
    /// The database this configuration was made from ([`PostgresDatabase::saver`]): its
    /// pool and connection settings are used instead of the ones above.
    pub(crate) database: Option<PostgresDatabase>,
}

/// How the server compresses the large values of the checkpoint tables: the `blob` columns of
/// `checkpoint_blobs` and `checkpoint_writes`, which hold a chat's message lists (a column's
/// TOAST compression, set by [`PostgresConfig::compression`] when the saver sets up its
/// tables; rows written before keep theirs, and Python's saver reads and writes the columns
/// unchanged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlobCompression {
    /// lz4 where the server has it (PostgreSQL 14 or later, built with lz4, as Debian's and
    /// the official images are), else the server's default: lz4 compresses a large blob about
    /// three times faster than the default pglz.
    #[default]
    Lz4IfSupported,
    /// lz4, or an error at set-up if the server does not have it.
    Lz4,
    /// The columns are left as they are (the server's `default_toast_compression`, pglz
    /// unless configured otherwise).
    ServerDefault,
}

impl PostgresConfig {
    /// Parses a `postgres://` / `postgresql://` URL (or a libpq key=value string). Settings in
    /// it — host, port, user, password, dbname, `sslmode`, `connect_timeout`,
    /// `application_name`, `options` — are passed to the driver. This build connects without
    /// TLS: `sslmode=prefer` (the default) falls back to plain TCP, `sslmode=require` fails to
    /// connect with a clear error.
    ///
    /// `connect_timeout`, `statement_timeout` and `idle_timeout` (seconds, `0` for none) set
    /// the saver's [`Timeouts`]; `connect_timeout` bounds the whole connection (handshake and
    /// authentication included), not only the TCP connect.
    ///
    /// `blob_compression` (`lz4_if_supported`, `lz4` or `server_default`) sets
    /// [`compression`](Self::compression), for tools and servers configured by URL alone.
    pub fn from_url(url: &str) -> Result<Self> {
        let (rest, timeouts) = Timeouts::default().take_from_url(url)?;
        let (rest, compression) = take_compression(&rest)?;
        let mut pg: tokio_postgres::Config = rest
            .parse()
            .map_err(|e| Error::invalid("database URL", format!("`{}`: {e}", redact(url))))?;
        if let Some(t) = timeouts.connect {
            pg.connect_timeout(t);
        }
        Ok(Self {
            pg,
            pool_size: 8,
            schema: None,
            serializer: Arc::new(JsonPlusSerializer::new()),
            run_setup: true,
            prepared_statements: true,
            timeouts,
            compression,
            database: None,
        })
    }

    /// A saver's configuration on `database`, with the default saver settings.
    pub(crate) fn on(database: PostgresDatabase) -> Self {
        Self {
            pg: tokio_postgres::Config::new(),
            pool_size: 8,
            schema: database.schema().map(str::to_owned),
            serializer: Arc::new(JsonPlusSerializer::new()),
            run_setup: true,
            prepared_statements: database.prepared_statements(),
            timeouts: database.timeouts(),
            compression: BlobCompression::default(),
            database: Some(database),
        }
    }

    /// The database of these connection settings, opened once — one pool — to build the
    /// saver, the store and the run queue of one database from ([`PostgresDatabase`]). No
    /// connection is made until one is needed. A configuration already made from a database
    /// ([`PostgresDatabase::saver`]) opens that one.
    ///
    /// # Errors
    /// A pool that cannot be built from the settings.
    pub fn open(&self) -> Result<PostgresDatabase> {
        match &self.database {
            Some(db) => Ok(db.clone()),
            None => PostgresDatabase::open(self),
        }
    }

    /// Keeps LangGraph's tables in this schema (created if missing) instead of the
    /// connection's default `search_path` (set as a startup option of every connection: the
    /// schema, then `public`). A connection setting, as [`pool_size`](Self::pool_size),
    /// [`timeouts`](Self::timeouts) and [`prepared_statements`](Self::prepared_statements)
    /// are: a configuration made from a [`PostgresDatabase`] has that database's.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        let schema = schema.into();
        self.pg
            .options(format!("-c search_path=\"{}\"", schema.replace('"', "")));
        self.schema = Some(schema);
        self
    }

    /// These settings with `db`'s schema (for connections of a component of `db`).
    pub(crate) fn schema_of(self, db: &PostgresDatabase) -> Self {
        match db.schema() {
            Some(schema) => self.schema(schema),
            None => self,
        }
    }

    /// Connections kept in the pool (default 8).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// The serializer for blobs and writes (default [`JsonPlusSerializer`]).
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// Whether the saver's statements are prepared on the server, once per pooled connection
    /// (default `true`, as psycopg does for Python's saver): the server then parses and plans
    /// each only once. Turn it off behind a pooler in transaction mode that does not carry
    /// prepared statements between server connections (PgBouncer before 1.21, or without
    /// `max_prepared_statements`); every statement is then sent with its text.
    pub fn prepared_statements(mut self, enabled: bool) -> Self {
        self.prepared_statements = enabled;
        self
    }

    /// Connects without creating or changing anything: no migration runs (run
    /// [`PostgresSaver::setup`] yourself, e.g. from a deploy step), and the checkpoint
    /// tables must exist (missing ones are an `Error::NotFound` naming them).
    pub fn without_setup(mut self) -> Self {
        self.run_setup = false;
        self
    }

    /// How long to wait for the server: connecting, each operation, and how long a pooled
    /// connection may idle before it is replaced (default: 10 s, 60 s, 5 minutes; see
    /// [`Timeouts`]). A limit that runs out is an `Error::Timeout` naming the operation.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        if let Some(t) = timeouts.connect {
            self.pg.connect_timeout(t);
        }
        self.timeouts = timeouts;
        self
    }

    /// How the server compresses the blob columns (default
    /// [`BlobCompression::Lz4IfSupported`]); applied when the saver sets up its tables.
    pub fn compression(mut self, compression: BlobCompression) -> Self {
        self.compression = compression;
        self
    }

    /// Connects, and (unless disabled) creates or upgrades LangGraph's tables.
    pub async fn connect(self) -> Result<PostgresSaver> {
        PostgresSaver::connect_with(self).await
    }
}

/// The URL without its `blob_compression` parameter, and the compression it names (the
/// default without one).
fn take_compression(url: &str) -> Result<(String, BlobCompression)> {
    let (url, value) = take_url_param(url, "blob_compression");
    let compression = match value.as_deref() {
        None | Some("lz4_if_supported") => BlobCompression::Lz4IfSupported,
        Some("lz4") => BlobCompression::Lz4,
        Some("server_default") => BlobCompression::ServerDefault,
        Some(other) => {
            return Err(Error::invalid(
                "database URL",
                format!(
                    "`blob_compression` is lz4_if_supported, lz4 or server_default, not `{other}`"
                ),
            ));
        }
    };
    Ok((url, compression))
}

/// The URL without its password, for error messages.
pub(crate) use stategraph_checkpoint::redact_url as redact;

impl stategraph_checkpoint::backend::SaverConfig for PostgresConfig {
    type Saver = PostgresSaver;

    fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        PostgresConfig::from_url(url)
    }

    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self {
        PostgresConfig::serializer(self, serializer)
    }

    fn without_setup(self) -> Self {
        PostgresConfig::without_setup(self)
    }

    async fn connect(self) -> stategraph_checkpoint::Result<PostgresSaver> {
        PostgresConfig::connect(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(PostgresConfig::from_url("postgres://postgres@127.0.0.1:5432/test").is_ok());
        assert!(PostgresConfig::from_url("postgres://u:p@h/db?sslmode=require").is_ok());
        let c = PostgresConfig::from_url(
            "postgres://h/db?blob_compression=server_default&sslmode=prefer",
        )
        .unwrap();
        assert_eq!(c.compression, BlobCompression::ServerDefault);
        assert_eq!(
            PostgresConfig::from_url("postgres://h/db")
                .unwrap()
                .compression,
            BlobCompression::Lz4IfSupported
        );
        let err = PostgresConfig::from_url("postgres://h/db?blob_compression=zstd").unwrap_err();
        assert!(err.to_string().contains("not `zstd`"), "{err}");
        let err = PostgresConfig::from_url("postgres://u:secret@h:notaport/db").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert_eq!(redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
    }

    proptest::proptest! {
        #[test]
        fn from_url_never_panics(url in proptest::arbitrary::any::<String>()) {
            let _ = PostgresConfig::from_url(&url);
        }

        #[test]
        fn from_url_near_the_format_never_panics(
            url in "postgres(ql)?://([a-zé%0-9]{0,4}(:[a-z%]{0,4})?@)?[a-z0-9.\\[\\]:,é]{0,16}(/[a-z%é]{0,6})?(\\?(([a-z_]{1,16}|sslmode|connect_timeout|statement_timeout|idle_timeout|application_name|options|host|hostaddr|port|user|password|dbname|keepalives|keepalives_idle|target_session_attrs|channel_binding|load_balance_hosts)=(-?[0-9]{0,22}(\\.[0-9]{0,3})?|[a-z%é-]{0,8})&?){0,4})?",
        ) {
            let _ = PostgresConfig::from_url(&url);
        }

        #[test]
        fn key_value_strings_never_panic(text in "([a-z_]{1,12}=('[^']{0,6}'?|[a-z0-9\\\\]{0,6}) ?){0,5}") {
            let _ = PostgresConfig::from_url(&text);
        }
    }
}
