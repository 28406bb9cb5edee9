//! LangGraph's Agent Server HTTP API over your graphs (feature `server`): everything of
//! [`stategraph_server`], and [`Database`], which gives a server the checkpointer, the store
//! and the run queue of one database URL — what several server processes on that database
//! share.
//!
//! ```
//! use stategraph::prelude::*;
//! use stategraph::Map;
//! use stategraph::server::{Database, Server};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let url = format!("sqlite:{}", dir.path().join("app.sqlite").display());
//! let mut graph = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
//! graph.add_node("a", |_s, _ctx| async { Ok(Map::from_iter([("foo", value!("a"))])) });
//! graph.add_edge(START, "a").add_edge("a", END);
//! let server = Server::builder()
//!     .graph("g", graph.compile()?)
//!     .database(&url)
//!     .await?
//!     .build()?;
//! let router = server.router();
//! # drop(router);
//! # Ok::<(), stategraph::Error>(()) }).unwrap();
//! ```

use std::future::Future;

pub use stategraph_server::*;

use crate::store::StoreOptions;

/// One database for an Agent Server ([`ServerBuilder::database`](Database::database)).
pub trait Database: Sized {
    /// Sets the checkpointer, the store and the run queue of the database `url` names
    /// ([`open_saver`](crate::open_saver), [`open_store`](crate::open_store),
    /// [`open_run_queue`](crate::open_run_queue)), creating or upgrading their tables:
    /// `sqlite:PATH` (one file, shared by every process that opens it), `postgres://…` (one
    /// database), or `memory:` (this process only). On SQLite and Postgres the checkpointer
    /// fences each run's writes by the run's lease
    /// ([`fencing_checkpointer`](ServerBuilder::fencing_checkpointer)).
    ///
    /// # Errors
    /// What opening the checkpointer, the store or the run queue fails with: a database
    /// without a store or a run queue (MySQL, Redis, MongoDB) is an invalid input that says
    /// so.
    fn database(self, url: &str) -> impl Future<Output = crate::Result<Self>> + Send {
        self.database_with(url, crate::OpenOptions::new())
    }

    /// [`database`](Self::database), with the checkpointer opened as `options` say (another
    /// serializer, say).
    ///
    /// # Errors
    /// As [`database`](Self::database).
    fn database_with(
        self,
        url: &str,
        options: crate::OpenOptions,
    ) -> impl Future<Output = crate::Result<Self>> + Send;
}

impl Database for ServerBuilder {
    async fn database_with(self, url: &str, options: crate::OpenOptions) -> crate::Result<Self> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        let scheme = url.split(':').next().unwrap_or_default();
        // SQLite and Postgres: one database handle, from which the checkpointer (fencing
        // each run's writes by the run's lease), the store and the run queue are built.
        #[cfg(feature = "sqlite")]
        if scheme == "sqlite" {
            let db = crate::SqliteDatabase::from_url(url)?;
            let saver = options.apply(db.saver()).connect().await?;
            let store = db.store().connect().await?;
            let queue = db.run_queue().connect().await?;
            return Ok(self
                .fencing_checkpointer(std::sync::Arc::new(saver))
                .store(std::sync::Arc::new(store))
                .run_queue(queue));
        }
        #[cfg(feature = "postgres")]
        if scheme == "postgres" || scheme == "postgresql" {
            let db = crate::PostgresDatabase::from_url(url)?;
            let saver = options.apply(db.saver()).connect().await?;
            let store = db.store().connect().await?;
            let queue = db.run_queue().connect().await?;
            return Ok(self
                .fencing_checkpointer(std::sync::Arc::new(saver))
                .store(std::sync::Arc::new(store))
                .run_queue(queue));
        }
        let queue = crate::open_run_queue(url).await?;
        let store = crate::open_store(url, StoreOptions::new()).await?;
        let saver = crate::open_saver_with(url, options).await?;
        Ok(self.store(store).run_queue_arc(queue).checkpointer(saver))
    }
}
