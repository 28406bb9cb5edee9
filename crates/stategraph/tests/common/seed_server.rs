//! The seed graph served over the Agent Server API on a free loopback port, for the SDK tests.

use stategraph::prelude::*;
use stategraph::server::Server;

#[derive(State, Clone, Debug, Default)]
pub(crate) struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

/// START → node_a (`foo: "a"`, `bar: ["a"]`) → node_b (`foo: "b"`, `bar: ["b"]`) → END.
pub(crate) fn seed_graph() -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap()
}

/// The seed graph served as `seed` on a fresh SQLite file (checkpoints and the server's
/// records), listening on a free loopback port: its base URL, the serving task (abort it to
/// stop) and the directory to keep alive.
pub(crate) async fn serve_seed() -> (
    String,
    tokio::task::JoinHandle<std::io::Result<()>>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("server.sqlite").display());
    let server = Server::builder()
        .graph("seed", seed_graph())
        .checkpointer(stategraph::open_saver(&url).await.unwrap())
        .store(
            stategraph::open_store(&url, StoreOptions::new())
                .await
                .unwrap(),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    (base, tokio::spawn(server.serve(listener)), dir)
}
