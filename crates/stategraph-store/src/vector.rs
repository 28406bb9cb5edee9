//! Semantic search: the index configuration, which vectors a put recomputes, and similarity.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use super::path::{self, FieldPath};
use super::{EmbeddingError, Embeddings, IndexFields, StoreError};

/// Semantic-search configuration (LangGraph's `IndexConfig`).
#[derive(Clone)]
pub struct IndexConfig {
    /// Vector length.
    pub dims: usize,
    /// The model.
    pub embed: Arc<dyn Embeddings>,
    /// Paths embedded by default (`["$"]`: the whole document).
    pub fields: Vec<String>,
}

impl fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("embed", &self.embed)
            .field("fields", &self.fields)
            .finish()
    }
}

impl IndexConfig {
    /// `dims`-dimensional vectors from `embed`, of the whole document.
    pub fn new(dims: usize, embed: Arc<dyn Embeddings>) -> Self {
        Self {
            dims,
            embed,
            fields: vec!["$".into()],
        }
    }

    /// Embed these paths by default instead of the whole document.
    pub fn with_fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the configured paths.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.dims == 0 {
            return Err(StoreError::InvalidConfig(
                "index dims must be at least 1".into(),
            ));
        }
        for f in &self.fields {
            FieldPath::parse(f)?;
        }
        Ok(())
    }

    /// The parsed paths a put embeds, or none for `index: false`.
    pub fn paths_for(&self, index: &IndexFields) -> Result<Vec<FieldPath>, StoreError> {
        match index {
            IndexFields::Disabled => Ok(Vec::new()),
            IndexFields::Default => self.fields.iter().map(|f| FieldPath::parse(f)).collect(),
            IndexFields::Fields(fs) => fs.iter().map(|f| FieldPath::parse(f)).collect(),
        }
    }

    /// Embeds `texts` (deduplicated, in one call), checking count and dimensions.
    pub async fn embed_texts(
        &self,
        texts: &[String],
    ) -> Result<BTreeMap<String, Vec<f32>>, StoreError> {
        let distinct: Vec<String> = texts
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if distinct.is_empty() {
            return Ok(BTreeMap::new());
        }
        let vectors = self.embed.embed_documents(&distinct).await?;
        if vectors.len() != distinct.len() {
            return Err(EmbeddingError::Count {
                expected: distinct.len(),
                got: vectors.len(),
            }
            .into());
        }
        for v in &vectors {
            self.check_dims(v)?;
        }
        Ok(distinct.into_iter().zip(vectors).collect())
    }

    /// Embeds a search query.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, StoreError> {
        let v = self.embed.embed_query(query).await?;
        self.check_dims(&v)?;
        Ok(v)
    }

    fn check_dims(&self, v: &[f32]) -> Result<(), StoreError> {
        if v.len() != self.dims {
            return Err(EmbeddingError::Dimensions {
                expected: self.dims,
                got: v.len(),
            }
            .into());
        }
        Ok(())
    }
}

/// Which vectors a put must (re)compute, given what the stored item had.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorPlan {
    /// `(field_name, text)` to embed and upsert.
    pub embed: Vec<(String, String)>,
    /// Field names whose stored vectors stay as they are.
    pub keep: Vec<String>,
}

impl VectorPlan {
    /// Plans a put of `new_value` with `paths`, over the stored `old_value` whose vectors
    /// exist for `old_fields`: a field is re-embedded only if it had no vector or its text
    /// changed. Every stored vector not in `embed` or `keep` must be deleted.
    pub fn new(
        new_value: &Json,
        paths: &[FieldPath],
        old: Option<(&Json, &BTreeSet<String>)>,
    ) -> Self {
        let wanted = path::texts_to_embed(new_value, paths);
        let old_texts: BTreeMap<String, String> = match old {
            Some((v, _)) => path::texts_to_embed(v, paths).into_iter().collect(),
            None => BTreeMap::new(),
        };
        let mut plan = Self::default();
        for (field, text) in wanted {
            let unchanged = old.is_some_and(|(_, fields)| fields.contains(&field))
                && old_texts.get(&field) == Some(&text);
            if unchanged {
                plan.keep.push(field);
            } else {
                plan.embed.push((field, text));
            }
        }
        plan
    }
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
