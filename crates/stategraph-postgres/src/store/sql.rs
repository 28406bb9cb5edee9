//! SQL building blocks shared by reads and writes: errors, parameters, namespace and filter
//! conditions, and decoding rows.

use std::fmt;
use std::time::SystemTime;

use serde_json::Value as Json;
use stategraph_checkpoint::BoxError;
use stategraph_store::filter::Condition;
use stategraph_store::{Item, MatchType, Namespace, StoreError, Timestamp};
use tokio_postgres::types::{ToSql, Type};

use crate::error::BACKEND;

/// The latest expiry stored (9999-12-31T23:59:59.999999Z): far-future TTLs are clamped to it.
pub(super) const MAX_EXPIRY: Timestamp = Timestamp::from_unix_micros(253_402_300_799_999_999);

/// A store failure with what we were doing.
#[derive(Debug)]
struct DbError {
    context: &'static str,
    source: BoxError,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

pub(super) fn backend(context: &'static str, source: impl Into<BoxError>) -> StoreError {
    StoreError::backend(
        BACKEND,
        DbError {
            context,
            source: source.into(),
        },
    )
}

/// Wraps a tokio-postgres error with what we were doing.
pub(super) fn db(context: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| backend(context, e)
}

/// Query parameters, owned, with explicit types (statements are sent unnamed).
#[derive(Default)]
pub(super) struct Params {
    values: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
}

impl Params {
    /// Adds a parameter and returns its placeholder (`$n`).
    pub(super) fn push<T: ToSql + Sync + Send + 'static>(&mut self, value: T, ty: Type) -> String {
        self.values.push((Box::new(value), ty));
        format!("${}", self.values.len())
    }

    pub(super) fn refs(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.values
            .iter()
            .map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone()))
            .collect()
    }
}

/// The driver client behind a pooled connection.
pub(super) fn client_of(c: &deadpool_postgres::Object) -> &tokio_postgres::Client {
    c
}

/// `(prefix, key)` of a stored item.
pub(super) type Address = (String, String);

/// A namespace as stored: its labels joined by `.`.
pub(super) fn prefix_of(namespace: &[String]) -> String {
    namespace.join(".")
}

pub(super) fn namespace_of(prefix: &str) -> Namespace {
    prefix.split('.').map(str::to_owned).collect()
}

/// Escapes `LIKE` metacharacters (with `ESCAPE '\'`).
pub(super) fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// A label as a literal in a PostgreSQL regular expression (ASCII punctuation escaped).
pub(super) fn escape_regex(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A POSIX regex on the stored prefix for a match condition (`*` = one label).
pub(super) fn match_regex(path: &[String], match_type: MatchType) -> String {
    let body = path
        .iter()
        .map(|l| {
            if l == "*" {
                "[^.]+".to_owned()
            } else {
                escape_regex(l)
            }
        })
        .collect::<Vec<_>>()
        .join("\\.");
    match match_type {
        MatchType::Prefix => format!("^{body}(\\.|$)"),
        MatchType::Suffix => format!("(^|\\.){body}$"),
    }
}

/// `col` is under the namespace prefix, label-wise (`a` matches `a` and `a.b`, not `ab`).
pub(super) fn namespace_condition(prefix: &[String], col: &str, p: &mut Params) -> String {
    if prefix.is_empty() {
        return "TRUE".to_owned();
    }
    let text = prefix_of(prefix);
    let pattern = format!("{}.%", escape_like(&text));
    let a = p.push(text, Type::TEXT);
    let b = p.push(pattern, Type::TEXT);
    format!("({col} = {a} OR {col} LIKE {b} ESCAPE '\\')")
}

/// The filter as SQL conditions on the JSONB column `col`, each prefixed by ` AND `.
pub(super) fn filter_conditions(conditions: &[Condition], col: &str, p: &mut Params) -> String {
    let mut sql = String::new();
    for c in conditions {
        let clause = match c {
            Condition::Eq(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} = {v}")
            }
            Condition::Ne(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} IS DISTINCT FROM {v}")
            }
            Condition::Contains(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} @> {v}")
            }
            Condition::CmpNumber(k, op, n) => {
                let (k, n) = (p.push(k.clone(), Type::TEXT), p.push(*n, Type::FLOAT8));
                format!(
                    "(CASE WHEN jsonb_typeof({col} -> {k}) = 'number' \
                     THEN ({col} -> {k})::float8 {} {n} ELSE false END)",
                    op.sql()
                )
            }
            Condition::CmpString(k, op, s) => {
                let (k, s) = (p.push(k.clone(), Type::TEXT), p.push(s.clone(), Type::TEXT));
                format!(
                    "(CASE WHEN jsonb_typeof({col} -> {k}) = 'string' \
                     THEN ({col} ->> {k}) COLLATE \"C\" {} {s} ELSE false END)",
                    op.sql()
                )
            }
        };
        sql.push_str(" AND ");
        sql.push_str(&clause);
    }
    sql
}

/// `s` (a `store` row) has not expired at `now`.
pub(super) fn live(now: &str) -> String {
    format!("(s.expires_at IS NULL OR s.expires_at > {now})")
}

/// The order of results: score (scored first), newest first, then namespace label by label
/// and key, byte-wise.
pub(super) const ORDER: &str = "ORDER BY score DESC NULLS LAST, s.updated_at DESC, \
     string_to_array(s.prefix, '.') COLLATE \"C\", s.key COLLATE \"C\"";

/// The columns [`ItemRow::from_pg`] reads, for `store s` and a `score` expression.
pub(super) fn item_columns(score: &str) -> String {
    format!(
        "s.prefix, s.key, s.value, s.created_at, s.updated_at, {score} AS score, \
         s.ttl_minutes IS NOT NULL AS has_ttl"
    )
}

/// Column `idx` of a row, read strictly: a value of another type, or a NULL where a value
/// belongs, is an error naming the column, never a panic.
pub(super) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    r: &'a tokio_postgres::Row,
    idx: usize,
) -> Result<T, StoreError> {
    r.try_get(idx).map_err(|e| {
        let name = r.columns().get(idx).map_or("?", |c| c.name());
        StoreError::backend(BACKEND, format!("reading column `{name}` (#{idx}): {e}"))
    })
}

/// An item read back, with its score and whether it has a TTL.
pub(super) struct ItemRow {
    pub(super) item: Item,
    pub(super) score: Option<f64>,
    pub(super) has_ttl: bool,
}

impl ItemRow {
    pub(super) fn from_pg(r: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let prefix: String = col(r, 0)?;
        let key: String = col(r, 1)?;
        let namespace = namespace_of(&prefix);
        let corrupt = |i: usize, why: String| StoreError::Corrupt {
            namespace: namespace.clone(),
            key: key.clone(),
            reason: format!(
                "column `{}` {why}",
                r.columns().get(i).map_or("?", |c| c.name())
            ),
        };
        let value: Json = r.try_get(2).map_err(|e| corrupt(2, e.to_string()))?;
        let time = |i: usize| -> Result<Timestamp, StoreError> {
            let t: Option<SystemTime> = r.try_get(i).map_err(|e| corrupt(i, e.to_string()))?;
            t.map(Timestamp::from_system_time)
                .ok_or_else(|| corrupt(i, "is NULL".to_owned()))
        };
        let (created_at, updated_at) = (time(3)?, time(4)?);
        if !value.is_object() {
            return Err(StoreError::Corrupt {
                namespace,
                key,
                reason: "the value is not a JSON object".into(),
            });
        }
        Ok(Self {
            item: Item {
                value,
                key,
                namespace,
                created_at,
                updated_at,
            },
            score: col(r, 5)?,
            has_ttl: col(r, 6)?,
        })
    }
}

pub(super) fn time_param(t: Timestamp) -> SystemTime {
    t.min(MAX_EXPIRY).to_system_time()
}
