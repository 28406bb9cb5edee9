//! Connecting a MySQL/MariaDB saver.

use std::sync::Arc;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer, redact_url};

use crate::error::BACKEND;

use crate::saver::MySqlSaver;

/// Builds a [`MySqlSaver`]: the server and database, serializer and timeouts;
/// [`connect`](Self::connect) connects and, unless [`without_setup`](Self::without_setup),
/// creates the database and the tables if they are missing.
///
/// ```no_run
/// use std::time::Duration;
/// use stategraph_checkpoint::backend::Timeouts;
/// use stategraph_mysql::MySqlConfig;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// let saver = MySqlConfig::from_url("mysql://root@127.0.0.1:3306/test")?
///     .database("checkpoints")
///     .timeouts(Timeouts { connect: Some(Duration::from_secs(3)), ..Timeouts::default() })
///     .connect()
///     .await?;
/// # let _ = saver;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MySqlConfig {
    pub(crate) opts: mysql_async::Opts,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) timeouts: Timeouts,
    pub(crate) run_setup: bool,
    /// A pool of the user's ([`from_pool`](Self::from_pool)), used instead of the URL.
    pub(crate) pool: Option<mysql_async::Pool>,
}

impl MySqlConfig {
    /// Parses a `mysql://user:password@host:port/database` URL (driver options such as
    /// `pool_max` or `stmt_cache_size` are accepted as query parameters).
    ///
    /// `connect_timeout`, `statement_timeout` and `idle_timeout` (seconds, `0` for none) set
    /// the saver's [`Timeouts`].
    pub fn from_url(url: &str) -> Result<Self> {
        let (rest, timeouts) = Timeouts::default().take_from_url(url)?;
        let opts = mysql_async::Opts::from_url(&rest).map_err(|e| {
            Error::invalid(
                "database URL",
                format!("`{}`: not a MySQL URL: {e}", redact_url(url)),
            )
        })?;
        Ok(Self {
            opts,
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts,
            run_setup: true,
            pool: None,
        })
    }

    /// A saver on a connection pool you own (shared with your other uses of it), whose
    /// connections select the database to keep the tables in; the other settings are the
    /// defaults, as [`from_url`](Self::from_url) gives them. The setup creates the tables,
    /// not the database.
    pub fn from_pool(pool: mysql_async::Pool) -> Self {
        Self {
            opts: mysql_async::OptsBuilder::default().into(),
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts: Timeouts::default(),
            run_setup: true,
            pool: Some(pool),
        }
    }

    /// Uses database `name` instead of the URL's.
    pub fn database(mut self, name: impl Into<String>) -> Self {
        self.opts = mysql_async::OptsBuilder::from_opts(self.opts)
            .db_name(Some(name.into()))
            .into();
        self
    }

    /// Uses another serializer for checkpoints and writes.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// How long to wait for the server: connecting, each operation, and how long a pooled
    /// connection may idle before it is closed (default: 10 s, 60 s, 5 minutes; see
    /// [`Timeouts`]). A limit that runs out is an `Error::Timeout` naming the operation.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Connects without creating or changing anything: the database and its tables must
    /// exist (for tools that only read). A missing database or missing tables are an
    /// `Error::NotFound` naming them.
    pub fn without_setup(mut self) -> Self {
        self.run_setup = false;
        self
    }

    /// Connects; unless [`without_setup`](Self::without_setup), creates the database and the
    /// tables if they are missing.
    pub async fn connect(self) -> Result<MySqlSaver> {
        if let (Some(db), true, None) = (self.opts.db_name(), self.run_setup, &self.pool) {
            // Create the database first, from a connection that does not select it.
            let server: mysql_async::Opts = mysql_async::OptsBuilder::from_opts(self.opts.clone())
                .db_name(None::<String>)
                .into();
            let target = redact_url(&format!(
                "{}:{}",
                self.opts.ip_or_hostname(),
                self.opts.tcp_port()
            ));
            let create = async {
                let mut conn = mysql_async::Conn::new(server)
                    .await
                    .map_err(crate::error::db("cannot connect to MySQL"))?;
                use mysql_async::prelude::Queryable;
                conn.query_drop(format!(
                    "CREATE DATABASE IF NOT EXISTS `{}` CHARACTER SET utf8mb4",
                    db.replace('`', "")
                ))
                .await
                .map_err(crate::error::db("creating the database"))?;
                let _ = conn.disconnect().await;
                Ok(())
            };
            self.timeouts.connect(BACKEND, &target, create).await?;
        }
        MySqlSaver::connect_with(self).await
    }
}

impl stategraph_checkpoint::backend::SaverConfig for MySqlConfig {
    type Saver = MySqlSaver;

    fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        MySqlConfig::from_url(url)
    }

    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self {
        MySqlConfig::serializer(self, serializer)
    }

    fn without_setup(self) -> Self {
        MySqlConfig::without_setup(self)
    }

    async fn connect(self) -> stategraph_checkpoint::Result<MySqlSaver> {
        MySqlConfig::connect(self).await
    }
}
