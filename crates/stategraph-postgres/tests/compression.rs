//! The blob columns' compression: lz4 by default where the server has it, required or left
//! as the server's default when asked, applied again by a later set-up that asks otherwise.
//! (Python reading and writing lz4 columns: `stategraph-tests/tests/python_graph_interop.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_postgres::{BlobCompression, PostgresConfig};
use stategraph_testkit::postgres::{ScratchSchema, url};

/// Each blob column's `attcompression` ("" for the server's default, "l" for lz4).
async fn compression(schema: &ScratchSchema) -> Vec<String> {
    let client = schema.client().await;
    let mut out = Vec::new();
    for table in ["checkpoint_blobs", "checkpoint_writes"] {
        let row = client
            .query_one(
                "SELECT attcompression::text FROM pg_attribute \
                 WHERE attrelid = to_regclass($1) AND attname = 'blob'",
                &[&table],
            )
            .await
            .unwrap();
        out.push(row.get(0));
    }
    out
}

async fn connect(schema: &ScratchSchema, compression: BlobCompression) {
    PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(1)
        .compression(compression)
        .connect()
        .await
        .unwrap();
}

#[tokio::test]
async fn blob_columns_get_lz4_unless_asked_to_keep_the_servers_default() {
    let kept = ScratchSchema::new("sg_zdefault");
    connect(&kept, BlobCompression::ServerDefault).await;
    assert_eq!(compression(&kept).await, ["", ""]);

    // A later set-up with the default sets lz4 on the existing tables.
    connect(&kept, BlobCompression::default()).await;
    assert_eq!(compression(&kept).await, ["l", "l"]);
    // Keeping the server's default then changes nothing back.
    connect(&kept, BlobCompression::ServerDefault).await;
    assert_eq!(compression(&kept).await, ["l", "l"]);

    let required = ScratchSchema::new("sg_zlz4");
    connect(&required, BlobCompression::Lz4).await;
    assert_eq!(compression(&required).await, ["l", "l"]);
}
