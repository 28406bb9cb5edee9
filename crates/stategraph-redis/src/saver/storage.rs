//! Reading and removing one checkpoint's keys; ids and namespaces of a thread.

use super::*;

impl RedisSaver {
    /// Loads one checkpoint (and its writes), or `None` if its hash is gone.
    pub(super) async fn load(
        &self,
        thread: &str,
        ns: &str,
        id: &str,
    ) -> Result<Option<CheckpointTuple>> {
        let mut conn = self.conn.clone();
        let (fields, writes): (Vec<Option<Vec<u8>>>, HashFields) = redis::pipe()
            .cmd("HMGET")
            .arg(self.cp_key(thread, ns, id))
            .arg("type")
            .arg("checkpoint")
            .arg("metadata")
            .arg("parent")
            .hgetall(self.w_key(thread, ns, id))
            .query_async(&mut conn)
            .await
            .map_err(db("reading a checkpoint"))?;
        let loc = Location::checkpoint(thread, ns, id);
        let [tag, body, meta, parent] = <[Option<Vec<u8>>; 4]>::try_from(fields).map_err(|_| {
            Error::backend(BACKEND, "reading a checkpoint", "unexpected reply shape")
        })?;
        let (Some(tag), Some(body)) = (tag, body) else {
            return Ok(None);
        };
        let tag = utf8(tag, &loc, "type")?;
        let checkpoint = self
            .serializer
            .loads_checkpoint(&tag, &body, None)
            .map_err(|e| Error::serialization(loc.clone(), e))?;
        let metadata = self.metadata(meta, &loc)?;
        let mut pending = Vec::with_capacity(writes.len());
        for (field, raw) in writes {
            pending.push(self.decode_write(&loc, &field, &raw)?);
        }
        let parent = parent
            .map(|p| utf8(p, &loc, "parent"))
            .transpose()?
            .map(Into::into);
        Ok(Some(CheckpointTuple::from_parts(
            thread, ns, id, parent, checkpoint, metadata, pending,
        )))
    }

    /// A checkpoint's stored metadata (JSON text), read strictly.
    pub(super) fn metadata(
        &self,
        stored: Option<Vec<u8>>,
        loc: &Location,
    ) -> Result<CheckpointMetadata> {
        let Some(bytes) = stored else {
            return Ok(CheckpointMetadata::default());
        };
        let text = utf8(bytes, loc, "metadata")?;
        let json = backend::json_from_text(&text, loc.clone().part("metadata"))?;
        backend::metadata_from_json(json, loc)
    }

    /// A write is stored as the msgpack array `[task_path, channel, type, bytes]` under the
    /// field `{task_id}\x1f{idx}`.
    pub(super) fn decode_write(
        &self,
        loc: &Location,
        field: &str,
        raw: &[u8],
    ) -> Result<PendingWrite> {
        let at = loc.clone().part("write");
        let bad = |message: String| backend::shape_error(at.clone(), field, message);
        let (task_id, idx) = field
            .rsplit_once('\u{1f}')
            .ok_or_else(|| bad("the field is not `{task_id}\\x1f{idx}`".to_owned()))?;
        let idx: i64 = idx
            .parse()
            .map_err(|_| bad(format!("index `{idx}` is not an integer")))?;
        let parts = decode(raw).map_err(|source| {
            Error::serialization(
                at.clone().task(task_id),
                SerdeError::Decode {
                    tag: "write".into(),
                    source,
                },
            )
        })?;
        let list = parts.as_list().unwrap_or(&[]);
        let (Some(path), Some(channel), Some(tag), Some(Value::Bytes(bytes)), 4) = (
            list.first().and_then(Value::as_str),
            list.get(1).and_then(Value::as_str),
            list.get(2).and_then(Value::as_str),
            list.get(3),
            list.len(),
        ) else {
            return Err(bad(
                "not the array [task_path, channel, type, bytes]".to_owned()
            ));
        };
        let value = self
            .serializer
            .loads_typed(tag, bytes)
            .map_err(|e| Error::serialization(at.clone().channel(channel).task(task_id), e))?;
        Ok(PendingWrite {
            task_id: task_id.to_owned(),
            channel: channel.to_owned(),
            value,
            task_path: path.to_owned(),
            idx,
        })
    }

    /// Ids of a namespace, newest first, below `before` if given.
    pub(super) async fn ids(
        &self,
        thread: &str,
        ns: &str,
        before: Option<&str>,
    ) -> Result<Vec<String>> {
        let mut conn = self.conn.clone();
        let max = before.map_or_else(|| "+".to_owned(), |b| format!("({b}"));
        redis::cmd("ZRANGE")
            .arg(self.idx_key(thread, ns))
            .arg(max)
            .arg("-")
            .arg("BYLEX")
            .arg("REV")
            .query_async(&mut conn)
            .await
            .map_err(db("listing checkpoints"))
    }

    /// The newest id of a namespace (one sorted-set lookup, whatever its size).
    pub(super) async fn latest_id(&self, thread: &str, ns: &str) -> Result<Option<String>> {
        let mut conn = self.conn.clone();
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.idx_key(thread, ns))
            .arg("+")
            .arg("-")
            .arg("BYLEX")
            .arg("REV")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(&mut conn)
            .await
            .map_err(db("finding the latest checkpoint"))?;
        Ok(ids.into_iter().next())
    }

    pub(super) async fn namespaces(&self, thread: &str) -> Result<Vec<String>> {
        let mut conn = self.conn.clone();
        conn.smembers(self.ns_key(thread))
            .await
            .map_err(db("listing namespaces"))
    }

    /// Every key of a thread.
    pub(super) async fn thread_keys(&self, thread: &str) -> Result<Vec<String>> {
        let mut keys = vec![self.ns_key(thread)];
        for ns in self.namespaces(thread).await? {
            keys.push(self.idx_key(thread, &ns));
            for id in self.ids(thread, &ns, None).await? {
                keys.push(self.cp_key(thread, &ns, &id));
                keys.push(self.w_key(thread, &ns, &id));
            }
        }
        Ok(keys)
    }

    pub(super) async fn remove_checkpoint(&self, thread: &str, ns: &str, id: &str) -> Result<()> {
        let mut conn = self.conn.clone();
        redis::pipe()
            .atomic()
            .del(self.cp_key(thread, ns, id))
            .del(self.w_key(thread, ns, id))
            .zrem(self.idx_key(thread, ns), id)
            .query_async::<()>(&mut conn)
            .await
            .map_err(db("deleting a checkpoint"))
    }
}
