//! How backends run a batch: validation, query embedding and grouping into steps.

use std::collections::{BTreeSet, HashMap};

use super::path::FieldPath;
use super::{
    GetOp, IndexConfig, IndexFields, ListNamespacesOp, Namespace, Op, PutOp, SearchOp, StoreError,
    filter,
};

/// Checks a namespace: labels non-empty, without `.` or NUL; for a put also non-empty and not
/// under the reserved root `langgraph`.
pub fn validate_namespace(namespace: &[String], for_put: bool) -> Result<(), StoreError> {
    let bad = |reason: String| StoreError::InvalidNamespace {
        namespace: namespace.to_vec(),
        reason,
    };
    if for_put && namespace.is_empty() {
        return Err(bad("a put needs a non-empty namespace".into()));
    }
    for (i, label) in namespace.iter().enumerate() {
        if label.is_empty() {
            return Err(bad(format!("label {i} is empty")));
        }
        if label.contains('.') {
            return Err(bad(format!("label {i} ({label:?}) contains `.`")));
        }
        if label.contains('\0') {
            return Err(bad(format!("label {i} contains a NUL character")));
        }
    }
    if for_put && namespace.first().is_some_and(|l| l == "langgraph") {
        return Err(bad("the root label `langgraph` is reserved".into()));
    }
    Ok(())
}

/// A read op of a batch, a search's query already embedded.
#[derive(Debug)]
pub enum ReadOp {
    /// A get.
    Get(GetOp),
    /// A search, with its `query` embedded when the store has an index.
    Search(SearchOp, Option<Vec<f32>>),
    /// A list-namespaces.
    ListNamespaces(ListNamespacesOp),
}

/// One step of a batch as backends run it, in the batch's order.
#[derive(Debug)]
pub enum BatchStep {
    /// Consecutive puts, applied together.
    Puts {
        /// One put per address (the last one given for it), in the order the addresses
        /// first appear.
        ops: Vec<PutOp>,
        /// How many puts the batch gave (one `OpResult::Put` is due for each).
        given: usize,
    },
    /// Consecutive reads; each yields one result.
    Reads(Vec<ReadOp>),
}

/// Prepares a batch for a backend: validates every op ([`validate_ops`]), embeds the search
/// queries (before any database work, so no transaction waits on the model), and groups the
/// ops into [`BatchStep`]s.
pub async fn plan_batch(
    ops: Vec<Op>,
    index: Option<&IndexConfig>,
) -> Result<Vec<BatchStep>, StoreError> {
    validate_ops(&ops)?;
    let mut steps: Vec<BatchStep> = Vec::new();
    let mut positions: HashMap<(Namespace, String), usize> = HashMap::new();
    for op in ops {
        match op {
            Op::Put(put) => {
                if !matches!(steps.last(), Some(BatchStep::Puts { .. })) {
                    steps.push(BatchStep::Puts {
                        ops: Vec::new(),
                        given: 0,
                    });
                    positions.clear();
                }
                if let Some(BatchStep::Puts { ops, given }) = steps.last_mut() {
                    *given += 1;
                    let address = (put.namespace.clone(), put.key.clone());
                    match positions.get(&address) {
                        Some(&i) => {
                            if let Some(slot) = ops.get_mut(i) {
                                *slot = put;
                            }
                        }
                        None => {
                            positions.insert(address, ops.len());
                            ops.push(put);
                        }
                    }
                }
            }
            Op::Get(get) => push_read(&mut steps, ReadOp::Get(get)),
            Op::ListNamespaces(list) => push_read(&mut steps, ReadOp::ListNamespaces(list)),
            Op::Search(search) => {
                let query = match (&search.query, index) {
                    (Some(q), Some(index)) => Some(index.embed_query(q).await?),
                    _ => None,
                };
                push_read(&mut steps, ReadOp::Search(search, query));
            }
        }
    }
    Ok(steps)
}

fn push_read(steps: &mut Vec<BatchStep>, read: ReadOp) {
    match steps.last_mut() {
        Some(BatchStep::Reads(reads)) => reads.push(read),
        _ => steps.push(BatchStep::Reads(vec![read])),
    }
}

/// Validates every op of a batch before anything runs: namespaces, put values, filters and
/// index paths. Backends call it first so a bad batch changes nothing.
pub fn validate_ops(ops: &[Op]) -> Result<(), StoreError> {
    for op in ops {
        match op {
            Op::Get(g) => validate_namespace(&g.namespace, false)?,
            Op::Search(s) => {
                validate_namespace(&s.namespace_prefix, false)?;
                if let Some(f) = &s.filter {
                    filter::parse_filter(f)?;
                }
            }
            Op::Put(p) => {
                validate_namespace(&p.namespace, true)?;
                if let Some(v) = &p.value
                    && !v.is_object()
                {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: "a stored value must be a JSON object".into(),
                    });
                }
                if p.ttl.is_some_and(|ttl| ttl.is_zero()) {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: "ttl must be longer than zero".into(),
                    });
                }
                if let IndexFields::Fields(fs) = &p.index {
                    for f in fs {
                        FieldPath::parse(f)?;
                    }
                }
            }
            Op::ListNamespaces(l) => {
                for c in &l.match_conditions {
                    validate_namespace(
                        &c.path
                            .iter()
                            .filter(|l| *l != "*")
                            .cloned()
                            .collect::<Vec<_>>(),
                        false,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Orders and pages the namespaces of a [`ListNamespacesOp`]: filter, truncate to
/// `max_depth`, deduplicate, sort label by label, then offset and limit. Backends that list
/// distinct namespaces in SQL finish with this.
pub fn finish_list_namespaces(
    namespaces: impl IntoIterator<Item = Namespace>,
    op: &ListNamespacesOp,
) -> Vec<Namespace> {
    let set: BTreeSet<Namespace> = namespaces
        .into_iter()
        .filter(|ns| op.match_conditions.iter().all(|c| c.matches(ns)))
        .map(|mut ns| {
            if let Some(d) = op.max_depth {
                ns.truncate(d);
            }
            ns
        })
        .collect();
    set.into_iter().skip(op.offset).take(op.limit).collect()
}
