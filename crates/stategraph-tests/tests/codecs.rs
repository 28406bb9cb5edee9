//! Per-channel codecs (`stategraph::codec`) on every saver: a table channel stored in a
//! columnar format of its own and a bytes channel stored raw, both under their own tags; the
//! graph sees plain values; pending writes go through the codec too; and every failure —
//! a value the codec cannot take, data whose codec is not registered — is a typed error that
//! names the channel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stategraph::codec::{CODEC_EXT, Codec, CodecSaver, RawBytesCodec};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, SerdeError};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Row {
    city: String,
    temp: f64,
}

#[derive(State, Clone, Debug, Default)]
struct Report {
    #[reducer(append)]
    rows: Vec<Row>,
    raw: Blob,
}

/// Bytes stored as msgpack bin (what `RawBytesCodec` takes), not as an array of integers.
#[derive(Clone, Debug, Default, PartialEq)]
struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bytes(b) => Ok(Blob(b)),
            Value::Null => Ok(Blob::default()),
            other => Err(serde::de::Error::custom(format!(
                "expected bytes, got {other}"
            ))),
        }
    }
}

/// Stores a list of same-shaped maps column by column: `{column: [values…]}` in msgpack.
#[derive(Debug)]
struct Columnar;

impl Codec for Columnar {
    fn tag(&self) -> &str {
        "columns"
    }

    fn encode(&self, value: &Value) -> Result<Vec<u8>, SerdeError> {
        let bad = |m: &str| SerdeError::Shape {
            path: String::new(),
            message: format!("the columnar codec takes a list of maps: {m}"),
        };
        let rows = value.as_list().ok_or_else(|| bad("not a list"))?;
        let mut names: Vec<String> = Vec::new();
        let mut cells: Vec<Vec<Value>> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let row = row.as_map().ok_or_else(|| bad("a row is not a map"))?;
            if i == 0 {
                names = row
                    .iter()
                    .filter_map(|(k, _)| k.as_str().map(str::to_owned))
                    .collect();
                cells = vec![Vec::new(); names.len()];
            }
            for (name, column) in names.iter().zip(cells.iter_mut()) {
                let cell = row.get(name).cloned();
                column.push(cell.ok_or_else(|| bad("rows have different columns"))?);
            }
        }
        let mut columns = stategraph::Map::new();
        for (name, column) in names.into_iter().zip(cells) {
            columns.insert(name, Value::from(column));
        }
        Ok(stategraph::value::encode(&Value::Map(columns)))
    }

    fn decode(&self, data: &[u8]) -> Result<Value, SerdeError> {
        let bad = |m: String| SerdeError::Shape {
            path: String::new(),
            message: m,
        };
        let columns = stategraph::value::decode(data).map_err(|e| bad(e.to_string()))?;
        let columns = columns
            .as_map()
            .ok_or_else(|| bad("not a column map".into()))?;
        let len = columns
            .iter()
            .map(|(_, c)| c.as_list().map_or(0, |l| l.len()))
            .max()
            .unwrap_or(0);
        let rows = (0..len)
            .map(|i| {
                let mut row = stategraph::Map::new();
                for (name, col) in columns.iter() {
                    let cell = col.as_list().and_then(|c| c.get(i)).cloned();
                    row.insert(name.clone(), cell.unwrap_or_default());
                }
                Value::Map(row)
            })
            .collect();
        Ok(Value::List(rows))
    }
}

fn with_codecs(inner: Arc<dyn CheckpointSaver>) -> Arc<dyn CheckpointSaver> {
    Arc::new(
        CodecSaver::new(inner)
            .with_codec("rows", Arc::new(Columnar))
            .with_codec("raw", Arc::new(RawBytesCodec)),
    )
}

fn graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Report> {
    let mut g = StateGraph::<Report>::new();
    g.add_node("measure", |_s, _ctx| async {
        Ok(ReportUpdate::default()
            .rows([
                Row {
                    city: "Oslo".into(),
                    temp: -3.5,
                },
                Row {
                    city: "Lima".into(),
                    temp: 19.0,
                },
            ])
            .raw(Blob(vec![0, 255, 1, 254])))
    });
    g.add_edge(START, "measure").add_edge("measure", END);
    g.compile().unwrap().with_checkpointer(saver)
}

async fn tables_and_bytes_go_through_their_codecs(inner: Arc<dyn CheckpointSaver>) {
    let graph = graph(with_codecs(inner.clone()));
    let config = RunConfig::thread("codec");
    let start = ReportUpdate::default().rows([Row {
        city: "Pune".into(),
        temp: 31.0,
    }]);
    graph.invoke(start, config.clone()).await.unwrap();

    // The graph sees plain values.
    let state = graph.get_state(&config).await.unwrap();
    let report = Report::from_values(&state.values).unwrap();
    assert_eq!(report.rows.len(), 3);
    assert_eq!(report.rows[2].city, "Lima");
    assert_eq!(report.raw, Blob(vec![0, 255, 1, 254]));

    // The inner saver holds them under their codecs' tags.
    let stored = inner
        .get_tuple(&stategraph::CheckpointConfig::new("codec"))
        .await
        .unwrap()
        .unwrap();
    for (channel, tag) in [("rows", "columns"), ("raw", "raw")] {
        let Value::Ext(ext) = &stored.checkpoint.channel_values[channel] else {
            panic!("{channel} is stored plain");
        };
        assert_eq!(ext.code(), CODEC_EXT);
        let payload = ext.payload().unwrap();
        assert_eq!(payload.as_list().unwrap()[0], Value::from(tag));
    }

    // Reading without the codecs registered: a typed error naming the channel.
    let bare = graph_without_codecs(inner.clone());
    let err = bare.get_state(&config).await.unwrap_err().to_string();
    assert!(err.contains("rows") || err.contains("raw"), "{err}");
    assert!(err.contains("not registered"), "{err}");
}

fn graph_without_codecs(inner: Arc<dyn CheckpointSaver>) -> CompiledGraph<Report> {
    // Knows `raw` but not the columnar codec.
    graph(Arc::new(
        CodecSaver::new(inner).with_codec("raw", Arc::new(RawBytesCodec)),
    ))
}

async fn a_value_the_codec_cannot_take_is_an_error_naming_the_channel(
    inner: Arc<dyn CheckpointSaver>,
) {
    let saver = CodecSaver::new(inner).with_codec("raw", Arc::new(RawBytesCodec));
    let mut cp = stategraph::Checkpoint::empty();
    cp.channel_values
        .insert("raw".into(), Value::from("not bytes"));
    cp.channel_versions
        .insert("raw", saver.get_next_version(None));
    let meta = stategraph::CheckpointMetadata::new(stategraph::CheckpointSource::Input, -1);
    let err = saver
        .put(
            &stategraph::CheckpointConfig::new("bad"),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, stategraph::CheckpointError::Serialization { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("raw") && message.contains("stores bytes"),
        "{message}"
    );
    // Nothing was written.
    let none = saver
        .get_tuple(&stategraph::CheckpointConfig::new("bad"))
        .await
        .unwrap();
    assert!(none.is_none());
}

on_every_saver!(
    tables_and_bytes_go_through_their_codecs,
    a_value_the_codec_cannot_take_is_an_error_naming_the_channel
);
