//! How long a networked saver waits for its database: connecting, each operation, and how
//! long a pooled connection may sit idle before it is replaced. A server that accepts the
//! connection and then never answers (or goes silent mid-run) ends in an [`Error::Timeout`]
//! naming what was being done, never in a hang.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// The limits of a networked saver. Each can be set in its configuration or in the database
/// URL as a query parameter in seconds (`connect_timeout`, `statement_timeout`,
/// `idle_timeout`; fractions allowed; `0` means no limit).
///
/// ```
/// use std::time::Duration;
/// use stategraph_checkpoint::backend::Timeouts;
///
/// let (url, t) = Timeouts::default()
///     .take_from_url("postgres://db/app?sslmode=disable&connect_timeout=2.5&statement_timeout=0")?;
/// assert_eq!(url, "postgres://db/app?sslmode=disable");
/// assert_eq!(t.connect, Some(Duration::from_millis(2500)));
/// assert_eq!(t.statement, None);
/// assert_eq!(t.idle, Timeouts::default().idle);
/// # Ok::<(), stategraph_checkpoint::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing a connection, handshake and authentication included (default 10 s).
    pub connect: Option<Duration>,
    /// One operation of the saver (a read, a save, a prune), connecting included (default
    /// 60 s). Its outcome is unknown when it runs out: a save may or may not have committed.
    pub statement: Option<Duration>,
    /// A pooled connection unused for this long is closed instead of reused (default
    /// 5 minutes), so one a firewall or the server dropped silently is not tried.
    pub idle: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Some(Duration::from_secs(10)),
            statement: Some(Duration::from_secs(60)),
            idle: Some(Duration::from_secs(300)),
        }
    }
}

/// The URL query parameters [`Timeouts::take_from_url`] reads.
const PARAMS: [&str; 3] = ["connect_timeout", "statement_timeout", "idle_timeout"];

impl Timeouts {
    /// No limits at all.
    pub const NONE: Timeouts = Timeouts {
        connect: None,
        statement: None,
        idle: None,
    };

    /// These limits with the ones `url` sets as query parameters, and `url` without them
    /// (other parameters are kept, in order, for the driver). A value that is not a
    /// non-negative number of seconds is an [`Error::InvalidInput`] naming the parameter.
    pub fn take_from_url(mut self, url: &str) -> Result<(String, Self)> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), self));
        };
        let mut rest = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "connect_timeout" => &mut self.connect,
                "statement_timeout" => &mut self.statement,
                "idle_timeout" => &mut self.idle,
                _ => {
                    rest.push(pair);
                    continue;
                }
            };
            *slot = parse_seconds(key, value)?;
        }
        let url = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        Ok((url, self))
    }

    /// Whether `key` is one of the URL parameters [`take_from_url`](Self::take_from_url)
    /// reads.
    pub fn is_param(key: &str) -> bool {
        PARAMS.contains(&key)
    }

    /// Runs `operation` (what it does, for the error) within the statement limit.
    pub async fn statement<T>(
        &self,
        backend: &'static str,
        operation: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        within(self.statement, backend, operation, work).await
    }

    /// Runs a connection attempt to `target` within the connect limit.
    pub async fn connect<T>(
        &self,
        backend: &'static str,
        target: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        within(
            self.connect,
            backend,
            &format!("connecting to {target}"),
            work,
        )
        .await
    }
}

/// `work`, or an [`Error::Timeout`] when `limit` runs out first (the work is dropped).
pub async fn within<T>(
    limit: Option<Duration>,
    backend: &'static str,
    operation: &str,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    match limit {
        None => work.await,
        Some(after) => tokio::time::timeout(after, work).await.unwrap_or_else(|_| {
            Err(Error::Timeout {
                backend,
                operation: operation.to_owned(),
                after,
            })
        }),
    }
}

fn parse_seconds(key: &str, value: &str) -> Result<Option<Duration>> {
    let seconds: f64 = value.parse().map_err(|_| {
        Error::invalid(
            format!("database URL parameter `{key}`"),
            format!("`{value}` is not a number of seconds"),
        )
    })?;
    if !(0.0..=1e9).contains(&seconds) {
        return Err(Error::invalid(
            format!("database URL parameter `{key}`"),
            format!("`{value}` is not a number of seconds between 0 and 1e9"),
        ));
    }
    Ok((seconds > 0.0).then(|| Duration::from_secs_f64(seconds)))
}

/// A database client of a backend whose every operation runs within its statement limit:
/// implement the backend's name and where its [`Timeouts`] are, and
/// [`timed`](Self::timed) runs an operation within the limit (a limit that runs out is an
/// [`Error::Timeout`] naming the operation and the backend).
///
/// ```
/// use stategraph_checkpoint::backend::{Timed, Timeouts};
///
/// struct Client { timeouts: Timeouts }
/// impl Timed for Client {
///     const BACKEND: &'static str = "example";
///     fn timeouts(&self) -> &Timeouts { &self.timeouts }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let client = Client { timeouts: Timeouts::default() };
/// let n = client.timed("counting", async { Ok(3) }).await?;
/// assert_eq!(n, 3);
/// # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
/// ```
pub trait Timed: Sync {
    /// The backend's name, for errors.
    const BACKEND: &'static str;

    /// The client's limits.
    fn timeouts(&self) -> &Timeouts;

    /// Runs `work`, the operation `operation`, within the statement limit.
    fn timed<T: Send>(
        &self,
        operation: &str,
        work: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send {
        self.timeouts().statement(Self::BACKEND, operation, work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn urls_without_query_or_params_are_unchanged() {
        let t = Timeouts::default();
        for url in [
            "postgres://h/db",
            "mysql://u@h/db?ssl-mode=disabled",
            "redis://h",
        ] {
            assert_eq!(t.take_from_url(url).unwrap(), (url.to_owned(), t));
        }
    }

    #[test]
    fn bad_values_name_the_parameter() {
        for bad in ["x", "-1", "NaN", "inf", ""] {
            let err = Timeouts::default()
                .take_from_url(&format!("postgres://h/db?idle_timeout={bad}"))
                .unwrap_err();
            assert!(err.to_string().contains("idle_timeout"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_limit_that_runs_out_names_the_operation() {
        let t = Timeouts {
            statement: Some(Duration::from_millis(10)),
            ..Timeouts::NONE
        };
        let err = t
            .statement(
                "postgres",
                "reading a checkpoint",
                std::future::pending::<Result<()>>(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Timeout { operation, .. } if operation == "reading a checkpoint"),
            "{err:?}"
        );
    }

    proptest! {
        #[test]
        fn never_panics(url in ".*") {
            let _ = Timeouts::default().take_from_url(&url);
        }

        #[test]
        fn keeps_other_params(key in "[a-z_]{1,12}", value in "[a-z0-9]{0,8}") {
            prop_assume!(!Timeouts::is_param(&key));
            let url = format!("postgres://h/db?{key}={value}&statement_timeout=3");
            let (rest, t) = Timeouts::default().take_from_url(&url).unwrap();
            prop_assert_eq!(rest, format!("postgres://h/db?{key}={value}"));
            prop_assert_eq!(t.statement, Some(Duration::from_secs(3)));
        }
    }
}
