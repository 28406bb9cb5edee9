//! Which checkpoint an operation addresses: LangGraph's `config["configurable"]` keys.

use serde_json::json;

use crate::checkpoint_id::CheckpointId;

/// The `configurable` key naming the thread.
pub const THREAD_ID: &str = "thread_id";
/// The `configurable` key naming the checkpoint namespace (`""` for the root graph).
pub const CHECKPOINT_NS: &str = "checkpoint_ns";
/// The `configurable` key naming one checkpoint.
pub const CHECKPOINT_ID: &str = "checkpoint_id";
/// Separator between nested namespaces: `outer:<task>|inner:<task>`.
pub const NS_SEP: char = '|';
/// Separator between a node name and its task id in a namespace: `node:<task>`.
pub const NS_END: char = ':';

/// Addresses a thread, a namespace inside it and optionally one checkpoint.
///
/// Without `checkpoint_id` it means "the latest checkpoint" for reads, and "no parent" for
/// [`put`](crate::CheckpointSaver::put).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CheckpointConfig {
    /// The thread.
    pub thread_id: String,
    /// The namespace: `""` for the root graph, `node:<task_id>` for a subgraph.
    pub checkpoint_ns: String,
    /// One checkpoint, or `None` for the latest.
    pub checkpoint_id: Option<CheckpointId>,
}

impl CheckpointConfig {
    /// The latest checkpoint of `thread_id` in the root namespace.
    pub fn new(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            checkpoint_ns: String::new(),
            checkpoint_id: None,
        }
    }

    /// The same address in namespace `ns`.
    pub fn with_ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = ns.into();
        self
    }

    /// The same address pinned to checkpoint `id`.
    pub fn with_checkpoint_id(mut self, id: impl Into<CheckpointId>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }

    /// LangGraph's JSON form: `{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut c = serde_json::Map::new();
        c.insert(THREAD_ID.into(), json!(self.thread_id));
        c.insert(CHECKPOINT_NS.into(), json!(self.checkpoint_ns));
        if let Some(id) = &self.checkpoint_id {
            c.insert(CHECKPOINT_ID.into(), json!(id));
        }
        json!({ "configurable": c })
    }
}

/// A database URL without its password (`postgres://u:***@host/db`), for error messages and
/// logs.
pub fn redact_url(url: &str) -> String {
    // The credentials are between the first `://` and the last `@` after it.
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((creds, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match creds.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The former, index-based `redact_url`: the rewrite must agree with it on every input.
    fn redact_url_by_index(url: &str) -> String {
        match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let creds = &url[scheme + 3..at];
                match creds.split_once(':') {
                    Some((user, _)) => {
                        format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
                    }
                    None => url.to_owned(),
                }
            }
            _ => url.to_owned(),
        }
    }

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
        assert_eq!(redact_url("a@b://c"), "a@b://c");
        assert_eq!(redact_url("mysql://u:p@w@h/db"), "mysql://u:***@h/db");
        assert_eq!(redact_url("sqlite:x.db"), "sqlite:x.db");
        assert_eq!(redact_url(""), "");
    }

    proptest! {
        #[test]
        fn redact_url_never_panics(url in any::<String>()) {
            let _ = redact_url(&url);
        }

        #[test]
        fn redact_url_is_unchanged(url in "([a-zé]{0,3}(://|:|@|/|é|€)?){0,6}") {
            prop_assert_eq!(redact_url(&url), redact_url_by_index(&url));
        }

        #[test]
        fn redact_url_hides_the_password(
            user in "[a-z]{1,8}",
            password in "[a-zA-Z0-9@:é€]{1,12}",
            host in "[a-z0-9.:/]{0,16}",
        ) {
            let url = format!("postgres://{user}:{password}@{host}");
            let redacted = redact_url(&url);
            prop_assert_eq!(&redacted, &format!("postgres://{user}:***@{host}"));
        }
    }
}
