//! An assistant's graph as the API shows it: its drawing, its schemas and its subgraphs.

use stategraph_graph::Xray;

use super::*;

impl GraphQuery {
    /// Reads `xray` as LangGraph's server reads it: absent or empty, `true`/`True`,
    /// `false`/`False`, or an integer above 0 (a depth); anything else is 422.
    pub(super) fn xray(&self) -> Result<Xray, ApiError> {
        match self.xray.as_deref() {
            None | Some("" | "false" | "False") => Ok(Xray::Off),
            Some("true" | "True") => Ok(Xray::All),
            Some(depth) => match depth.trim().parse::<i64>() {
                Ok(d) if d > 0 => Ok(Xray::Depth(u32::try_from(d).unwrap_or(u32::MAX))),
                _ => Err(ApiError::invalid("Invalid xray value")),
            },
        }
    }
}

/// `GET /assistants/{assistant_id}/graph`: the graph's nodes and edges, in LangGraph's
/// drawing JSON, its subgraphs drawn in as deep as `xray` says.
#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}/graph",
    operation_id = "get_assistants_graph",
    tag = "Assistants",
    params(GraphOrAssistant, GraphQuery),
    responses((status = 200, description = "The graph's nodes and edges.", body = serde_json::Value))
)]
pub(crate) async fn graph(
    axum::extract::State(state): Shared,
    GraphOrAssistant(id): GraphOrAssistant,
    Query(query): Query<GraphQuery>,
) -> Result<Json<Json_>, ApiError> {
    let assistant = assistant(&state, &id).await?;
    let xray = query.xray()?;
    let graph_id = assistant.graph_id.as_str();
    let graph = state
        .graphs
        .get(graph_id)
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let drawing = graph.drawing(xray);
    if graph.output_channel().is_some() {
        return Ok(Json(entrypoint_drawing(&drawing)));
    }
    Ok(Json(drawing.to_json()))
}

/// An entrypoint's drawing, as LangGraph draws the graph of a Functional API workflow (from
/// its channels: `__start__` triggers it, and what it returns may end it).
fn entrypoint_drawing(topology: &stategraph_graph::Topology) -> Json_ {
    let names = topology.nodes.iter().filter(|n| *n != START && *n != END);
    let mut nodes: Vec<Json_> = names
        .clone()
        .map(|n| json!({ "id": n, "type": "runnable", "data": { "name": n } }))
        .collect();
    nodes.extend([json!({ "id": START }), json!({ "id": END })]);
    let edges: Vec<Json_> = names
        .flat_map(|n| {
            [
                json!({ "source": START, "target": n }),
                json!({ "source": n, "target": END, "conditional": true }),
            ]
        })
        .collect();
    json!({ "nodes": nodes, "edges": edges })
}

/// A JSON Schema object with these keys, their types unknown (`{}`).
pub(super) fn object_schema(keys: &[String]) -> Json_ {
    let properties: Object = keys.iter().map(|k| (k.clone(), json!({}))).collect();
    json!({ "type": "object", "properties": properties })
}

/// The schemas of `graph` under LangGraph's keys: its state type's JSON Schema when the type
/// has one, else an object of its channels, their types unknown; for input and output, the
/// graph's input and output schemas where it has them (each its JSON Schema, else an object
/// of its keys), else the state's.
pub(super) fn schemas_of(graph: &dyn ServedGraph) -> Json_ {
    let state = state_schema(graph);
    let mut out = schemas_json(state);
    let [input, output] = graph.io_schemas();
    for (key, io) in [("input_schema", input), ("output_schema", output)] {
        if let (Some((keys, json)), Json_::Object(o)) = (io, &mut out) {
            o.insert(key.into(), json.unwrap_or_else(|| object_schema(&keys)));
        }
    }
    out
}

/// The JSON Schema of `graph`'s state: its type's own when it has one, else an object of its
/// channels, their types unknown.
pub(crate) fn state_schema(graph: &dyn ServedGraph) -> Json_ {
    graph
        .json_schema()
        .unwrap_or_else(|| object_schema(&graph.state_keys()))
}

/// `schema` as the input, output and state schemas.
pub(super) fn schemas_json(schema: Json_) -> Json_ {
    json!({
        "input_schema": schema,
        "output_schema": schema,
        "state_schema": schema,
        "config_schema": {},
        "context_schema": null,
    })
}

/// `GET /assistants/{assistant_id}/schemas`.
#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}/schemas",
    operation_id = "get_assistants_schemas",
    tag = "Assistants",
    params(AssistantId),
    responses((status = 200, description = "The graph's input, output, state, config and context JSON Schemas.", body = serde_json::Value))
)]
pub(crate) async fn schemas(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
) -> Result<Json<Json_>, ApiError> {
    let assistant = assistant(&state, &id).await?;
    let graph_id = assistant.graph_id.as_str();
    let graph = state
        .graphs
        .get(graph_id)
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let mut out = schemas_of(graph.as_ref());
    if let Some(o) = out.as_object_mut() {
        o.insert("graph_id".into(), json!(graph_id));
    }
    Ok(Json(out))
}

/// `GET /assistants/{assistant_id}/subgraphs`: each subgraph node's schemas, by node name
/// (`{}` when there are none).
#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}/subgraphs",
    operation_id = "get_assistants_subgraphs",
    tag = "Assistants",
    params(AssistantId),
    responses((status = 200, description = "Each subgraph's schemas, by node name.", body = serde_json::Value))
)]
pub(crate) async fn subgraphs(
    axum::extract::State(state): Shared,
    AssistantId(id): AssistantId,
) -> Result<Json<Json_>, ApiError> {
    let assistant = assistant(&state, &id).await?;
    let graph_id = assistant.graph_id.as_str();
    let graph = state
        .graphs
        .get(graph_id)
        .ok_or_else(|| ApiError::not_found(format!("Graph \"{graph_id}\" not found")))?;
    let out: Object = graph
        .subgraph_nodes()
        .into_iter()
        .map(|(name, keys)| (name, schemas_json(object_schema(&keys))))
        .collect();
    Ok(Json(Json_::Object(out)))
}
