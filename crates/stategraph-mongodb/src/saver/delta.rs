//! `get_delta_channel_history` in pages: checkpoints are read newest first, 16 at a time, and
//! the parent chain is followed inside each page (on a linear history every document of a
//! page is on the chain), with one query for the page's writes of the wanted channels.

use std::collections::{BTreeMap, HashMap};

use mongodb::bson::{Document, doc};
use stategraph_checkpoint::delta::{DeltaChannelHistory, DeltaWalk};
use stategraph_checkpoint::{CheckpointConfig, Error, Location, PendingWrite, Result};

use super::MongoSaver;
use super::cursor::Find;
use super::docs::{bytes, opt_string, read_write, string};
use super::read::doc_key;

/// Checkpoints per page.
const PAGE: i64 = 16;

impl MongoSaver {
    /// Up to a page of a namespace's checkpoints, newest first, from `at` down (the newest
    /// of all without `at`), by id.
    async fn page(
        &self,
        thread: &str,
        ns: &str,
        at: Option<&str>,
    ) -> Result<HashMap<String, Document>> {
        let mut filter = doc! { "thread_id": thread, "checkpoint_ns": ns };
        if let Some(at) = at {
            filter.insert("checkpoint_id", doc! { "$lte": at });
        }
        let docs = self
            .find(filter)
            .sort(doc! { "checkpoint_id": -1 })
            .limit(PAGE)
            .projection(doc! { "_id": 0, "created_at": 0 })
            .all(&self.db, "reading delta channel history")
            .await?;
        let mut out = HashMap::new();
        for doc in docs {
            let (_, _, id) = doc_key(&doc)?;
            out.insert(id, doc);
        }
        Ok(out)
    }

    pub(super) async fn delta_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        if channels.is_empty() {
            return Ok(DeltaWalk::new(channels).finish());
        }
        let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
        let mut page = self
            .page(thread, ns, config.checkpoint_id.as_deref())
            .await?;
        let target = match &config.checkpoint_id {
            Some(id) => page.remove(id.as_str()),
            None => page
                .keys()
                .max()
                .cloned()
                .and_then(|newest| page.remove(&newest)),
        };
        let Some(target) = target else {
            return Ok(DeltaWalk::new(channels).finish());
        };
        let (_, _, target_id) = doc_key(&target)?;
        let loc = Location::checkpoint(thread, ns, &target_id);
        let mut walk = DeltaWalk::new(channels).below(&target_id);
        let mut next = opt_string(&target, "parent_checkpoint_id", &loc)?
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        while let Some(id) = next.take() {
            if walk.is_done() {
                break;
            }
            if !page.contains_key(&id) {
                page = self.page(thread, ns, Some(&id)).await?;
            }
            // The chain inside this page, nearest first.
            let mut chain = Vec::new();
            let mut cursor = Some(id);
            while let Some(id) = cursor.take() {
                let Some(doc) = page.remove(&id) else {
                    next = Some(id);
                    break;
                };
                let loc = Location::checkpoint(thread, ns, &id);
                cursor = opt_string(&doc, "parent_checkpoint_id", &loc)?
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned);
                chain.push((id, doc));
            }
            if chain.is_empty() {
                // The parent is not stored: the chain ends here.
                break;
            }
            let mut writes = self.channel_writes(thread, ns, &chain, channels).await?;
            for (id, doc) in chain {
                let loc = Location::checkpoint(thread, ns, &id);
                let tag = string(&doc, "type", &loc)?;
                let checkpoint = self
                    .serializer
                    .loads_checkpoint(tag, bytes(&doc, "checkpoint", &loc)?, None)
                    .map_err(|e| Error::serialization(loc.clone(), e))?;
                let pending = writes.remove(&id).unwrap_or_default();
                let values = &checkpoint.channel_values;
                if !walk.visit(&id, pending, |ch| values.get(ch).cloned()) || walk.is_done() {
                    next = None;
                    break;
                }
            }
        }
        Ok(walk.finish())
    }

    /// The writes of `channels` stored against the checkpoints of `chain`, decoded, by id.
    async fn channel_writes(
        &self,
        thread: &str,
        ns: &str,
        chain: &[(String, Document)],
        channels: &[String],
    ) -> Result<HashMap<String, Vec<PendingWrite>>> {
        let ids: Vec<&str> = chain.iter().map(|(id, _)| id.as_str()).collect();
        let filter = doc! {
            "thread_id": thread,
            "checkpoint_ns": ns,
            "checkpoint_id": { "$in": ids },
            "channel": { "$in": channels },
        };
        let docs = Find::new(self.writes.name(), filter)
            .all(&self.db, "reading delta channel history")
            .await?;
        let mut out: HashMap<String, Vec<PendingWrite>> = HashMap::new();
        for doc in docs {
            let (_, _, id) = doc_key(&doc)?;
            let loc = Location::checkpoint(thread, ns, &id);
            let write = read_write(self.serializer.as_ref(), &doc, &loc)?;
            out.entry(id).or_default().push(write);
        }
        Ok(out)
    }
}
