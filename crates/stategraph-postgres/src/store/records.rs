//! Record writes made in another component's transaction: the run queue writes an Agent
//! Server's thread and run records, items of this store, with the queue change they go with
//! ([`RecordWrites`]). The rows are the store's own: a reader through the store sees them as
//! any item (no TTL, no vectors).

use serde_json::Value as Json;
use stategraph_checkpoint::runs::RecordWrite;
use stategraph_checkpoint::store::StoreLocation;
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

use super::sql::prefix_of;

/// The backend name of a [`StoreLocation`] of this crate.
pub(crate) const BACKEND: &str = "postgres";

/// The location of the store whose `store` table `client` resolves (its `search_path`), on the
/// database `database` (as [`database_identity`](crate::error::database_identity) says).
pub(crate) async fn locate(
    client: &tokio_postgres::Client,
    database: String,
) -> Result<StoreLocation, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'store'::regclass",
            &[],
        )
        .await?;
    Ok(StoreLocation::new(
        BACKEND,
        database,
        row.try_get::<_, String>(0)?,
    ))
}

/// Makes `writes` in the store table `relation` (qualified, as [`locate`] gives it), in
/// order, on `client` (a transaction of the caller). Consecutive writes of one kind go in one
/// statement, the last one winning for an address written twice.
pub(crate) async fn write(
    client: &impl GenericClient,
    relation: &str,
    writes: &[RecordWrite],
) -> Result<(), tokio_postgres::Error> {
    let mut i = 0;
    while let Some(first) = writes.get(i) {
        let run = writes
            .get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|w| std::mem::discriminant(*w) == std::mem::discriminant(first))
            .count();
        let group = writes.get(i..i + run).unwrap_or_default();
        i += run;
        let (mut prefixes, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for w in unique(group) {
            let (namespace, key, value) = match w {
                RecordWrite::Put {
                    namespace,
                    key,
                    value,
                } => (namespace, key, Some(value)),
                RecordWrite::Merge {
                    namespace,
                    key,
                    fields,
                } => (namespace, key, Some(Json::Object(fields))),
                RecordWrite::Delete { namespace, key } => (namespace, key, None),
                _ => continue,
            };
            prefixes.push(prefix_of(&namespace));
            keys.push(key);
            values.extend(value);
        }
        match first {
            RecordWrite::Put { .. } => {
                client
                    .query_typed(
                        &format!(
                            "INSERT INTO {relation} AS s \
                               (prefix, key, value, created_at, updated_at, expires_at, \
                                ttl_minutes) \
                             SELECT a.prefix, a.key, a.value, now(), now(), NULL, NULL \
                             FROM unnest($1::text[], $2::text[], $3::jsonb[]) \
                               AS a(prefix, key, value) \
                             ON CONFLICT (prefix, key) DO UPDATE SET \
                               value = EXCLUDED.value, \
                               created_at = CASE WHEN s.expires_at IS NOT NULL \
                                 AND s.expires_at <= now() \
                                 THEN EXCLUDED.created_at ELSE s.created_at END, \
                               updated_at = EXCLUDED.updated_at, \
                               expires_at = NULL, ttl_minutes = NULL"
                        ),
                        &[
                            (&prefixes, Type::TEXT_ARRAY),
                            (&keys, Type::TEXT_ARRAY),
                            (&values, Type::JSONB_ARRAY),
                        ],
                    )
                    .await?;
            }
            RecordWrite::Merge { .. } => {
                client
                    .query_typed(
                        &format!(
                            "UPDATE {relation} s SET value = s.value || a.fields, \
                               updated_at = now() \
                             FROM unnest($1::text[], $2::text[], $3::jsonb[]) \
                               AS a(prefix, key, fields) \
                             WHERE s.prefix = a.prefix AND s.key = a.key \
                               AND jsonb_typeof(s.value) = 'object'"
                        ),
                        &[
                            (&prefixes, Type::TEXT_ARRAY),
                            (&keys, Type::TEXT_ARRAY),
                            (&values, Type::JSONB_ARRAY),
                        ],
                    )
                    .await?;
            }
            _ => {
                client
                    .query_typed(
                        &format!(
                            "DELETE FROM {relation} s \
                             USING unnest($1::text[], $2::text[]) AS a(prefix, key) \
                             WHERE s.prefix = a.prefix AND s.key = a.key"
                        ),
                        &[(&prefixes, Type::TEXT_ARRAY), (&keys, Type::TEXT_ARRAY)],
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// `group` (writes of one kind) with one write per address: the last one for a put or a
/// delete; for merges, the fields of every merge of the address, later ones winning.
fn unique(group: &[RecordWrite]) -> Vec<RecordWrite> {
    let mut out: Vec<RecordWrite> = Vec::with_capacity(group.len());
    for w in group {
        let same = out.iter_mut().find(|o| address(o) == address(w));
        match (same, w) {
            (Some(RecordWrite::Merge { fields, .. }), RecordWrite::Merge { fields: more, .. }) => {
                fields.extend(more.clone())
            }
            (Some(o), w) => *o = w.clone(),
            (None, w) => out.push(w.clone()),
        }
    }
    out
}

/// The namespace and key a write changes.
fn address(w: &RecordWrite) -> Option<(&[String], &str)> {
    match w {
        RecordWrite::Put { namespace, key, .. }
        | RecordWrite::Merge { namespace, key, .. }
        | RecordWrite::Delete { namespace, key } => Some((namespace, key)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn merge(key: &str, fields: Json) -> RecordWrite {
        RecordWrite::Merge {
            namespace: vec!["ns".into()],
            key: key.into(),
            fields: fields.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn an_address_written_twice_in_a_group_is_written_once() {
        let writes = [
            merge("a", json!({"x": 1, "y": 1})),
            merge("b", json!({"x": 1})),
            merge("a", json!({"y": 2})),
        ];
        let out = unique(&writes);
        assert_eq!(out.len(), 2);
        assert_eq!(out.first(), Some(&merge("a", json!({"x": 1, "y": 2}))));
    }
}
