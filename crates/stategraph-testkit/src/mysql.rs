//! MySQL / MariaDB (feature `mysql`): scratch databases dropped with their guard, savers on
//! them, and the conformance fixture with its [`Rows`] corruptor. Failing to reach the
//! server panics, naming its URL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed set-up or edit fails the test"
)]

use std::net::{SocketAddr, ToSocketAddrs};

use mysql_async::prelude::Queryable;
use stategraph_conformance::{Corruptor, Fixture, RawPart};
use stategraph_mysql::{MySqlConfig, MySqlSaver};

use crate::Cleanup;
pub use crate::services::{mysql_url as url, scratch_name};

/// The test server's driver options (from [`url`]).
pub fn opts() -> mysql_async::Opts {
    mysql_async::Opts::from_url(&url()).unwrap()
}

/// The test server's address (for a proxy in front of it).
pub fn server_addr() -> SocketAddr {
    let o = opts();
    (o.ip_or_hostname(), o.tcp_port())
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap()
}

/// A URL for the test server's user and database at `addr` instead (a proxy, a silent
/// server), over TCP only: `prefer_socket=false` keeps the driver from switching to the
/// local Unix socket, around the proxy.
pub fn url_via(addr: SocketAddr) -> String {
    let o = opts();
    let user = o.user().unwrap_or("root");
    let auth = match o.pass() {
        Some(p) => format!("{user}:{p}"),
        None => user.to_owned(),
    };
    format!(
        "mysql://{auth}@{addr}/{}?prefer_socket=false",
        o.db_name().unwrap_or("test")
    )
}

/// `base` with its database replaced by `database` (its query, if any, kept).
///
/// ```
/// use stategraph_testkit::mysql::url_of;
/// assert_eq!(url_of("mysql://root@h:3306/test", "x"), "mysql://root@h:3306/x");
/// assert_eq!(url_of("mysql://root@h?pool_max=2", "x"), "mysql://root@h/x?pool_max=2");
/// ```
pub fn url_of(base: &str, database: &str) -> String {
    let (main, query) = match base.split_once('?') {
        Some((main, query)) => (main, Some(query)),
        None => (base, None),
    };
    let authority = main.find("://").map_or(0, |i| i + 3);
    let path = main
        .get(authority..)
        .and_then(|rest| rest.find('/'))
        .map_or(main.len(), |i| authority + i);
    let mut out = format!("{}/{database}", main.get(..path).unwrap_or(main));
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A database of its own for one test, dropped with the guard.
#[derive(Debug)]
pub struct ScratchDatabase {
    name: String,
    _drop: Cleanup,
}

impl ScratchDatabase {
    /// A fresh database name starting with `prefix`; the database is not created (a saver
    /// configured with it creates it), but is dropped with the guard either way.
    pub fn new(prefix: &str) -> Self {
        let name = scratch_name(prefix);
        let drop = {
            let name = name.clone();
            Cleanup::new(async move {
                if let Ok(mut conn) = mysql_async::Conn::from_url(url()).await {
                    if let Err(e) = conn
                        .query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
                        .await
                    {
                        eprintln!("could not drop test database {name}: {e}");
                    }
                    let _ = conn.disconnect().await;
                }
            })
        };
        Self { name, _drop: drop }
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of this database on the test server.
    pub fn url(&self) -> String {
        url_of(&url(), &self.name)
    }

    /// A connection pool on this database.
    pub fn pool(&self) -> mysql_async::Pool {
        let opts = mysql_async::OptsBuilder::from_opts(opts()).db_name(Some(self.name.clone()));
        mysql_async::Pool::new(opts)
    }
}

/// A saver on a fresh [`ScratchDatabase`].
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver() -> (MySqlSaver, ScratchDatabase) {
    saver_with(|config| config).await
}

/// Like [`saver`], with `configure` applied to the configuration before connecting.
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver_with(
    configure: impl FnOnce(MySqlConfig) -> MySqlConfig,
) -> (MySqlSaver, ScratchDatabase) {
    let database = ScratchDatabase::new("sg_test");
    let config = MySqlConfig::from_url(&url())
        .unwrap()
        .database(database.name());
    let saver = configure(config).connect().await.unwrap_or_else(|e| {
        panic!(
            "MySQL/MariaDB at {} is required for these tests: {e}",
            url()
        )
    });
    (saver, database)
}

/// The conformance suite's fixture: a saver on a fresh database, [`Rows`] on it, and the
/// database's guard.
pub async fn fixture() -> Fixture {
    let (saver, database) = saver().await;
    Fixture::new(saver)
        .with_corruptor(Rows::new(&database))
        .with_guard(database)
}

/// Edits the checkpoint rows of a database directly (the conformance suite's
/// [`Corruptor`]).
#[derive(Debug)]
pub struct Rows(mysql_async::Pool);

impl Rows {
    /// Rows of `database`.
    pub fn new(database: &ScratchDatabase) -> Self {
        Self(database.pool())
    }
}

fn column(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

const ROW: &str = "WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND checkpoint_id = ?";

#[async_trait::async_trait]
impl Corruptor for Rows {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("SELECT {} FROM checkpoints {ROW}", column(part));
        let v: Option<Vec<u8>> = conn.exec_first(sql, (thread, ns, id)).await.unwrap();
        v.expect("the row exists")
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("UPDATE checkpoints SET {} = ? {ROW}", column(part));
        conn.exec_drop(sql, (bytes, thread, ns, id)).await.unwrap();
        assert_eq!(conn.affected_rows(), 1, "one row rewritten");
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("UPDATE checkpoints SET parent_checkpoint_id = ? {ROW}");
        conn.exec_drop(sql, (parent, thread, ns, id)).await.unwrap();
        assert_eq!(conn.affected_rows(), 1, "one row rewritten");
    }
}
