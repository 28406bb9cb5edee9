//! Stored documents and search results.

use serde_json::Value as Json;

use super::{Namespace, Timestamp};

/// A stored document.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The document (always a JSON object).
    pub value: Json,
    /// Its key, unique within the namespace.
    pub key: String,
    /// Its namespace.
    pub namespace: Namespace,
    /// When it was first put (kept by later puts of the same key).
    pub created_at: Timestamp,
    /// When it was last put.
    pub updated_at: Timestamp,
}

impl Item {
    /// LangGraph's `Item.dict()`: the namespace as a list and the timestamps in ISO format.
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.to_iso(),
            "updated_at": self.updated_at.to_iso(),
        })
    }
}

/// A search result: the item and, for a semantic search, its similarity to the query.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchItem {
    /// The item.
    pub item: Item,
    /// Cosine similarity of the item's best-matching field to the query (higher is closer);
    /// `None` when the search had no query or the item has no vectors.
    pub score: Option<f64>,
}

impl std::ops::Deref for SearchItem {
    type Target = Item;
    fn deref(&self) -> &Item {
        &self.item
    }
}

impl SearchItem {
    /// [`Item::to_json`] plus `score`.
    pub fn to_json(&self) -> Json {
        let mut j = self.item.to_json();
        if let Json::Object(o) = &mut j {
            o.insert("score".into(), self.score.map_or(Json::Null, Json::from));
        }
        j
    }
}
