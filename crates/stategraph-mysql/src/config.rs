//! Connecting a MySQL/MariaDB saver.

use std::sync::Arc;

use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer};

use crate::saver::MySqlSaver;

/// Builds a [`MySqlSaver`].
#[derive(Clone, Debug)]
pub struct MySqlConfig {
    pub(crate) opts: mysql_async::Opts,
    pub(crate) serializer: Arc<dyn Serializer>,
}

impl MySqlConfig {
    /// Parses a `mysql://user:password@host:port/database` URL (driver options such as
    /// `pool_max` or `stmt_cache_size` are accepted as query parameters).
    pub fn from_url(url: &str) -> Result<Self> {
        let opts = mysql_async::Opts::from_url(url)
            .map_err(|e| Error::invalid("database URL", format!("not a MySQL URL: {e}")))?;
        Ok(Self {
            opts,
            serializer: Arc::new(JsonPlusSerializer::new()),
        })
    }

    /// Uses database `name` on the same server (created if missing when connecting).
    pub fn database(mut self, name: impl Into<String>) -> Self {
        self.opts = mysql_async::OptsBuilder::from_opts(self.opts)
            .db_name(Some(name.into()))
            .into();
        self
    }

    /// The serializer for blobs and writes (default [`JsonPlusSerializer`]).
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// Connects and creates the tables if missing.
    pub async fn connect(self) -> Result<MySqlSaver> {
        if let Some(db) = self.opts.db_name() {
            // Create the database first, from a connection that does not select it.
            let server: mysql_async::Opts = mysql_async::OptsBuilder::from_opts(self.opts.clone())
                .db_name(None::<String>)
                .into();
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
        }
        MySqlSaver::connect_with(self).await
    }
}
