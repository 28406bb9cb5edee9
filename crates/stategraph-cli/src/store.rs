//! `store`: the cross-thread memory store of a database (LangGraph's `store` table), with
//! semantic search through the local all-MiniLM-L6-v2 model (`--embed minilm`).

use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;
use serde_json::{Value as Json, json};
use stategraph::store::{
    IndexConfig, IndexFields, ListNamespacesOptions, PutOptions, SearchOptions, Store, StoreError,
    StoreOptions, Ttl, TtlConfig,
};

use crate::{Failure, done, fail, table};

/// The store commands.
#[derive(Subcommand, Debug)]
pub(crate) enum StoreCommand {
    /// Put a JSON document under a namespace and key (replacing what is there).
    ///
    /// Example: stategraph --db sqlite:app.sqlite store put --ns user-1.memories --key m1
    /// --value '{"text": "I like pizza"}' --embed minilm
    Put {
        /// The namespace, labels separated by dots (`user-1.memories`).
        #[arg(long)]
        ns: String,
        /// The key.
        #[arg(long)]
        key: String,
        /// The document: a JSON object.
        #[arg(long)]
        value: String,
        /// Index for semantic search with this model (`minilm`: the local all-MiniLM-L6-v2).
        #[arg(long, value_parser = ["minilm"])]
        embed: Option<String>,
        /// The paths to embed, comma-separated (`text`, `a.b`, `a[*].b`); the whole document
        /// by default.
        #[arg(long, value_delimiter = ',')]
        fields: Vec<String>,
        /// Store it without indexing it (LangGraph's `index=False`).
        #[arg(long, conflicts_with = "fields")]
        no_index: bool,
        /// Expire after this many minutes (LangGraph's unit; fractions allowed).
        #[arg(long, value_parser = minutes)]
        ttl: Option<Duration>,
    },
    /// Get one document (without refreshing its TTL: reading changes nothing).
    ///
    /// Example: stategraph --db sqlite:app.sqlite store get --ns user-1.memories --key m1
    Get {
        /// The namespace, labels separated by dots.
        #[arg(long)]
        ns: String,
        /// The key.
        #[arg(long)]
        key: String,
    },
    /// Search the documents under a namespace prefix: by meaning with --query, by value with
    /// --filter (without refreshing their TTLs).
    ///
    /// Example: stategraph --db sqlite:app.sqlite store search --ns user-1 --query "food"
    /// --embed minilm --limit 3
    Search {
        /// The namespace prefix, labels separated by dots (empty: everything).
        #[arg(long, default_value = "")]
        ns: String,
        /// Rank by similarity to this text (needs --embed).
        #[arg(long)]
        query: Option<String>,
        /// Keep documents matching this JSON filter (`{"kind": "food"}`, `{"n": {"$gt": 3}}`).
        #[arg(long)]
        filter: Option<String>,
        /// The model the documents were indexed with (`minilm`).
        #[arg(long, value_parser = ["minilm"])]
        embed: Option<String>,
        /// At most this many results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Skip this many results.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Delete one document.
    ///
    /// Example: stategraph --db sqlite:app.sqlite store delete --ns user-1.memories --key m1
    Delete {
        /// The namespace, labels separated by dots.
        #[arg(long)]
        ns: String,
        /// The key.
        #[arg(long)]
        key: String,
    },
    /// List the namespaces (optionally under a prefix, down to a depth).
    ///
    /// Example: stategraph --db sqlite:app.sqlite store namespaces --prefix user-1 --max-depth 2
    Namespaces {
        /// Only namespaces starting with these labels (dot-separated; `*` matches any label).
        #[arg(long)]
        prefix: Option<String>,
        /// Only namespaces ending with these labels.
        #[arg(long)]
        suffix: Option<String>,
        /// Cut namespaces to this many labels.
        #[arg(long)]
        max_depth: Option<usize>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// A positive number of minutes (`--ttl`), as a duration.
fn minutes(text: &str) -> Result<Duration, String> {
    let expected = || format!("`{text}` is not a positive number of minutes");
    let minutes: f64 = text.trim().parse().map_err(|_| expected())?;
    Duration::try_from_secs_f64(minutes * 60.0)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(expected)
}

fn labels(ns: &str) -> Vec<&str> {
    if ns.is_empty() {
        Vec::new()
    } else {
        ns.split('.').collect()
    }
}

/// How a command uses the store.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Puts: the store's tables are created (or migrated) if needed.
    Write,
    /// Everything else: the database must already have the store's tables, and is not
    /// changed (no tables created, no file switched to WAL, no TTL refreshed).
    Existing,
}

/// The store of `url`, with the MiniLM index when `embed` names it.
async fn open(
    url: &str,
    access: Access,
    embed: Option<&str>,
    fields: &[String],
) -> Result<Arc<dyn Store>, Failure> {
    let mut options = StoreOptions::new();
    if access == Access::Existing {
        options = options.ttl(TtlConfig::default().refresh_on_read(false));
    }
    if embed.is_some() {
        let model = stategraph::embed::MiniLm::shared().map_err(fail)?;
        let mut index = IndexConfig::new(384, model);
        if !fields.is_empty() {
            index = index.with_fields(fields.iter().cloned());
        }
        options = options.index(index);
    }
    let opened = match access {
        Access::Write => stategraph::open_store(url, options).await,
        Access::Existing => stategraph::open_existing_store(url, options).await,
    };
    opened.map_err(|e| {
        let hint = match e {
            StoreError::MissingTables { .. } => " (`stategraph store put` sets it up)",
            _ => "",
        };
        format!(
            "cannot open the store of {}: {}{hint}",
            stategraph::redact_url(url),
            fail(e)
        )
    })
}

/// Runs one store command.
pub(crate) async fn run(url: &str, cmd: StoreCommand, as_json: bool) -> Result<String, Failure> {
    match cmd {
        StoreCommand::Put {
            ns,
            key,
            value,
            embed,
            fields,
            no_index,
            ttl,
        } => {
            let value: Json =
                serde_json::from_str(&value).map_err(|e| format!("--value is not JSON: {e}"))?;
            let store = open(url, Access::Write, embed.as_deref(), &fields).await?;
            let options = PutOptions {
                index: if no_index {
                    IndexFields::Disabled
                } else {
                    IndexFields::Default
                },
                ttl: ttl.map_or(Ttl::Default, Ttl::After),
            };
            store
                .put_with(&labels(&ns), &key, value, options)
                .await
                .map_err(fail)?;
            Ok(done(
                as_json,
                json!({"namespace": labels(&ns), "key": key, "stored": true}),
                format!("stored {ns} / {key}"),
            ))
        }
        StoreCommand::Get { ns, key } => {
            let store = open(url, Access::Existing, None, &[]).await?;
            let item = store
                .get(&labels(&ns), &key)
                .await
                .map_err(fail)?
                .ok_or_else(|| format!("no item `{key}` in namespace `{ns}`"))?;
            Ok(if as_json {
                item.to_json().to_string()
            } else {
                serde_json::to_string_pretty(&item.to_json()).map_err(fail)?
            })
        }
        StoreCommand::Search {
            ns,
            query,
            filter,
            embed,
            limit,
            offset,
        } => {
            if query.is_some() && embed.is_none() {
                return Err("--query searches by meaning: add --embed minilm".to_owned());
            }
            let store = open(url, Access::Existing, embed.as_deref(), &[]).await?;
            let mut options = SearchOptions::new().limit(limit).offset(offset);
            if let Some(q) = query {
                options = options.query(q);
            }
            if let Some(f) = filter {
                let f: Json =
                    serde_json::from_str(&f).map_err(|e| format!("--filter is not JSON: {e}"))?;
                options = options.filter(f);
            }
            let hits = store.search(&labels(&ns), options).await.map_err(fail)?;
            if as_json {
                return Ok(Json::Array(hits.iter().map(|h| h.to_json()).collect()).to_string());
            }
            Ok(table::render(
                &["NAMESPACE", "KEY", "SCORE", "VALUE"],
                hits.iter()
                    .map(|h| {
                        vec![
                            h.namespace.join("."),
                            h.key.clone(),
                            h.score.map_or_else(String::new, |s| format!("{s:.3}")),
                            table::shorten(&h.value.to_string(), 70),
                        ]
                    })
                    .collect(),
            ))
        }
        StoreCommand::Delete { ns, key } => {
            let store = open(url, Access::Existing, None, &[]).await?;
            store.delete(&labels(&ns), &key).await.map_err(fail)?;
            Ok(done(
                as_json,
                json!({"namespace": labels(&ns), "key": key, "deleted": true}),
                format!("deleted {ns} / {key}"),
            ))
        }
        StoreCommand::Namespaces {
            prefix,
            suffix,
            max_depth,
            limit,
        } => {
            let store = open(url, Access::Existing, None, &[]).await?;
            let mut options = ListNamespacesOptions::new().limit(limit);
            if let Some(p) = &prefix {
                options = options.prefix(&labels(p));
            }
            if let Some(s) = &suffix {
                options = options.suffix(&labels(s));
            }
            if let Some(d) = max_depth {
                options = options.max_depth(d);
            }
            let found = store.list_namespaces(options).await.map_err(fail)?;
            Ok(if as_json {
                json!(found).to_string()
            } else {
                found
                    .iter()
                    .map(|n| n.join("."))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_is_read_in_minutes() {
        assert_eq!(minutes("1.5"), Ok(Duration::from_secs(90)));
        assert_eq!(minutes("60"), Ok(Duration::from_secs(3600)));
        for bad in ["0", "-1", "soon", "NaN", "inf"] {
            assert!(minutes(bad).is_err(), "{bad}");
        }
    }
}
