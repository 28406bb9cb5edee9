//! TTLs: refreshing the expiry of items read, and sweeping expired ones.

use stategraph_store::{StoreError, Timestamp};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

use super::sql::{Address, col, db, time_param};

/// Largest TTL, in minutes, a refresh adds (about 9,500 years; keeps timestamps in range).
const MAX_REFRESH_MINUTES: f64 = 5e9;

/// Pushes the expiry of live rows with a TTL back by their TTL: the exact one a put by this
/// store recorded in `stategraph_store_ttl`, else `ttl_minutes`.
pub(super) async fn refresh<C: GenericClient>(
    client: &C,
    rows: &[Address],
    now: Timestamp,
) -> Result<(), StoreError> {
    let prefixes: Vec<&str> = rows.iter().map(|(p, _)| p.as_str()).collect();
    let keys: Vec<&str> = rows.iter().map(|(_, k)| k.as_str()).collect();
    let now_p = time_param(now);
    client
        .query_typed(
            "UPDATE store s SET expires_at = $1 + make_interval(secs => LEAST(COALESCE( \
               (SELECT t.ttl_minutes FROM stategraph_store_ttl t \
                WHERE t.prefix = s.prefix AND t.key = s.key AND t.updated_at = s.updated_at), \
               s.ttl_minutes::float8), $4) * 60) \
             FROM unnest($2::text[], $3::text[]) AS a(prefix, key) \
             WHERE s.prefix = a.prefix AND s.key = a.key AND s.ttl_minutes IS NOT NULL \
               AND (s.expires_at IS NULL OR s.expires_at > $1)",
            &[
                (&now_p, Type::TIMESTAMPTZ),
                (&prefixes, Type::TEXT_ARRAY),
                (&keys, Type::TEXT_ARRAY),
                (&MAX_REFRESH_MINUTES, Type::FLOAT8),
            ],
        )
        .await
        .map_err(db("refreshing TTLs"))?;
    Ok(())
}

/// Deletes the items expired at `now` (their vectors and exact TTLs cascade); returns how
/// many.
pub(super) async fn sweep<C: GenericClient>(
    client: &C,
    now: Timestamp,
) -> Result<usize, StoreError> {
    let now = time_param(now);
    let rows = client
        .query_typed(
            "WITH d AS (DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= $1 \
             RETURNING 1) SELECT count(*) FROM d",
            &[(&now, Type::TIMESTAMPTZ)],
        )
        .await
        .map_err(db("sweeping expired items"))?;
    let n: i64 = rows.first().map(|r| col(r, 0)).transpose()?.unwrap_or(0);
    Ok(usize::try_from(n).unwrap_or(0))
}
