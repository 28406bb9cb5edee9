//! Mapping driver failures to the checkpoint crate's typed errors.

use stategraph_checkpoint::Error;

/// The backend name in errors.
pub(crate) const BACKEND: &str = "postgres";

/// Wraps a tokio-postgres error with what we were doing. The server's refusal of the
/// character U+0000, which its `text` and `jsonb` cannot hold, is the caller's input (a
/// thread id, a namespace, a metadata value), not a failure of the database.
pub(crate) fn db(context: &'static str) -> impl Fn(tokio_postgres::Error) -> Error {
    move |e| {
        if refuses_nul(&e) {
            Error::invalid(
                context,
                "it holds the character U+0000, which PostgreSQL cannot store",
            )
        } else {
            Error::backend(BACKEND, context, e)
        }
    }
}

/// Whether the server refused a parameter for holding U+0000: `character_not_in_repertoire`
/// (in `text`) or `untranslatable_character` (`\u0000` in `jsonb`).
pub(crate) fn refuses_nul(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::CHARACTER_NOT_IN_REPERTOIRE || *c == SqlState::UNTRANSLATABLE_CHARACTER
    })
}

/// A pool failure (cannot connect, pool closed, …).
pub(crate) fn pool(e: deadpool_postgres::PoolError) -> Error {
    Error::backend(BACKEND, "getting a connection from the pool", e)
}

/// Records `pool`'s figures as its last checkout left them, through the `metrics` facade:
/// LangGraph's `lg_api_pg_pool_max`, `lg_api_pg_pool_size` (connections open) and
/// `lg_api_pg_pool_available` (idle), labelled `pool` (`saver`, `store`, `runs`).
pub(crate) fn record_pool(pool: &deadpool_postgres::Pool, name: &'static str) {
    let status = pool.status();
    let count = |n: usize| f64::from(u32::try_from(n).unwrap_or(u32::MAX));
    metrics::gauge!("lg_api_pg_pool_max", "pool" => name).set(count(status.max_size));
    metrics::gauge!("lg_api_pg_pool_size", "pool" => name).set(count(status.size));
    metrics::gauge!("lg_api_pg_pool_available", "pool" => name).set(count(status.available));
}

/// A pooled connection from `pool` (named `name` in the pool's figures) within the connect
/// limit; one the driver already knows to
/// be closed is dropped and replaced. `target` (the redacted server address) names the server
/// in errors.
pub(crate) async fn pooled(
    pool: &deadpool_postgres::Pool,
    timeouts: &stategraph_checkpoint::backend::Timeouts,
    target: &str,
    name: &'static str,
) -> Result<deadpool_postgres::Object, Error> {
    loop {
        let get = async {
            pool.get().await.map_err(|e| match e {
                deadpool_postgres::PoolError::Backend(inner) => Error::backend(
                    BACKEND,
                    format!("cannot connect to PostgreSQL at {target}"),
                    inner,
                ),
                other => self::pool(other),
            })
        };
        let client = timeouts.connect(BACKEND, target, get).await?;
        record_pool(pool, name);
        if !client.is_closed() {
            return Ok(client);
        }
        drop(deadpool_postgres::Object::take(client));
    }
}

/// Whether the driver error says the connection was gone: closed before the request was
/// sent, or ended by the server (`FATAL`) instead of answering it.
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.as_db_error()
            .is_some_and(|db| db.parsed_severity() == Some(tokio_postgres::error::Severity::Fatal))
}

/// Whether `e` or one of its causes is a driver error saying the connection was gone.
pub(crate) fn lost_in(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<tokio_postgres::Error>()
            .is_some_and(connection_lost)
        {
            return true;
        }
        cause = c.source();
    }
    false
}
