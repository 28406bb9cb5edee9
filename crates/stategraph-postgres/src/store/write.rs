//! Writes: a run of puts planned against the stored rows, embedded outside any transaction,
//! then written in one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value as Json;
use stategraph_store::{IndexConfig, PutOp, StoreError, Timestamp, VectorPlan};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

use super::PostgresStore;
use super::sql::{Address, client_of, col, db, prefix_of, time_param};

/// The stored state of an address, for planning vectors.
struct OldRow {
    value: Json,
    live: bool,
    fields: BTreeSet<String>,
}

impl PostgresStore {
    /// Applies a run of consecutive puts: last one wins per address; vectors planned against
    /// what is stored, new texts embedded in one call, then rows and vectors written in one
    /// transaction.
    ///
    /// Embedding happens outside the write transaction: the run plans against a plain read and
    /// embeds, then locks the rows (`FOR UPDATE`) and plans again. If a concurrent writer
    /// changed a text meanwhile, the new texts are embedded (reusing every vector computed so
    /// far) and the run tries again; after a few tries it embeds while holding the locks, so
    /// it always goes through.
    pub(super) async fn put_run(
        &self,
        client: &mut deadpool_postgres::Object,
        mut ops: Vec<PutOp>,
    ) -> Result<(), StoreError> {
        // One lock order for every writer (rows are written in this order), so concurrent runs
        // over the same items wait for each other instead of deadlocking.
        ops.sort_by(|a, b| (&a.namespace, &a.key).cmp(&(&b.namespace, &b.key)));
        let mut vectors: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        if let Some(index) = &self.index {
            let plans =
                plan_vectors(client_of(client), index, &ops, self.ttl.clock.now(), false).await?;
            let missing = missing_texts(&plans, &vectors);
            if !missing.is_empty() {
                vectors.extend(index.embed_texts(&missing).await?);
            }
        }
        const OPTIMISTIC_TRIES: usize = 3;
        let mut tries = 0;
        loop {
            tries += 1;
            let now = self.ttl.clock.now();
            let tx = client.transaction().await.map_err(db("starting a put"))?;
            let plans = match &self.index {
                None => vec![VectorPlan::default(); ops.len()],
                Some(index) => {
                    let plans = plan_vectors(&*tx, index, &ops, now, true).await?;
                    let missing = missing_texts(&plans, &vectors);
                    if !missing.is_empty() {
                        if tries < OPTIMISTIC_TRIES {
                            tx.rollback().await.map_err(db("retrying a put"))?;
                            vectors.extend(index.embed_texts(&missing).await?);
                            continue;
                        }
                        vectors.extend(index.embed_texts(&missing).await?);
                    }
                    plans
                }
            };
            self.write_run(&tx, &ops, &plans, &vectors, now).await?;
            tx.commit().await.map_err(db("committing a put"))?;
            return Ok(());
        }
    }

    /// Writes a planned run in the transaction `tx`.
    async fn write_run(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        ops: &[PutOp],
        plans: &[VectorPlan],
        vectors: &BTreeMap<String, Vec<f32>>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let now_p = time_param(now);
        let (mut del_p, mut del_k) = (Vec::new(), Vec::new());
        let (mut up_p, mut up_k, mut up_v) = (Vec::new(), Vec::new(), Vec::new());
        let (mut up_exp, mut up_ttl) = (Vec::new(), Vec::new());
        let (mut exact_p, mut exact_k, mut exact_ttl) = (Vec::new(), Vec::new(), Vec::new());
        let (mut want_p, mut want_k, mut want_f) = (Vec::new(), Vec::new(), Vec::new());
        let (mut vec_p, mut vec_k, mut vec_f, mut vec_v) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (op, plan) in ops.iter().zip(plans) {
            let prefix = prefix_of(&op.namespace);
            let Some(value) = &op.value else {
                del_p.push(prefix);
                del_k.push(op.key.clone());
                continue;
            };
            up_p.push(prefix.clone());
            up_k.push(op.key.clone());
            up_v.push(value.clone());
            up_exp.push(op.ttl.map(|t| time_param(now.plus(t))));
            // LangGraph's unit, fractional minutes: whole ones in its INT column (rounded up),
            // the exact value in stategraph's own table.
            let minutes = op.ttl.map(|t| t.as_secs_f64() / 60.0);
            up_ttl.push(minutes.map(|m| m.ceil().min(f64::from(i32::MAX)) as i32));
            if let Some(m) = minutes
                && m.fract() != 0.0
            {
                exact_p.push(prefix.clone());
                exact_k.push(op.key.clone());
                exact_ttl.push(m);
            }
            for field in plan.keep.iter().chain(plan.embed.iter().map(|(f, _)| f)) {
                want_p.push(prefix.clone());
                want_k.push(op.key.clone());
                want_f.push(field.clone());
            }
            for (field, text) in &plan.embed {
                if let Some(v) = vectors.get(text) {
                    vec_p.push(prefix.clone());
                    vec_k.push(op.key.clone());
                    vec_f.push(field.clone());
                    vec_v.push(vector_literal(v));
                }
            }
        }
        if !del_p.is_empty() {
            tx.query_typed(
                "DELETE FROM store s USING unnest($1::text[], $2::text[]) AS a(prefix, key) \
                 WHERE s.prefix = a.prefix AND s.key = a.key",
                &[(&del_p, Type::TEXT_ARRAY), (&del_k, Type::TEXT_ARRAY)],
            )
            .await
            .map_err(db("deleting items"))?;
        }
        if !up_p.is_empty() {
            tx.query_typed(
                "INSERT INTO store AS s \
                   (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) \
                 SELECT a.prefix, a.key, a.value, $1, $1, a.expires_at, a.ttl \
                 FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::timestamptz[], $6::int4[]) \
                   AS a(prefix, key, value, expires_at, ttl) \
                 ON CONFLICT (prefix, key) DO UPDATE SET \
                   value = EXCLUDED.value, \
                   created_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= $1 \
                     THEN EXCLUDED.created_at ELSE s.created_at END, \
                   updated_at = EXCLUDED.updated_at, \
                   expires_at = EXCLUDED.expires_at, \
                   ttl_minutes = EXCLUDED.ttl_minutes",
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&up_p, Type::TEXT_ARRAY),
                    (&up_k, Type::TEXT_ARRAY),
                    (&up_v, Type::JSONB_ARRAY),
                    (&up_exp, Type::TIMESTAMPTZ_ARRAY),
                    (&up_ttl, Type::INT4_ARRAY),
                ],
            )
            .await
            .map_err(db("storing items"))?;
        }
        if !exact_p.is_empty() {
            // Rows of other puts are tied to older `updated_at`s and so ignored; no need to
            // delete them here.
            tx.query_typed(
                "INSERT INTO stategraph_store_ttl (prefix, key, ttl_minutes, updated_at) \
                 SELECT a.prefix, a.key, a.ttl, $1 \
                 FROM unnest($2::text[], $3::text[], $4::float8[]) AS a(prefix, key, ttl) \
                 ON CONFLICT (prefix, key) DO UPDATE SET \
                   ttl_minutes = EXCLUDED.ttl_minutes, updated_at = EXCLUDED.updated_at",
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&exact_p, Type::TEXT_ARRAY),
                    (&exact_k, Type::TEXT_ARRAY),
                    (&exact_ttl, Type::FLOAT8_ARRAY),
                ],
            )
            .await
            .map_err(db("storing exact TTLs"))?;
        }
        if self.index.is_some() && !up_p.is_empty() {
            tx.query_typed(
                "DELETE FROM store_vectors sv \
                 USING unnest($1::text[], $2::text[]) AS a(prefix, key) \
                 WHERE sv.prefix = a.prefix AND sv.key = a.key \
                 AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[], $5::text[]) \
                   AS w(prefix, key, field) \
                   WHERE w.prefix = sv.prefix AND w.key = sv.key AND w.field = sv.field_name)",
                &[
                    (&up_p, Type::TEXT_ARRAY),
                    (&up_k, Type::TEXT_ARRAY),
                    (&want_p, Type::TEXT_ARRAY),
                    (&want_k, Type::TEXT_ARRAY),
                    (&want_f, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("deleting stale vectors"))?;
            if !vec_p.is_empty() {
                tx.query_typed(
                    "INSERT INTO store_vectors \
                       (prefix, key, field_name, embedding, created_at, updated_at) \
                     SELECT a.prefix, a.key, a.field, a.embedding::vector, $1, $1 \
                     FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) \
                       AS a(prefix, key, field, embedding) \
                     ON CONFLICT (prefix, key, field_name) DO UPDATE SET \
                       embedding = EXCLUDED.embedding, updated_at = EXCLUDED.updated_at",
                    &[
                        (&now_p, Type::TIMESTAMPTZ),
                        (&vec_p, Type::TEXT_ARRAY),
                        (&vec_k, Type::TEXT_ARRAY),
                        (&vec_f, Type::TEXT_ARRAY),
                        (&vec_v, Type::TEXT_ARRAY),
                    ],
                )
                .await
                .map_err(db("storing vectors"))?;
            }
        }
        Ok(())
    }
}

/// pgvector's text form of a vector (`[0.1,-2,…]`; Rust's shortest round-trip floats).
pub(super) fn vector_literal(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 12 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// The texts of `plans` that have no vector in `vectors` yet.
fn missing_texts(plans: &[VectorPlan], vectors: &BTreeMap<String, Vec<f32>>) -> Vec<String> {
    plans
        .iter()
        .flat_map(|p| p.embed.iter().map(|(_, t)| t))
        .filter(|t| !vectors.contains_key(*t))
        .cloned()
        .collect()
}

/// Plans the vectors of a run's puts against the stored rows, read now (with `lock`, locked
/// `FOR UPDATE` in the run's order).
async fn plan_vectors<C: GenericClient>(
    client: &C,
    index: &IndexConfig,
    ops: &[PutOp],
    now: Timestamp,
    lock: bool,
) -> Result<Vec<VectorPlan>, StoreError> {
    let (mut prefixes, mut keys) = (Vec::new(), Vec::new());
    for op in ops.iter().filter(|o| o.value.is_some()) {
        prefixes.push(prefix_of(&op.namespace));
        keys.push(op.key.clone());
    }
    let mut old: HashMap<Address, OldRow> = HashMap::new();
    if !prefixes.is_empty() {
        let now_p = time_param(now);
        let sql = format!(
            "SELECT s.prefix, s.key, s.value, (s.expires_at IS NULL OR s.expires_at > $1), \
               ARRAY(SELECT v.field_name FROM store_vectors v \
                 WHERE v.prefix = s.prefix AND v.key = s.key) \
             FROM store s \
             JOIN unnest($2::text[], $3::text[]) WITH ORDINALITY AS a(prefix, key, ord) \
               ON s.prefix = a.prefix AND s.key = a.key{}",
            if lock {
                " ORDER BY a.ord FOR UPDATE OF s"
            } else {
                ""
            }
        );
        let rows = client
            .query_typed(
                &sql,
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&prefixes, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("reading items to update"))?;
        for r in &rows {
            let fields: Vec<String> = col(r, 4)?;
            old.insert(
                (col(r, 0)?, col(r, 1)?),
                OldRow {
                    value: col(r, 2)?,
                    live: col(r, 3)?,
                    fields: fields.into_iter().collect(),
                },
            );
        }
    }
    let mut plans = Vec::with_capacity(ops.len());
    for op in ops {
        let Some(value) = &op.value else {
            plans.push(VectorPlan::default());
            continue;
        };
        let paths = index.paths_for(&op.index)?;
        let addr = (prefix_of(&op.namespace), op.key.clone());
        let before = old
            .get(&addr)
            .filter(|o| o.live)
            .map(|o| (&o.value, &o.fields));
        plans.push(VectorPlan::new(value, &paths, before));
    }
    Ok(plans)
}
