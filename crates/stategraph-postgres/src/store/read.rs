//! Reads: gets, exact and index-backed searches, and namespace listings.

use std::collections::BTreeSet;

use stategraph_store::filter::{Condition, parse_filter};
use stategraph_store::{
    GetOp, IndexConfig, Item, ListNamespacesOp, Namespace, SearchItem, SearchOp, StoreError,
    Timestamp, finish_list_namespaces,
};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

use super::PostgresStore;
use super::sql::{
    Address, ItemRow, ORDER, Params, client_of, col, db, filter_conditions, item_columns, live,
    match_regex, namespace_condition, namespace_of, prefix_of, time_param,
};
use super::ttl::refresh;

impl PostgresStore {
    /// Gets, in one statement (one round trip, one transaction), the items in the order
    /// asked; the TTLs of the items found refreshed as each get asks, in one more. One key is
    /// read by its primary key alone; several by a join with the list of addresses.
    pub(super) async fn get_many<C: GenericClient>(
        &self,
        client: &C,
        ops: &[&GetOp],
        now: Timestamp,
    ) -> Result<Vec<Option<Item>>, StoreError> {
        let (mut prefixes, mut keys) = (Vec::new(), Vec::new());
        for op in ops
            .iter()
            .filter(|op| super::nul_char::storable_key(&op.key))
        {
            prefixes.push(prefix_of(&op.namespace));
            keys.push(op.key.clone());
        }
        let now_p = time_param(now);
        let rows = match (prefixes.as_slice(), keys.as_slice()) {
            ([], _) => Vec::new(),
            ([prefix], [key]) => client
                .query_typed(
                    &format!(
                        "SELECT {} FROM store s WHERE s.prefix = $1 AND s.key = $2 AND {}",
                        item_columns("NULL::float8"),
                        live("$3")
                    ),
                    &[
                        (prefix, Type::TEXT),
                        (key, Type::TEXT),
                        (&now_p, Type::TIMESTAMPTZ),
                    ],
                )
                .await
                .map_err(db("reading an item"))?,
            _ => client
                .query_typed(
                    &format!(
                        "SELECT {} FROM store s \
                         JOIN unnest($1::text[], $2::text[]) AS a(prefix, key) \
                           ON s.prefix = a.prefix AND s.key = a.key \
                         WHERE {}",
                        item_columns("NULL::float8"),
                        live("$3")
                    ),
                    &[
                        (&prefixes, Type::TEXT_ARRAY),
                        (&keys, Type::TEXT_ARRAY),
                        (&now_p, Type::TIMESTAMPTZ),
                    ],
                )
                .await
                .map_err(db("reading items"))?,
        };
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let row = ItemRow::from_pg(row)?;
            found.insert((prefix_of(&row.item.namespace), row.item.key.clone()), row);
        }
        let mut refreshed = Vec::new();
        let items = ops
            .iter()
            .map(|op| {
                let address = (prefix_of(&op.namespace), op.key.clone());
                let row = found.get(&address)?;
                if op.refresh_ttl && row.has_ttl && !refreshed.contains(&address) {
                    refreshed.push(address);
                }
                Some(row.item.clone())
            })
            .collect();
        if !refreshed.is_empty() {
            refresh(client, &refreshed, now).await?;
        }
        Ok(items)
    }

    pub(super) async fn search(
        &self,
        client: &mut deadpool_postgres::Object,
        op: &SearchOp,
        query: Option<&Vec<f32>>,
        now: Timestamp,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let conditions = match &op.filter {
            Some(f) => parse_filter(f)?,
            None => Vec::new(),
        };
        let limit = i64::try_from(op.limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(op.offset).unwrap_or(i64::MAX);
        let rows = match (query, &self.index) {
            (Some(q), Some(index)) => {
                let mut found = None;
                if self.use_ann(client_of(client)).await? {
                    found = self
                        .search_ann(client, op, &conditions, q, index, now)
                        .await?;
                }
                match found {
                    Some(rows) => rows,
                    None => {
                        let mut p = Params::default();
                        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
                        let q = p.push(q.clone(), Type::FLOAT4_ARRAY);
                        let ns = namespace_condition(&op.namespace_prefix, "s.prefix", &mut p);
                        let filters = filter_conditions(&conditions, "s.value", &mut p);
                        let (l, o) = (p.push(limit, Type::INT8), p.push(offset, Type::INT8));
                        let sql = format!(
                            "WITH q AS (SELECT {q}::real[]::vector AS v) \
                             SELECT {} FROM store s \
                             LEFT JOIN LATERAL (SELECT max(COALESCE(1 - NULLIF(sv.embedding <=> \
                             (SELECT v FROM q), 'NaN'::float8), 0)) AS score FROM store_vectors sv \
                             WHERE sv.prefix = s.prefix AND sv.key = s.key) sc ON TRUE \
                             WHERE {} AND {ns}{filters} {ORDER} LIMIT {l} OFFSET {o}",
                            item_columns("sc.score"),
                            live(&now_p),
                        );
                        client
                            .query_typed(&sql, &p.refs())
                            .await
                            .map_err(db("searching by meaning"))?
                    }
                }
            }
            _ => {
                let mut p = Params::default();
                let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
                let ns = namespace_condition(&op.namespace_prefix, "s.prefix", &mut p);
                let filters = filter_conditions(&conditions, "s.value", &mut p);
                let (l, o) = (p.push(limit, Type::INT8), p.push(offset, Type::INT8));
                let sql = format!(
                    "SELECT {} FROM store s WHERE {} AND {ns}{filters} {ORDER} \
                     LIMIT {l} OFFSET {o}",
                    item_columns("NULL::float8"),
                    live(&now_p),
                );
                client
                    .query_typed(&sql, &p.refs())
                    .await
                    .map_err(db("searching"))?
            }
        };
        let rows = rows
            .iter()
            .map(ItemRow::from_pg)
            .collect::<Result<Vec<_>, _>>()?;
        if op.refresh_ttl {
            let stale: Vec<Address> = rows
                .iter()
                .filter(|r| r.has_ttl)
                .map(|r| (prefix_of(&r.item.namespace), r.item.key.clone()))
                .collect();
            if !stale.is_empty() {
                refresh(client_of(client), &stale, now).await?;
            }
        }
        Ok(rows
            .into_iter()
            .map(|r| SearchItem {
                item: r.item,
                score: r.score,
            })
            .collect())
    }

    /// Whether `store_vectors` is large enough (planner's estimate) for index-backed search.
    async fn use_ann<C: GenericClient>(&self, client: &C) -> Result<bool, StoreError> {
        if self.exact_search_limit == 0 {
            return Ok(true);
        }
        if self.exact_search_limit == u64::MAX {
            return Ok(false);
        }
        let rows = client
            .query_typed(
                "SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass('store_vectors')",
                &[],
            )
            .await
            .map_err(db("estimating the vector count"))?;
        let estimate: f64 = rows.first().map(|r| col(r, 0)).transpose()?.unwrap_or(0.0);
        Ok(estimate >= self.exact_search_limit as f64)
    }

    /// Index-backed search: HNSW candidates, then exact scores. `None` when the candidates
    /// cannot fill the page (the caller then searches exactly).
    async fn search_ann(
        &self,
        client: &mut deadpool_postgres::Object,
        op: &SearchOp,
        conditions: &[Condition],
        q: &[f32],
        index: &IndexConfig,
        now: Timestamp,
    ) -> Result<Option<Vec<tokio_postgres::Row>>, StoreError> {
        let wanted = op.offset.saturating_add(op.limit);
        if wanted == 0 {
            return Ok(Some(Vec::new()));
        }
        let per_item = index.fields.len().max(1);
        let candidates = wanted.saturating_mul(per_item).saturating_mul(2) + 1;
        let ef_search = candidates.clamp(40, 1000);
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a search"))?;
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {ef_search}"
        ))
        .await
        .map_err(db("configuring the index scan"))?;
        let mut p = Params::default();
        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
        let qv = p.push(q.to_vec(), Type::FLOAT4_ARRAY);
        let ns = namespace_condition(&op.namespace_prefix, "sv.prefix", &mut p);
        let filters = filter_conditions(conditions, "s.value", &mut p);
        let n = p.push(i64::try_from(candidates).unwrap_or(i64::MAX), Type::INT8);
        let sql = format!(
            "SELECT sv.prefix, sv.key FROM store_vectors sv \
             JOIN store s ON s.prefix = sv.prefix AND s.key = sv.key \
             WHERE {} AND {ns}{filters} \
             ORDER BY sv.embedding <=> {qv}::real[]::vector LIMIT {n}",
            live(&now_p)
        );
        let rows = tx
            .query_typed(&sql, &p.refs())
            .await
            .map_err(db("searching the vector index"))?;
        let mut seen = BTreeSet::new();
        let (mut prefixes, mut keys) = (Vec::new(), Vec::new());
        for r in &rows {
            let addr: Address = (col(r, 0)?, col(r, 1)?);
            if seen.insert(addr.clone()) {
                prefixes.push(addr.0);
                keys.push(addr.1);
            }
        }
        if prefixes.len() < wanted {
            return Ok(None);
        }
        let limit = i64::try_from(op.limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(op.offset).unwrap_or(i64::MAX);
        let sql = format!(
            "WITH q AS (SELECT $1::real[]::vector AS v) \
             SELECT {} FROM store s \
             JOIN unnest($2::text[], $3::text[]) AS c(prefix, key) \
               ON s.prefix = c.prefix AND s.key = c.key \
             LEFT JOIN LATERAL (SELECT max(COALESCE(1 - NULLIF(sv.embedding <=> \
             (SELECT v FROM q), 'NaN'::float8), 0)) AS score FROM store_vectors sv \
             WHERE sv.prefix = s.prefix AND sv.key = s.key) sc ON TRUE \
             {ORDER} LIMIT $4 OFFSET $5",
            item_columns("sc.score")
        );
        let q = q.to_vec();
        let rows = tx
            .query_typed(
                &sql,
                &[
                    (&q, Type::FLOAT4_ARRAY),
                    (&prefixes, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                    (&limit, Type::INT8),
                    (&offset, Type::INT8),
                ],
            )
            .await
            .map_err(db("scoring search candidates"))?;
        tx.commit().await.map_err(db("finishing a search"))?;
        Ok(Some(rows))
    }

    pub(super) async fn list_namespaces<C: GenericClient>(
        &self,
        client: &C,
        op: &ListNamespacesOp,
        now: Timestamp,
    ) -> Result<Vec<Namespace>, StoreError> {
        let mut p = Params::default();
        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
        let mut sql = format!(
            "SELECT DISTINCT s.prefix FROM store s WHERE {}",
            live(&now_p)
        );
        for c in &op.match_conditions {
            if c.path.is_empty() {
                continue;
            }
            let re = p.push(match_regex(&c.path, c.match_type), Type::TEXT);
            sql.push_str(&format!(" AND s.prefix ~ {re}"));
        }
        let rows = client
            .query_typed(&sql, &p.refs())
            .await
            .map_err(db("listing namespaces"))?;
        let namespaces = rows
            .iter()
            .map(|r| col::<&str>(r, 0).map(namespace_of))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(finish_list_namespaces(namespaces, op))
    }
}
