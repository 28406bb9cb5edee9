//! Writes: a run of puts planned against the stored rows and written in one transaction.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value as Json;
use stategraph_store::path::FieldPath;
use stategraph_store::{Clock, PutOp, StoreError, VectorPlan};

use super::conn::db;
use super::read::bytes_column;
use super::schema::table_exists;
use super::ttl::minutes;
use super::vec::f32_blob;

/// How often a put run is re-planned when other writers keep changing its items while their
/// texts are embedded.
pub(super) const MAX_PUT_ATTEMPTS: usize = 8;

/// One address of a put run (the last op for it) and the index paths it embeds.
pub(super) struct PutTask {
    pub(super) prefix: String,
    pub(super) op: PutOp,
    pub(super) paths: Vec<FieldPath>,
}

pub(super) enum RunOutcome {
    /// Written and committed.
    Done,
    /// Nothing written: these texts must be embedded first.
    Missing(Vec<String>),
}

/// Plans a put run against the stored rows and, if every text to embed is in `vectors`,
/// writes it, all in one transaction.
pub(super) fn write_put_run(
    conn: &mut Connection,
    tasks: &[PutTask],
    indexed: bool,
    vectors: &BTreeMap<String, Vec<f32>>,
    clock: &Clock,
) -> Result<RunOutcome, StoreError> {
    let now = clock.now();
    let now_text = now.to_sql_text();
    let tx = conn.savepoint().map_err(db("starting a put"))?;
    let has_vectors = table_exists(&tx, "store_vectors").map_err(db("reading the schema"))?;

    struct Planned {
        live: bool,
        fields: BTreeSet<String>,
        plan: VectorPlan,
    }
    let mut planned = Vec::with_capacity(tasks.len());
    let mut missing = BTreeSet::new();
    for t in tasks {
        let old = tx
            .prepare_cached(
                "SELECT value, (expires_at IS NULL OR expires_at > ?3) FROM store \
                 WHERE prefix = ?1 AND key = ?2",
            )
            .map_err(db("preparing a put"))?
            .query_row(params![t.prefix, t.op.key, now_text], |r| {
                Ok((bytes_column(r.get_ref(0)?), r.get::<_, bool>(1)?))
            })
            .optional()
            .map_err(db("reading the stored item"))?;
        let live = old.as_ref().is_some_and(|(_, l)| *l);
        let fields: BTreeSet<String> = if has_vectors {
            tx.prepare_cached("SELECT field_name FROM store_vectors WHERE prefix = ?1 AND key = ?2")
                .map_err(db("preparing a put"))?
                .query_map(params![t.prefix, t.op.key], |r| r.get(0))
                .map_err(db("reading the stored vectors"))?
                .collect::<rusqlite::Result<_>>()
                .map_err(db("reading the stored vectors"))?
        } else {
            BTreeSet::new()
        };
        let plan = match &t.op.value {
            Some(value) if indexed => {
                // An unreadable old value is planned as absent: every text is embedded again.
                let old_value: Option<Json> = old
                    .as_ref()
                    .filter(|_| live)
                    .and_then(|(b, _)| b.as_deref())
                    .and_then(|b| serde_json::from_slice(b).ok());
                let plan =
                    VectorPlan::new(value, &t.paths, old_value.as_ref().map(|v| (v, &fields)));
                missing.extend(
                    plan.embed
                        .iter()
                        .filter(|(_, text)| !vectors.contains_key(text))
                        .map(|(_, text)| text.clone()),
                );
                plan
            }
            _ => VectorPlan::default(),
        };
        planned.push(Planned { live, fields, plan });
    }
    if !missing.is_empty() {
        // Dropping `tx` rolls back; nothing was written.
        return Ok(RunOutcome::Missing(missing.into_iter().collect()));
    }

    for (t, p) in tasks.iter().zip(planned) {
        if has_vectors {
            let mut stmt = tx
                .prepare_cached(
                    "DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2 AND field_name = ?3",
                )
                .map_err(db("preparing a put"))?;
            for field in p.fields.iter().filter(|f| !p.plan.keep.contains(f)) {
                stmt.execute(params![t.prefix, t.op.key, field])
                    .map_err(db("deleting stale vectors"))?;
            }
        }
        let Some(value) = &t.op.value else {
            tx.prepare_cached("DELETE FROM store WHERE prefix = ?1 AND key = ?2")
                .map_err(db("preparing a delete"))?
                .execute(params![t.prefix, t.op.key])
                .map_err(db("deleting an item"))?;
            continue;
        };
        let text = serde_json::to_string(value).map_err(|e| StoreError::InvalidValue {
            namespace: t.op.namespace.clone(),
            key: t.op.key.clone(),
            reason: e.to_string(),
        })?;
        let expires_at = t.op.ttl.map(|ttl| now.plus(ttl).to_sql_text());
        let ttl_minutes = t.op.ttl.map(minutes);
        tx.prepare_cached(
            "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) \
             VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6) \
             ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, \
             created_at = CASE WHEN ?7 THEN store.created_at ELSE excluded.created_at END, \
             updated_at = excluded.updated_at, expires_at = excluded.expires_at, \
             ttl_minutes = excluded.ttl_minutes",
        )
        .map_err(db("preparing a put"))?
        .execute(params![t.prefix, t.op.key, text, now_text, expires_at, ttl_minutes, p.live])
        .map_err(db("writing an item"))?;
        if !p.plan.embed.is_empty() {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO store_vectors \
                     (prefix, key, field_name, embedding, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                )
                .map_err(db("preparing a put"))?;
            for (field, text) in &p.plan.embed {
                if let Some(v) = vectors.get(text) {
                    stmt.execute(params![t.prefix, t.op.key, field, f32_blob(v), now_text])
                        .map_err(db("writing a vector"))?;
                }
            }
        }
    }
    tx.commit().map_err(db("committing a put"))?;
    Ok(RunOutcome::Done)
}
