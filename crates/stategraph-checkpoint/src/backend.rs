//! For saver and store authors: the machinery every stategraph backend shares, so that each
//! backend keeps only its own SQL or commands and all of them behave the same.
//!
//! - [`CheckpointSaver::put_checked`](crate::CheckpointSaver::put_checked) with [`Expect`] is
//!   the one put a saver implements (`put` and `put_if_latest` are provided);
//! - [`prune::run`] carries out every prune strategy over a small [`PruneTarget`];
//! - [`assemble`] turns rows of LangGraph's blob layout into tuples over a small
//!   [`LayoutFetch`] (two queries per thread and namespace, whatever the number of rows);
//! - [`ListSql`] builds the `WHERE … ORDER BY … LIMIT` of `list` from [`ListOptions`];
//! - [`CheckpointTuple::from_parts`] builds a tuple's configs from stored columns;
//! - [`copy_preflight`], [`metadata_from_json`] and [`column_error`] give every backend the
//!   same errors for the same failures;
//! - [`Timeouts`] bounds every wait on a networked database (connect, operation, idle);
//! - [`SaverConfig`] opens every backend's saver the same way, from a URL.
//!
//! Reading stored data is strict everywhere: a column of the wrong type, a NULL where a
//! value belongs or metadata that does not parse is an [`Error::Serialization`] naming the
//! thread, checkpoint and part, never a panic or a default value.
//!
//! ```
//! use stategraph_checkpoint::backend::{ListSql, Placeholders, SqlArg};
//! use stategraph_checkpoint::ListOptions;
//!
//! let options = ListOptions::thread("t1").before("1ef").limit(5);
//! let (sql, args) = ListSql::build(
//!     "SELECT * FROM checkpoints",
//!     &options,
//!     Placeholders::Dollar,
//!     |_, _| Ok(()),
//! )?;
//! assert_eq!(
//!     sql,
//!     "SELECT * FROM checkpoints WHERE thread_id = $1 AND checkpoint_id < $2 \
//!      ORDER BY checkpoint_id DESC LIMIT $3"
//! );
//! assert_eq!(args, vec![SqlArg::Text("t1"), SqlArg::Text("1ef"), SqlArg::Int(5)]);
//! # Ok::<(), stategraph_checkpoint::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value as Json;

pub use crate::blob_layout::{self, EncodedSave, LayoutWriter, WriteFailure, restore_blob};
pub use crate::prune::{self, PrunePlan, PruneRow, PruneTarget};
pub use crate::saver::{Expect, latest_conflict, validate_put, validate_put_writes};
pub use crate::serializer::loads_typed_with;
pub use crate::timeouts::{Timed, Timeouts, within};
pub use crate::writes::{EncodedWrite, StoredWrite, encode_writes};

use crate::checkpoint::{Checkpoint, CheckpointTuple};
use crate::checkpoint_id::CheckpointId;
use crate::error::{Error, Location, Result};
use crate::metadata::CheckpointMetadata;
use crate::saver::ListOptions;
use crate::serializer::{SerdeError, Serializer};
use crate::writes::PendingWrite;
use stategraph_value::{DecodeCache, Value};

/// How every backend's saver is configured and opened: from a database URL, with a
/// serializer, with or without setting up its tables. Each backend's config (`SqliteConfig`,
/// `PostgresConfig`, …) implements it with its own inherent methods of the same names, so
/// code that opens "whichever backend the URL names" is written once:
///
/// ```
/// use std::sync::Arc;
/// use stategraph_checkpoint::backend::SaverConfig;
/// use stategraph_checkpoint::{CheckpointSaver, Result, Serializer};
///
/// async fn open<C: SaverConfig>(url: &str, serde: Arc<dyn Serializer>) -> Result<Arc<dyn CheckpointSaver>> {
///     Ok(Arc::new(C::from_url(url)?.serializer(serde).connect().await?))
/// }
/// ```
pub trait SaverConfig: Sized + Send {
    /// The saver it opens.
    type Saver: crate::CheckpointSaver + 'static;

    /// The configuration a database URL describes (its query parameters included).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming what in the URL is wrong.
    fn from_url(url: &str) -> Result<Self>;

    /// Serializes checkpoints and writes with `serializer` (LangGraph's default otherwise).
    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self;

    /// Opens the database as it is, creating and migrating nothing; missing tables are an
    /// error naming them (tools that only read).
    fn without_setup(self) -> Self;

    /// Connects (and sets up the tables unless [`without_setup`](Self::without_setup)).
    fn connect(self) -> impl std::future::Future<Output = Result<Self::Saver>> + Send;
}

/// Removes the query parameter `name` from `url`, returning the URL without it (the other
/// parameters kept, in order, for the driver) and its value, if it was there. Backends use it
/// for their own settings in a database URL (a key prefix, a TTL, collection names).
///
/// ```
/// use stategraph_checkpoint::backend::take_url_param;
///
/// let (rest, ttl) = take_url_param("redis://h/0?ttl=60&protocol=resp3", "ttl");
/// assert_eq!((rest.as_str(), ttl.as_deref()), ("redis://h/0?protocol=resp3", Some("60")));
/// ```
pub fn take_url_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut value = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == name => {
                value = Some(v.to_owned());
                false
            }
            _ => true,
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, value)
}

/// A TTL given as a URL parameter (`param`): a positive whole number of seconds, or an
/// [`Error::InvalidInput`] naming the parameter and the value.
pub fn ttl_param(param: &str, value: &str) -> Result<std::time::Duration> {
    value
        .parse::<u64>()
        .ok()
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| {
            Error::invalid(
                format!("database URL parameter `{param}`"),
                format!("`{value}` is not a positive number of seconds"),
            )
        })
}

/// The checks of `copy_thread` before it copies: `source` must have checkpoints
/// ([`Error::NotFound`]) and `target` none ([`Error::Conflict`]).
pub fn copy_preflight(
    source: &str,
    target: &str,
    source_exists: bool,
    target_exists: bool,
) -> Result<()> {
    if !source_exists {
        return Err(Error::NotFound {
            what: format!("thread `{source}` to copy"),
        });
    }
    if target_exists {
        return Err(Error::Conflict {
            message: format!("copy_thread target `{target}` already has checkpoints"),
        });
    }
    Ok(())
}

/// A stored value that does not have the shape it must have, at `location` (`path` says
/// where inside it, e.g. a column).
pub fn shape_error(
    location: Location,
    path: impl Into<String>,
    message: impl Into<String>,
) -> Error {
    Error::serialization(
        location,
        SerdeError::Shape {
            path: path.into(),
            message: message.into(),
        },
    )
}

/// A column of a stored row that cannot be read as the type it must have (or is NULL where a
/// value belongs): the driver's message, at `location`, naming the column.
pub fn column_error(location: &Location, column: &str, message: impl std::fmt::Display) -> Error {
    shape_error(
        location.clone(),
        format!("column `{column}`"),
        message.to_string(),
    )
}

/// A checkpoint's metadata from its stored JSON; anything that is not LangGraph metadata is an
/// [`Error::Serialization`] naming the checkpoint's metadata.
pub fn metadata_from_json(json: Json, location: &Location) -> Result<CheckpointMetadata> {
    CheckpointMetadata::from_json(json)
        .map_err(|e| shape_error(location.clone().part("metadata"), "", e.to_string()))
}

/// JSON stored as text (MySQL columns, Redis fields), parsed; invalid JSON is an
/// [`Error::Serialization`] at `location` naming the byte offset.
pub fn json_from_text(text: &str, location: Location) -> Result<Json> {
    serde_json::from_str(text).map_err(|e| {
        let offset = text
            .lines()
            .take(e.line().saturating_sub(1))
            .map(|l| l.len() + 1)
            .sum::<usize>()
            + e.column().saturating_sub(1);
        shape_error(location, "", format!("invalid JSON at byte {offset}: {e}"))
    })
}

/// A query argument of [`ListSql`], converted by each backend to its driver's type.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlArg<'a> {
    /// Text.
    Text(&'a str),
    /// An integer.
    Int(i64),
    /// A float.
    Real(f64),
    /// A JSON document.
    Json(Json),
}

/// How a database writes query placeholders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placeholders {
    /// `?` (SQLite, MySQL).
    Question,
    /// `$1`, `$2`, … (Postgres).
    Dollar,
}

/// The `WHERE … ORDER BY checkpoint_id DESC LIMIT …` of a `list` query, built once for every
/// SQL backend: thread, namespace, checkpoint id and `before` are column comparisons; the
/// metadata filter is the backend's own clause, added by the `filter` callback of
/// [`build`](Self::build) with [`bind`](Self::bind) and [`clause`](Self::clause).
#[derive(Debug)]
pub struct ListSql<'a> {
    clauses: Vec<String>,
    args: Vec<SqlArg<'a>>,
    style: Placeholders,
}

impl<'a> ListSql<'a> {
    /// Adds an argument and returns its placeholder.
    pub fn bind(&mut self, arg: SqlArg<'a>) -> String {
        self.args.push(arg);
        match self.style {
            Placeholders::Question => "?".to_owned(),
            Placeholders::Dollar => format!("${}", self.args.len()),
        }
    }

    /// Adds a condition (joined with `AND`).
    pub fn clause(&mut self, clause: impl Into<String>) {
        self.clauses.push(clause.into());
    }

    /// `select` narrowed by `options`, newest first, with its arguments in placeholder order.
    /// A non-empty metadata filter is handed to `filter`.
    pub fn build(
        select: &str,
        options: &'a ListOptions,
        style: Placeholders,
        filter: impl FnOnce(&mut Self, &'a serde_json::Map<String, Json>) -> Result<()>,
    ) -> Result<(String, Vec<SqlArg<'a>>)> {
        Self::build_with(
            select,
            options,
            style,
            |at| format!("checkpoint_ns = {at}"),
            filter,
        )
    }

    /// [`build`](Self::build) where the namespace is matched by `ns` (given the placeholder),
    /// for a schema that indexes a hash of it.
    pub fn build_with(
        select: &str,
        options: &'a ListOptions,
        style: Placeholders,
        ns: impl FnOnce(&str) -> String,
        filter: impl FnOnce(&mut Self, &'a serde_json::Map<String, Json>) -> Result<()>,
    ) -> Result<(String, Vec<SqlArg<'a>>)> {
        let mut q = ListSql {
            clauses: Vec::new(),
            args: Vec::new(),
            style,
        };
        if let Some(thread) = &options.thread_id {
            let at = q.bind(SqlArg::Text(thread));
            q.clause(format!("thread_id = {at}"));
        }
        if let Some(namespace) = &options.checkpoint_ns {
            let at = q.bind(SqlArg::Text(namespace));
            q.clause(ns(&at));
        }
        if let Some(id) = &options.checkpoint_id {
            let at = q.bind(SqlArg::Text(id));
            q.clause(format!("checkpoint_id = {at}"));
        }
        if !options.filter.is_empty() {
            filter(&mut q, &options.filter)?;
        }
        if let Some(before) = &options.before {
            let at = q.bind(SqlArg::Text(before));
            q.clause(format!("checkpoint_id < {at}"));
        }
        let mut sql = select.to_owned();
        if !q.clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&q.clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY checkpoint_id DESC");
        if let Some(limit) = options.limit {
            let at = q.bind(SqlArg::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
            sql.push_str(" LIMIT ");
            sql.push_str(&at);
        }
        Ok((sql, q.args))
    }
}

/// A checkpoint row of LangGraph's blob layout, read from the database.
#[derive(Clone, Debug)]
pub struct LayoutRow {
    /// The thread.
    pub thread_id: String,
    /// The namespace.
    pub checkpoint_ns: String,
    /// The checkpoint's id.
    pub checkpoint_id: CheckpointId,
    /// Its parent's id.
    pub parent: Option<CheckpointId>,
    /// The checkpoint JSON (inline values only).
    pub checkpoint: Json,
    /// The metadata JSON.
    pub metadata: Json,
}

impl LayoutRow {
    /// Where the row is stored, for errors.
    pub fn location(&self) -> Location {
        Location::checkpoint(&self.thread_id, &self.checkpoint_ns, &self.checkpoint_id)
    }
}

/// A stored blob: channel, version, type tag and bytes (`None`: the `empty` marker's NULL).
#[derive(Clone, Debug)]
pub struct FetchedBlob {
    /// The channel.
    pub channel: String,
    /// The version, as text.
    pub version: String,
    /// The serializer's type tag.
    pub type_tag: String,
    /// The bytes.
    pub data: Option<Vec<u8>>,
}

/// What [`assemble`] fetches per (thread, namespace): the blobs of some (channel, version)
/// pairs and the writes of some checkpoints (each write with its checkpoint id). A backend
/// may send both queries at once.
#[allow(async_fn_in_trait)] // implemented per backend on concrete types; Send is known there
pub trait LayoutFetch {
    /// The stored blobs among `pairs` and the writes of `checkpoint_ids`.
    async fn fetch(
        &mut self,
        thread: &str,
        ns: &str,
        pairs: &[(String, String)],
        checkpoint_ids: &[&str],
    ) -> Result<(Vec<FetchedBlob>, Vec<(CheckpointId, StoredWrite)>)>;
}

/// Rows of the blob layout as tuples, in the order given: each row's blobs restored, its
/// writes attached, with one [`LayoutFetch::fetch`] per (thread, namespace). With
/// `skip_values` no blob is fetched and the checkpoints come back without channel values
/// ([`ListOptions::skip_values`]).
pub async fn assemble<F: LayoutFetch + ?Sized>(
    fetch: &mut F,
    serde: &dyn Serializer,
    rows: Vec<LayoutRow>,
    skip_values: bool,
) -> Result<Vec<CheckpointTuple>> {
    let mut parsed = Vec::with_capacity(rows.len());
    for mut row in rows {
        let loc = row.location();
        let mut checkpoint =
            Checkpoint::from_value(Value::from(std::mem::take(&mut row.checkpoint)))
                .map_err(|e| Error::serialization(loc.clone(), e))?;
        if skip_values {
            checkpoint.channel_values.clear();
        }
        let metadata = metadata_from_json(std::mem::take(&mut row.metadata), &loc)?;
        parsed.push((row, checkpoint, metadata));
    }
    // (thread, namespace) → its rows; each row's group.
    let mut groups: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, (row, ..)) in parsed.iter().enumerate() {
        groups
            .entry((&row.thread_id, &row.checkpoint_ns))
            .or_default()
            .push(i);
    }
    /// A fetched blob, decoded when the first checkpoint that holds it is assembled; every
    /// later one shares that value (`None`: the `empty` marker, no value).
    enum Blob {
        Stored(FetchedBlob),
        Decoded(Option<Value>),
    }
    // One cache for the whole listing: values repeated across blobs (the messages every
    // later version of a list holds again) and writes are decoded once.
    let mut cache = DecodeCache::new();
    // Per group: channel → version → blob (looked up by borrowed text, no key built per
    // checkpoint). Per row: its writes.
    let mut row_group = vec![0; parsed.len()];
    let mut group_blobs: Vec<HashMap<String, HashMap<String, Blob>>> =
        Vec::with_capacity(groups.len());
    let mut row_writes: Vec<Vec<PendingWrite>> = std::iter::repeat_with(Vec::new)
        .take(parsed.len())
        .collect();
    for (g, ((thread, ns), members)) in groups.iter().enumerate() {
        let mut pairs: BTreeSet<(&str, std::borrow::Cow<'_, str>)> = BTreeSet::new();
        let mut ids: HashMap<&str, usize> = HashMap::with_capacity(members.len());
        for &i in members {
            let Some((row, checkpoint, _)) = parsed.get(i) else {
                continue;
            };
            if let Some(slot) = row_group.get_mut(i) {
                *slot = g;
            }
            ids.insert(row.checkpoint_id.as_str(), i);
            if skip_values {
                continue;
            }
            for (ch, v) in &checkpoint.channel_versions {
                pairs.insert((ch, v.text()));
            }
        }
        let pairs: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(c, v)| (c.to_owned(), v.into_owned()))
            .collect();
        let listed: Vec<&str> = ids.keys().copied().collect();
        let (found_blobs, found_writes) = fetch.fetch(thread, ns, &pairs, &listed).await?;
        let mut blobs: HashMap<String, HashMap<String, Blob>> = HashMap::new();
        for b in found_blobs {
            let versions = match blobs.get_mut(&b.channel) {
                Some(versions) => versions,
                None => blobs.entry(b.channel.clone()).or_default(),
            };
            versions.insert(b.version.clone(), Blob::Stored(b));
        }
        group_blobs.push(blobs);
        for (checkpoint_id, w) in found_writes {
            let Some(writes) = ids
                .get(checkpoint_id.as_str())
                .and_then(|&i| row_writes.get_mut(i))
            else {
                continue;
            };
            let at = || Location::checkpoint(thread, ns, &checkpoint_id);
            writes.push(w.decode_shared(serde, at, &mut cache)?);
        }
    }
    drop(groups);
    let mut out = Vec::with_capacity(parsed.len());
    let mut spent = Vec::new();
    for (((row, mut checkpoint, metadata), g), pending) in
        parsed.into_iter().zip(row_group).zip(row_writes)
    {
        let loc = row.location();
        let LayoutRow {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent,
            ..
        } = row;
        if let Some(blobs) = group_blobs.get_mut(g) {
            for (channel, version) in &checkpoint.channel_versions {
                let Some(blob) = blobs
                    .get_mut(channel)
                    .and_then(|versions| versions.get_mut(&*version.text()))
                else {
                    continue;
                };
                if let Blob::Stored(b) = blob {
                    let value = crate::blob_layout::decode_blob(
                        serde,
                        &loc,
                        channel,
                        &b.type_tag,
                        b.data.as_deref(),
                        Some(&mut cache),
                    )?;
                    // The fetched bytes are freed together when the listing is assembled,
                    // not one by one as they are decoded: freed one by one, they left free
                    // memory at the top of glibc's heap, which it returned to the system and
                    // then faulted back in for the next values (a listing of a long chat
                    // took 10–20 % longer).
                    spent.push(b.data.take());
                    *blob = Blob::Decoded(value);
                }
                if let Blob::Decoded(Some(value)) = blob {
                    checkpoint
                        .channel_values
                        .insert(channel.to_owned(), value.clone());
                }
            }
        }
        out.push(CheckpointTuple::from_parts(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent,
            checkpoint,
            metadata,
            pending,
        ));
    }
    drop(spent);
    Ok(out)
}
