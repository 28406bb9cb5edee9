//! Setting up a schema, shared by the saver, the store and the run queue: creating the
//! schema, taking turns with concurrent setups, running numbered migrations recorded the way
//! Python's `setup()` records them, and finding the tables a setup would have made.

use std::future::Future;

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::error::BACKEND;

/// A failed setup step: what we were doing and the driver's error.
#[derive(Debug)]
pub(crate) struct SetupFailure {
    pub(crate) context: &'static str,
    pub(crate) source: tokio_postgres::Error,
}

fn step(context: &'static str) -> impl Fn(tokio_postgres::Error) -> SetupFailure {
    move |source| SetupFailure { context, source }
}

impl From<SetupFailure> for stategraph_checkpoint::Error {
    fn from(f: SetupFailure) -> Self {
        Self::backend(BACKEND, f.context, f.source)
    }
}

/// Which of `tables` are missing, in their order: in `schema` when one is set (not along the
/// connection's search path, which goes on to `public`), else along the search path. One
/// round trip.
pub(crate) async fn missing_tables(
    client: &Client,
    schema: Option<&str>,
    tables: &[&str],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query_typed(
            "SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS w(t, i) \
             WHERE to_regclass(CASE WHEN $2::text IS NULL THEN quote_ident(t) \
             ELSE quote_ident($2) || '.' || quote_ident(t) END) IS NULL ORDER BY i",
            &[(&tables, Type::TEXT_ARRAY), (&schema, Type::TEXT)],
        )
        .await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Creates `schema` if it is missing. Two setups creating it at the same moment can see a
/// unique violation on the catalog; the schema exists either way, so that is not a failure.
pub(crate) async fn create_schema(client: &Client, schema: &str) -> Result<(), SetupFailure> {
    let created = client
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{}\"",
            schema.replace('"', "\"\"")
        ))
        .await;
    match created {
        Err(e)
            if !e.code().is_some_and(|c| {
                *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::DUPLICATE_SCHEMA
            }) =>
        {
            Err(step("creating the schema")(e))
        }
        _ => Ok(()),
    }
}

/// Runs `work` holding the session advisory lock `seed` hashed with the current schema, so
/// concurrent setups of one schema (from any process) take turns.
///
/// The lock is polled with `pg_try_advisory_lock` rather than awaited in `pg_advisory_lock`:
/// a session blocked inside a statement holds a snapshot, and a `CREATE INDEX CONCURRENTLY`
/// in the session holding the lock would wait for it forever.
pub(crate) async fn with_setup_lock<T, E: From<SetupFailure>>(
    client: &Client,
    seed: i64,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    const KEY: &str = "hashtextextended(COALESCE(current_schema(), ''), $1)";
    loop {
        let rows = client
            .query_typed(
                &format!("SELECT pg_try_advisory_lock({KEY})"),
                &[(&seed, Type::INT8)],
            )
            .await
            .map_err(step("waiting for other setups"))?;
        let taken: Option<bool> = rows
            .first()
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(step("waiting for other setups"))?;
        if taken == Some(true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let result = work.await;
    let unlock = client
        .query_typed(
            &format!("SELECT pg_advisory_unlock({KEY})"),
            &[(&seed, Type::INT8)],
        )
        .await
        .map_err(step("releasing the setup lock"));
    let value = result?;
    unlock?;
    Ok(value)
}

/// Runs the migrations of `table` (`v INTEGER PRIMARY KEY`, created if missing) after its
/// highest recorded version, each statement on its own (`CREATE INDEX CONCURRENTLY` refuses
/// transactions), recording each as it completes.
pub(crate) async fn run_migrations<S: AsRef<str>>(
    client: &Client,
    table: &str,
    migrations: &[S],
) -> Result<(), SetupFailure> {
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"
        ))
        .await
        .map_err(step("creating a migrations table"))?;
    let rows = client
        .query_typed(
            &format!("SELECT v FROM {table} ORDER BY v DESC LIMIT 1"),
            &[],
        )
        .await
        .map_err(step("reading a migrations table"))?;
    let current: i32 = rows
        .first()
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(step("reading a migrations table"))?
        .unwrap_or(-1);
    for (v, sql) in migrations
        .iter()
        .enumerate()
        .skip(usize::try_from(current + 1).unwrap_or(0))
    {
        client
            .batch_execute(sql.as_ref())
            .await
            .map_err(step("running a migration"))?;
        let v = i32::try_from(v).unwrap_or(i32::MAX);
        client
            .query_typed(
                &format!("INSERT INTO {table} (v) VALUES ($1) ON CONFLICT DO NOTHING"),
                &[(&v, Type::INT4)],
            )
            .await
            .map_err(step("recording a migration"))?;
    }
    Ok(())
}
