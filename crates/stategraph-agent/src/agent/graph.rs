//! The graph `create_agent` builds: its nodes, in LangChain's order, and its edges.

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph_graph::{END, GraphError, IoSchema, START, StateGraph};

use super::Agent;
use super::middleware::{Hooks, Middleware};
use super::nodes::{self, Core, HookKind};
use super::state::{AgentState, Jump, MESSAGES, STRUCTURED_RESPONSE};
use crate::tool::Tool;
use crate::tool_node::ToolNode;

/// A node hook of one middleware: its node's name and the jumps it may ask for.
struct HookNode {
    name: String,
    jumps: Vec<Jump>,
}

fn hook_nodes(middleware: &[(Arc<dyn Middleware>, Hooks)], kind: HookKind) -> Vec<HookNode> {
    middleware
        .iter()
        .filter_map(|(m, hooks)| {
            let jumps = match kind {
                HookKind::BeforeAgent => hooks.before_agent.as_ref(),
                HookKind::BeforeModel => hooks.before_model.as_ref(),
                HookKind::AfterModel => hooks.after_model.as_ref(),
                HookKind::AfterAgent => hooks.after_agent.as_ref(),
            }?;
            Some(HookNode {
                name: format!("{}.{}", m.name(), kind.as_str()),
                jumps: jumps.clone(),
            })
        })
        .collect()
}

/// The agent's graph.
pub(super) fn build(agent: &Agent) -> Result<StateGraph<AgentState>, GraphError> {
    let mut names = BTreeSet::new();
    for m in &agent.middleware {
        if !names.insert(m.name()) {
            return Err(GraphError::InvalidGraph(format!(
                "two middleware are named `{}`: remove the duplicate middleware instance (or \
                 give each its own name)",
                m.name()
            )));
        }
    }
    let middleware: Vec<(Arc<dyn Middleware>, Hooks)> = agent
        .middleware
        .iter()
        .map(|m| (Arc::clone(m), m.hooks()))
        .collect();

    // The tools node runs the agent's tools and the middleware's; it exists if there are
    // any, or if a middleware wraps tool calls.
    let mut tools: Vec<Arc<dyn Tool>> = middleware.iter().flat_map(|(m, _)| m.tools()).collect();
    tools.extend(agent.tools.iter().cloned());
    let wraps_tools = middleware.iter().any(|(_, h)| h.wrap_tool_call);
    let tool_node = (!tools.is_empty() || wraps_tools).then(|| ToolNode::new(tools));
    let tool_strategy = agent
        .response_format
        .as_ref()
        .and_then(super::ResponseFormat::tool_strategy);
    let structured_tools: Vec<String> = tool_strategy
        .iter()
        .flat_map(|t| t.schemas.iter().map(|s| s.name.clone()))
        .collect();

    let before_agent = hook_nodes(&middleware, HookKind::BeforeAgent);
    let before_model = hook_nodes(&middleware, HookKind::BeforeModel);
    let after_model = hook_nodes(&middleware, HookKind::AfterModel);
    let after_agent = hook_nodes(&middleware, HookKind::AfterAgent);

    // The state: LangChain's keys and every middleware's.
    let mut schema = <AgentState as stategraph_graph::State>::schema();
    let mut input_keys = vec![MESSAGES.to_owned()];
    let mut output_keys = vec![MESSAGES.to_owned(), STRUCTURED_RESPONSE.to_owned()];
    for (m, _) in &middleware {
        for key in m.state_keys() {
            if key.input && !input_keys.contains(&key.name) {
                input_keys.push(key.name.clone());
            }
            if key.output && !output_keys.contains(&key.name) {
                output_keys.push(key.name.clone());
            }
            schema = schema.key(key.name, key.spec);
        }
    }
    let mut graph = StateGraph::<AgentState>::with_schema(schema);
    graph.set_input_schema(IoSchema::keys(input_keys));
    graph.set_output_schema(IoSchema::keys(output_keys));

    let core = Arc::new(Core {
        model: Arc::clone(&agent.model),
        tool_node: tool_node.clone(),
        default_tools: tool_node.iter().flat_map(|n| n.tools().cloned()).collect(),
        system_message: agent.system_message.clone(),
        response_format: agent.response_format.clone(),
        tool_strategy,
        model_wrappers: middleware
            .iter()
            .filter(|(_, h)| h.wrap_model_call)
            .map(|(m, _)| Arc::clone(m))
            .collect(),
        tool_wrappers: middleware
            .iter()
            .filter(|(_, h)| h.wrap_tool_call)
            .map(|(m, _)| Arc::clone(m))
            .collect(),
        name: agent.name.clone(),
    });

    // Nodes, in LangChain's order: the model, the tools, then each middleware's hooks.
    graph.add_node("model", nodes::model_node(Arc::clone(&core)));
    if tool_node.is_some() {
        graph.add_node("tools", nodes::tools_node(Arc::clone(&core)));
    }
    for (m, hooks) in &middleware {
        for kind in HookKind::ALL {
            if kind.declared(hooks) {
                graph.add_node(
                    format!("{}.{}", m.name(), kind.as_str()),
                    nodes::hook_node(Arc::clone(m), kind),
                );
            }
        }
    }

    // The anchors of the loop.
    let model = "model".to_owned();
    let entry = before_agent
        .first()
        .or(before_model.first())
        .map_or_else(|| model.clone(), |h| h.name.clone());
    let loop_entry = before_model
        .first()
        .map_or_else(|| model.clone(), |h| h.name.clone());
    let loop_exit = after_model
        .first()
        .map_or_else(|| model.clone(), |h| h.name.clone());
    let exit = after_agent
        .last()
        .map_or_else(|| END.to_owned(), |h| h.name.clone());
    let ends = Ends {
        loop_entry: loop_entry.clone(),
        exit: exit.clone(),
    };

    graph.add_edge(START, entry);
    if let Some(tool_node) = &tool_node {
        let direct = tool_node.tools().any(|t| t.return_direct());
        let mut to = vec![loop_entry.clone()];
        if direct || !structured_tools.is_empty() {
            to.push(exit.clone());
        }
        let route =
            nodes::tools_to_model(tool_node.clone(), structured_tools.clone(), ends.clone());
        graph
            .add_conditional_edges("tools", route)
            .name("tools_to_model")
            .path_map(to);
        let mut to = vec!["tools".to_owned(), exit.clone()];
        if agent.response_format.is_some()
            || loop_exit != "model"
            || !core.model_wrappers.is_empty()
        {
            to.push(loop_entry.clone());
        }
        let route = nodes::model_to_tools(structured_tools.clone(), ends.clone());
        graph
            .add_conditional_edges(loop_exit.as_str(), route)
            .name("model_to_tools")
            .path_map(dedup(to));
    } else if !structured_tools.is_empty() {
        graph
            .add_conditional_edges(loop_exit.as_str(), nodes::model_to_model(ends.clone()))
            .name("model_to_model")
            .path_map(dedup(vec![loop_entry.clone(), exit.clone()]));
    } else if loop_exit == "model" {
        graph.add_edge("model", exit.clone());
    } else if let Some(first) = after_model.first() {
        middleware_edge(&mut graph, first, &exit, &ends);
    }

    for pair in before_agent.windows(2) {
        if let [a, b] = pair {
            middleware_edge(&mut graph, a, &b.name, &ends);
        }
    }
    if let Some(last) = before_agent.last() {
        middleware_edge(&mut graph, last, &loop_entry, &ends);
    }
    for pair in before_model.windows(2) {
        if let [a, b] = pair {
            middleware_edge(&mut graph, a, &b.name, &ends);
        }
    }
    if let Some(last) = before_model.last() {
        middleware_edge(&mut graph, last, "model", &ends);
    }
    if let Some(last) = after_model.last() {
        graph.add_edge("model", last.name.clone());
        for pair in after_model.windows(2).rev() {
            if let [earlier, later] = pair {
                middleware_edge(&mut graph, later, &earlier.name, &ends);
            }
        }
    }
    for pair in after_agent.windows(2).rev() {
        if let [earlier, later] = pair {
            middleware_edge(&mut graph, later, &earlier.name, &ends);
        }
    }
    if let Some(first) = after_agent.first() {
        middleware_edge(&mut graph, first, END, &ends);
    }
    Ok(graph)
}

/// Where jumps lead: the loop's entry (`model`) and its exit (`end`).
#[derive(Clone, Debug)]
pub(super) struct Ends {
    pub(super) loop_entry: String,
    pub(super) exit: String,
}

impl Ends {
    /// The node a jump leads to.
    pub(super) fn resolve(&self, jump: Jump) -> String {
        match jump {
            Jump::Model => self.loop_entry.clone(),
            Jump::End => self.exit.clone(),
            Jump::Tools => "tools".to_owned(),
        }
    }
}

/// The edge out of a hook node: a plain edge to `default`, or, if the hook may jump, the
/// branch `jump_edge` (LangChain's `_add_middleware_edge`).
fn middleware_edge(
    graph: &mut StateGraph<AgentState>,
    hook: &HookNode,
    default: &str,
    ends: &Ends,
) {
    if hook.jumps.is_empty() {
        graph.add_edge(hook.name.clone(), default);
        return;
    }
    let mut to = vec![default.to_owned()];
    if hook.jumps.contains(&Jump::End) {
        to.push(ends.exit.clone());
    }
    if hook.jumps.contains(&Jump::Tools) {
        to.push("tools".to_owned());
    }
    if hook.jumps.contains(&Jump::Model) && hook.name != ends.loop_entry {
        to.push(ends.loop_entry.clone());
    }
    graph
        .add_conditional_edges(
            hook.name.clone(),
            nodes::jump_edge(default.to_owned(), ends.clone()),
        )
        .name("jump_edge")
        .path_map(dedup(to));
}

fn dedup(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}
