//! Assistants and their versions, as the store keeps them.

use serde::{Deserialize, Serialize};
use stategraph_checkpoint::now_iso;

use super::{Kind, Object, Record, nullable};

/// An assistant, as `GET /assistants/{assistant_id}` answers it.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Assistant)]
pub(crate) struct AssistantRecord {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) context: Object,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default = "first_version")]
    pub(crate) version: u64,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Fields kept as they were given.
    #[serde(flatten)]
    pub(crate) extra: Object,
}

fn first_version() -> u64 {
    1
}

impl Record for AssistantRecord {
    const KIND: Kind = Kind::Assistant;
    fn key(&self) -> String {
        self.assistant_id.clone()
    }
}

impl AssistantRecord {
    /// A new assistant, at version 1.
    pub(crate) fn new(assistant_id: String, graph_id: String, name: String) -> Self {
        let now = now_iso();
        Self {
            assistant_id,
            graph_id,
            config: Object::new(),
            context: Object::new(),
            created_at: now.clone(),
            updated_at: now,
            metadata: Object::new(),
            version: 1,
            name,
            description: None,
            extra: Object::new(),
        }
    }

    /// Its current fields as its version `version` (created now).
    pub(crate) fn as_version(&self, version: u64) -> AssistantVersion {
        AssistantVersion {
            assistant_id: self.assistant_id.clone(),
            graph_id: self.graph_id.clone(),
            config: self.config.clone(),
            context: self.context.clone(),
            metadata: self.metadata.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            version,
            created_at: now_iso(),
        }
    }

    /// Makes `version` its current one.
    pub(crate) fn restore(&mut self, version: &AssistantVersion) {
        self.graph_id.clone_from(&version.graph_id);
        self.config.clone_from(&version.config);
        self.context.clone_from(&version.context);
        self.metadata.clone_from(&version.metadata);
        self.name.clone_from(&version.name);
        self.description.clone_from(&version.description);
        self.version = version.version;
        self.updated_at = now_iso();
    }
}

/// One version of an assistant, as `POST /assistants/{assistant_id}/versions` lists them.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) struct AssistantVersion {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) context: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    pub(crate) version: u64,
    pub(crate) created_at: String,
}

impl Record for AssistantVersion {
    const KIND: Kind = Kind::AssistantVersion;
    fn key(&self) -> String {
        version_key(&self.assistant_id, self.version)
    }
}

/// The key of version `version` of assistant `assistant_id`.
pub(crate) fn version_key(assistant_id: &str, version: u64) -> String {
    format!("{assistant_id}:{version}")
}
