//! The choices a run request makes by name (`if_not_exists`, `on_completion`,
//! `on_disconnect`; `multitask_strategy` is the run queue's own `Multitask`, `durability` the
//! engine's own `Durability`), typed: a name outside LangGraph's enum is refused with 422
//! naming the field, as the reference's schema refuses it.

use serde::{Deserialize, Serialize};

/// What a run on a thread that does not exist does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfNotExists {
    /// Create the thread.
    Create,
    /// Answer 404 (the default).
    Reject,
}

/// What becomes of a stateless run's thread when the run ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnCompletion {
    /// It is deleted (the default).
    #[default]
    Delete,
    /// It stays, as any thread.
    Keep,
}

/// What a run does when the client following it goes away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnDisconnect {
    /// It is cancelled.
    Cancel,
    /// It goes on (the default).
    #[default]
    Continue,
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_outside_the_enum_are_refused() {
        use stategraph_runs::Multitask;
        let m: Multitask = serde_json::from_str("\"rollback\"").unwrap();
        assert_eq!(m.as_str(), "rollback");
        let e = serde_json::from_str::<Multitask>("\"AAA\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant `AAA`"), "{e}");
        assert!(serde_json::from_str::<stategraph_graph::Durability>("\"later\"").is_err());
    }
}
