//! The choices a run request makes by name (`multitask_strategy`, `if_not_exists`,
//! `on_completion`, `on_disconnect`; `durability` is the engine's own `Durability`), typed: a name outside LangGraph's enum
//! is refused with 422 naming the field, as the reference's schema refuses it.

use serde::{Deserialize, Serialize};

use crate::app::CancelAction;

/// What a new run does to the runs already pending or running on its thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Multitask {
    /// Refuse the new run while the thread is busy (409).
    Reject,
    /// Queue it behind them (the default).
    #[default]
    Enqueue,
    /// Cancel them, keeping what they checkpointed.
    Interrupt,
    /// Cancel them and delete them with their checkpoints.
    Rollback,
}

impl Multitask {
    /// Its name in the API.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
            Multitask::Rollback => "rollback",
        }
    }

    /// How the runs in flight are cancelled, if they are.
    pub(crate) fn cancel_action(self) -> Option<CancelAction> {
        match self {
            Multitask::Interrupt => Some(CancelAction::Interrupt),
            Multitask::Rollback => Some(CancelAction::Rollback),
            Multitask::Reject | Multitask::Enqueue => None,
        }
    }
}

/// What a run on a thread that does not exist does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfNotExists {
    /// Create the thread.
    Create,
    /// Answer 404 (the default).
    Reject,
}

/// What becomes of a stateless run's thread when the run ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnCompletion {
    /// It is deleted (the default).
    #[default]
    Delete,
    /// It stays, as any thread.
    Keep,
}

/// What a run does when the client following it goes away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    use super::*;

    #[test]
    fn names_outside_the_enum_are_refused() {
        let m: Multitask = serde_json::from_str("\"rollback\"").unwrap();
        assert_eq!(m.as_str(), "rollback");
        let e = serde_json::from_str::<Multitask>("\"AAA\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant `AAA`"), "{e}");
        assert!(serde_json::from_str::<stategraph_graph::Durability>("\"later\"").is_err());
    }
}
