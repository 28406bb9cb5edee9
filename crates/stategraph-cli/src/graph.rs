//! `stategraph graph`: a graph's drawing as Mermaid, or as LangGraph's drawing JSON — of a
//! graph `serve` serves, or of an assistant of any Agent Server (stategraph's or LangGraph's)
//! fetched from its `GET /assistants/{id}/graph`.

use stategraph::client::Client;
use stategraph::graph::{Topology, Xray};

use crate::{Failure, fail};

/// What `graph` draws and how.
#[derive(clap::Args, Debug)]
pub(crate) struct GraphArgs {
    /// With --url, an assistant of that server: its id, or a graph id for the graph's default
    /// assistant. Without, a graph `serve` serves: seed or sleep.
    #[arg(default_value = "seed")]
    assistant: String,
    /// The base URL of an Agent Server to ask for the drawing.
    #[arg(long)]
    url: Option<String>,
    /// The key sent in header `x-api-key` (with --url).
    #[arg(long, env = "STATEGRAPH_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Draw subgraphs into their parent: `all`, or how many levels down.
    #[arg(long, value_parser = parse_xray)]
    xray: Option<Xray>,
}

/// `all` (or `true`) for every level, else a depth.
fn parse_xray(text: &str) -> Result<Xray, String> {
    match text {
        "all" | "true" => Ok(Xray::All),
        depth => depth
            .parse::<u32>()
            .map(Xray::Depth)
            .map_err(|_| format!("`{depth}` is neither `all` nor a depth (0, 1, 2, …)")),
    }
}

/// The drawing `args` ask for: Mermaid text, or the drawing JSON with `json`.
pub(crate) async fn run(args: GraphArgs, json: bool) -> Result<String, Failure> {
    let xray = args.xray.unwrap_or_default();
    let drawing = match &args.url {
        Some(url) => fetch(url, &args.assistant, args.api_key.as_deref(), xray).await?,
        None => crate::serve::served_graph(&args.assistant)?.drawing(xray),
    };
    Ok(if json {
        drawing.to_json().to_string()
    } else {
        drawing.draw_mermaid()
    })
}

/// The drawing of `assistant` from the Agent Server at `url`.
async fn fetch(
    url: &str,
    assistant: &str,
    api_key: Option<&str>,
    xray: Xray,
) -> Result<Topology, Failure> {
    let mut client = Client::new(url).map_err(fail)?;
    if let Some(key) = api_key {
        client = client.api_key(key);
    }
    client.assistant_graph(assistant, xray).await.map_err(fail)
}
