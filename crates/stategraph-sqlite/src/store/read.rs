//! Reads: gets, searches and namespace listings, in one read transaction per run of reads.

use std::fmt::Write as _;

use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};
use serde_json::Value as Json;
use stategraph_store::{
    Clock, GetOp, Item, ListNamespacesOp, MatchType, Namespace, OpResult, ReadOp, SearchItem,
    SearchOp, StoreError, Timestamp, finish_list_namespaces,
};

use super::conn::{FILTER_FN, NAMESPACE_COLLATION, db};
use super::ttl::Refresh;
use super::vec::f32_blob;

/// `\`, `%` and `_` escaped for `LIKE … ESCAPE '\'`.
fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Appends `(column is the namespace `labels` or under it)`, label-wise: `a.b` matches `a.b`
/// and `a.b.c`, not `a.bc`. SQLite's `LIKE` ignores ASCII case, so a case-sensitive check
/// of the leading text is added to it.
pub(super) fn push_prefix_condition(
    sql: &mut String,
    params: &mut Vec<Sql>,
    column: &str,
    labels: &[String],
) {
    let exact = labels.join(".");
    let under = format!("{exact}.");
    let _ = write!(
        sql,
        "({column} = ? OR ({column} LIKE ? ESCAPE '\\' AND substr({column}, 1, length(?)) = ?))"
    );
    params.push(Sql::Text(exact));
    params.push(Sql::Text(format!("{}%", escape_like(&under))));
    params.push(Sql::Text(under.clone()));
    params.push(Sql::Text(under));
}

fn sql_int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A text column, or `None` when it is NULL or not text.
fn text_column(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        _ => None,
    }
}

/// A number column (`ttl_minutes`), or `None`.
fn real_column(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Real(f) => Some(f),
        ValueRef::Integer(i) => Some(i as f64),
        _ => None,
    }
}

/// The JSON text or bytes of a `value` column.
pub(super) fn bytes_column(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
        _ => None,
    }
}

/// One `store` row as read, before decoding.
struct RawRow {
    prefix: String,
    key: String,
    value: Option<Vec<u8>>,
    created_at: Option<String>,
    updated_at: Option<String>,
    ttl_minutes: Option<f64>,
}

impl RawRow {
    fn namespace(&self) -> Namespace {
        self.prefix.split('.').map(str::to_owned).collect()
    }

    /// The item, or [`StoreError::Corrupt`] naming it.
    fn decode(&self) -> Result<Item, StoreError> {
        let corrupt = |reason: String| StoreError::Corrupt {
            namespace: self.namespace(),
            key: self.key.clone(),
            reason,
        };
        let bytes = self
            .value
            .as_deref()
            .ok_or_else(|| corrupt("the value is NULL or not text".into()))?;
        let value: Json = serde_json::from_slice(bytes)
            .map_err(|e| corrupt(format!("the value is not JSON: {e}")))?;
        if !value.is_object() {
            return Err(corrupt("the value is not a JSON object".into()));
        }
        let time = |name: &str, text: &Option<String>| {
            text.as_deref()
                .and_then(Timestamp::parse)
                .ok_or_else(|| corrupt(format!("{name} {text:?} is not a timestamp")))
        };
        Ok(Item {
            value,
            key: self.key.clone(),
            namespace: self.namespace(),
            created_at: time("created_at", &self.created_at)?,
            updated_at: time("updated_at", &self.updated_at)?,
        })
    }

    /// The refresh this row gets when read with `refresh_ttl`, if it has a TTL.
    fn refresh(&self, now: Timestamp) -> Option<Refresh> {
        self.ttl_minutes.map(|ttl| Refresh {
            prefix: self.prefix.clone(),
            key: self.key.clone(),
            ttl,
            now,
        })
    }
}

/// Runs read ops in one read transaction; returns their results and the TTL refreshes asked
/// for.
pub(super) fn run_reads(
    conn: &mut Connection,
    ops: &[ReadOp],
    dims: usize,
    clock: &Clock,
) -> Result<(Vec<OpResult>, Vec<Refresh>), StoreError> {
    let tx = conn.transaction().map_err(db("starting a read"))?;
    let mut refreshes = Vec::new();
    let mut results = Vec::with_capacity(ops.len());
    for r in ops {
        let now = clock.now();
        results.push(match r {
            ReadOp::Get(g) => OpResult::Get(get(&tx, g, now, &mut refreshes)?),
            ReadOp::Search(s, query) => {
                OpResult::Search(search(&tx, s, query.as_deref(), dims, now, &mut refreshes)?)
            }
            ReadOp::ListNamespaces(l) => OpResult::ListNamespaces(list_namespaces(&tx, l, now)?),
        });
    }
    tx.commit().map_err(db("finishing a read"))?;
    Ok((results, refreshes))
}

fn get(
    tx: &Transaction<'_>,
    op: &GetOp,
    now: Timestamp,
    refreshes: &mut Vec<Refresh>,
) -> Result<Option<Item>, StoreError> {
    let prefix = op.namespace.join(".");
    let row = tx
        .prepare_cached(
            "SELECT value, created_at, updated_at, ttl_minutes FROM store \
             WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .map_err(db("preparing a get"))?
        .query_row(params![prefix, op.key, now.to_sql_text()], |r| {
            Ok(RawRow {
                prefix: prefix.clone(),
                key: op.key.clone(),
                value: bytes_column(r.get_ref(0)?),
                created_at: text_column(r.get_ref(1)?),
                updated_at: text_column(r.get_ref(2)?),
                ttl_minutes: real_column(r.get_ref(3)?),
            })
        })
        .optional()
        .map_err(db("reading an item"))?;
    let Some(row) = row else { return Ok(None) };
    let item = row.decode()?;
    if op.refresh_ttl {
        refreshes.extend(row.refresh(now));
    }
    Ok(Some(item))
}

/// One query: namespace prefix, liveness and filter in `WHERE`; with a query vector, each
/// item's score is the best `1 - cosine distance` of its vectors (of the index's dimensions;
/// a zero vector scores 0, as [`cosine`](stategraph_store::cosine) says), scored
/// items first; then newest first, then by address.
fn search(
    tx: &Transaction<'_>,
    op: &SearchOp,
    query: Option<&[f32]>,
    dims: usize,
    now: Timestamp,
    refreshes: &mut Vec<Refresh>,
) -> Result<Vec<SearchItem>, StoreError> {
    let mut params: Vec<Sql> = Vec::new();
    let score = match query {
        Some(q) => {
            params.push(Sql::Blob(f32_blob(q)));
            params.push(Sql::Integer(sql_int(dims.saturating_mul(4))));
            "(SELECT MAX(COALESCE(1.0 - vec_distance_cosine(v.embedding, ?), 0.0)) \
             FROM store_vectors v WHERE v.prefix = s.prefix AND v.key = s.key \
             AND length(v.embedding) = ?)"
        }
        None => "NULL",
    };
    let mut sql = format!(
        "SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes, \
         {score} AS score FROM store s WHERE (s.expires_at IS NULL OR s.expires_at > ?)"
    );
    params.push(Sql::Text(now.to_sql_text()));
    if !op.namespace_prefix.is_empty() {
        sql.push_str(" AND ");
        push_prefix_condition(&mut sql, &mut params, "s.prefix", &op.namespace_prefix);
    }
    if let Some(f) = op.filter.as_ref().filter(|f| !f.is_empty()) {
        let _ = write!(sql, " AND {FILTER_FN}(s.value, ?)");
        let text = serde_json::to_string(f).map_err(|e| StoreError::InvalidFilter {
            key: String::new(),
            reason: e.to_string(),
        })?;
        params.push(Sql::Text(text));
    }
    sql.push_str(" ORDER BY ");
    if query.is_some() {
        sql.push_str("score DESC NULLS LAST, ");
    }
    let _ = write!(
        sql,
        "s.updated_at DESC, s.prefix COLLATE {NAMESPACE_COLLATION}, s.key LIMIT ? OFFSET ?"
    );
    params.push(Sql::Integer(sql_int(op.limit)));
    params.push(Sql::Integer(sql_int(op.offset)));

    let mut stmt = tx.prepare_cached(&sql).map_err(db("preparing a search"))?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| {
            Ok((
                RawRow {
                    prefix: r.get(0)?,
                    key: r.get(1)?,
                    value: bytes_column(r.get_ref(2)?),
                    created_at: text_column(r.get_ref(3)?),
                    updated_at: text_column(r.get_ref(4)?),
                    ttl_minutes: real_column(r.get_ref(5)?),
                },
                r.get::<_, Option<f64>>(6)?,
            ))
        })
        .map_err(db("searching"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db("searching"))?;
    let mut out = Vec::with_capacity(rows.len());
    for (row, score) in &rows {
        out.push(SearchItem {
            item: row.decode()?,
            score: *score,
        });
    }
    if op.refresh_ttl {
        refreshes.extend(rows.iter().filter_map(|(row, _)| row.refresh(now)));
    }
    Ok(out)
}

fn list_namespaces(
    tx: &Transaction<'_>,
    op: &ListNamespacesOp,
    now: Timestamp,
) -> Result<Vec<Namespace>, StoreError> {
    let mut sql =
        "SELECT DISTINCT prefix FROM store WHERE (expires_at IS NULL OR expires_at > ?)".to_owned();
    let mut params = vec![Sql::Text(now.to_sql_text())];
    // Narrow by the literal labels before any `*` of each prefix condition; the conditions are
    // then checked exactly by `finish_list_namespaces`.
    for c in &op.match_conditions {
        if c.match_type != MatchType::Prefix {
            continue;
        }
        let literal: Vec<String> = c.path.iter().take_while(|l| *l != "*").cloned().collect();
        if !literal.is_empty() {
            sql.push_str(" AND ");
            push_prefix_condition(&mut sql, &mut params, "prefix", &literal);
        }
    }
    let mut stmt = tx
        .prepare_cached(&sql)
        .map_err(db("preparing list_namespaces"))?;
    let prefixes = stmt
        .query_map(params_from_iter(params), |r| r.get::<_, String>(0))
        .map_err(db("listing namespaces"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db("listing namespaces"))?;
    Ok(finish_list_namespaces(
        prefixes
            .iter()
            .map(|p| p.split('.').map(str::to_owned).collect()),
        op,
    ))
}
