//! Test support shared by the stategraph crates' tests (not published): servers that
//! misbehave on loopback, for the tests that prove no call waits forever.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let silent = stategraph_testkit::net::SilentServer::start().await;
//! let stream = tokio::net::TcpStream::connect(silent.addr()).await.unwrap();
//! drop(stream); // accepted, never answered
//! # });
//! ```

pub mod net;
