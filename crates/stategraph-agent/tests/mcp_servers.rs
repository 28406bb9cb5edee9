//! The MCP client against third-party MCP servers: PyPI's `mcp-server-time` and
//! `mcp-server-git` over stdio, npm's `@modelcontextprotocol/server-everything` over stdio
//! and streamable HTTP; a ReAct agent calling MCP tools, its thread read by Python LangGraph
//! and its tool messages compared with those langchain-mcp-adapters makes for the same calls.
//!
//! Needs the servers and the adapters (`scripts/mcp-servers.sh`, which `scripts/test.sh` runs
//! and which prints the directory to put in `STATEGRAPH_MCP_DIR`), Node.js, and the pinned
//! Python LangGraph (`STATEGRAPH_PYTHON`). Fails, never skips, without them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph_agent::mcp::{McpClient, McpServer, MultiServerMcpClient, ResourceData, ToolNames};
use stategraph_agent::{
    ChatOpenAi, Error, McpError, OpenAiConfig, Tool, ToolContext, ToolNode, create_react_agent,
};
use stategraph_checkpoint::value;
use stategraph_graph::RunConfig;
use stategraph_messages::{Message, ToolCall};
use stategraph_testkit::chat::{Answer, Call, ChatServer, last_role};
use stategraph_testkit::net::bounded;
use stategraph_testkit::python::{repo_root, run_python_json};

/// Where `scripts/mcp-servers.sh` installed the servers and the adapters.
fn mcp_dir() -> PathBuf {
    let dir = std::env::var_os("STATEGRAPH_MCP_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/stategraph/mcp"))
        })
        .unwrap_or_default();
    assert!(
        dir.join(".stategraph-stamp").is_file(),
        "the MCP servers are not installed in {}: run scripts/mcp-servers.sh (scripts/test.sh \
         does) and set STATEGRAPH_MCP_DIR to the directory it prints",
        dir.display()
    );
    dir
}

fn everything_js() -> PathBuf {
    mcp_dir().join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

fn time_server() -> McpServer {
    McpServer::stdio(
        mcp_dir().join("servers/bin/mcp-server-time"),
        ["--local-timezone", "UTC"],
    )
}

fn everything_stdio() -> McpServer {
    McpServer::stdio("node", [everything_js().into_os_string(), "stdio".into()])
}

/// The everything server as a child process that writes its pid to `pid_file` first (`sh`
/// execs node, so the pid is the server's).
fn everything_stdio_with_pid(pid_file: &Path) -> McpServer {
    McpServer::stdio(
        "sh",
        [
            "-c".to_owned(),
            format!(
                "echo $$ > '{}'; exec node '{}' stdio",
                pid_file.display(),
                everything_js().display()
            ),
        ],
    )
}

/// The everything server over streamable HTTP on a free loopback port, stopped when dropped.
struct HttpEverything {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn everything_http() -> HttpEverything {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the everything server (is Node.js installed?)");
    let server = HttpEverything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the everything server did not listen on port {port} within 20 s");
}

fn ctx() -> ToolContext {
    ToolContext::new("call", None)
}

/// The content blocks' JSON, without the random ids LangChain gives blocks (each checked to
/// be one).
fn blocks(content: &stategraph_checkpoint::Value) -> Json {
    let mut j = content.to_json();
    for b in j.as_array_mut().expect("a list of blocks") {
        let id = b.as_object_mut().unwrap().remove("id").expect("a block id");
        assert!(id.as_str().unwrap().starts_with("lc_"), "{id}");
    }
    j
}

fn tool<'a>(tools: &'a [Arc<dyn Tool>], name: &str) -> &'a Arc<dyn Tool> {
    tools.iter().find(|t| t.name() == name).unwrap_or_else(|| {
        panic!(
            "no tool {name} among {:?}",
            tools.iter().map(|t| t.name()).collect::<Vec<_>>()
        )
    })
}

#[tokio::test]
async fn the_time_server_over_stdio() {
    let client = McpClient::connect("time", time_server()).await.unwrap();
    let tools = client.tools().await.unwrap();
    let now = tool(&tools, "get_current_time");
    assert_eq!(now.parameters()["required"], json!(["timezone"]));
    assert!(!now.description().is_empty());

    let out = now
        .call(value!({"timezone": "Europe/Paris"}), ctx())
        .await
        .unwrap();
    let content = blocks(&out.content);
    assert_eq!(content.as_array().unwrap().len(), 1);
    let said: Json = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(said["timezone"], "Europe/Paris");
    // The server's structured content is the artifact, as the adapters keep it.
    assert_eq!(out.artifact.to_json()["structured_content"], said);

    let out = client
        .call_tool(
            "convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await
        .unwrap();
    let said = out.artifact.to_json()["structured_content"].clone();
    assert!(
        said["target"]["datetime"]
            .as_str()
            .unwrap()
            .contains("T21:00:00+09:00"),
        "{said}"
    );

    // A tool's own failure is an error result: the tool node answers with its words.
    let err = now
        .call(value!({"timezone": "Mars/Base"}), ctx())
        .await
        .unwrap_err();
    let Error::ToolResult { tool, message, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(tool, "get_current_time");
    assert!(message.contains("Invalid timezone"), "{message}");
    let answers = ToolNode::new(tools.clone())
        .run(
            &[ToolCall {
                name: "get_current_time".into(),
                args: value!({"timezone": "Mars/Base"}),
                id: Some("c1".into()),
            }],
            None,
        )
        .await
        .unwrap();
    let Message::Tool { fields, status, .. } = &answers[0] else {
        panic!("{:?}", answers[0])
    };
    assert_eq!(status, "error");
    assert!(
        blocks(&fields.content)[0]["text"]
            .as_str()
            .unwrap()
            .contains("Invalid timezone")
    );
}

#[tokio::test]
async fn the_git_server_on_a_repository_the_test_makes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main", "repo"]);
    std::fs::write(repo.join("notes.txt"), "first\n").unwrap();
    git(&["-C", "repo", "add", "notes.txt"]);
    git(&["-C", "repo", "commit", "-q", "-m", "Add the notes"]);
    std::fs::write(repo.join("notes.txt"), "first\nsecond\n").unwrap();

    let client = McpClient::connect(
        "git",
        McpServer::stdio(
            mcp_dir().join("servers/bin/mcp-server-git"),
            ["--repository".into(), repo.clone().into_os_string()],
        ),
    )
    .await
    .unwrap();
    let tools = client.tools().await.unwrap();
    let path = repo.to_str().unwrap();
    let text = |out: stategraph_agent::ToolOutput| {
        blocks(&out.content)[0]["text"].as_str().unwrap().to_owned()
    };
    let log = tool(&tools, "git_log")
        .call(value!({"repo_path": path}), ctx())
        .await
        .unwrap();
    assert!(text(log).contains("Message: Add the notes"));
    let status = tool(&tools, "git_status")
        .call(value!({"repo_path": path}), ctx())
        .await
        .unwrap();
    let status = text(status);
    assert!(
        status.contains("On branch main") && status.contains("notes.txt"),
        "{status}"
    );
    let diff = tool(&tools, "git_diff_unstaged")
        .call(value!({"repo_path": path}), ctx())
        .await
        .unwrap();
    assert!(text(diff).contains("+second"));
}

/// The everything server's tools, over one transport.
async fn everything_answers(client: Arc<McpClient>) {
    let tools = client.tools().await.unwrap();
    for name in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        tool(&tools, name);
    }
    let echo = tool(&tools, "echo")
        .call(value!({"message": "hi"}), ctx())
        .await
        .unwrap();
    assert_eq!(
        blocks(&echo.content),
        json!([{"type": "text", "text": "Echo: hi"}])
    );
    assert!(echo.artifact.is_null());
    let sum = tool(&tools, "get-sum")
        .call(value!({"a": 2, "b": 3}), ctx())
        .await
        .unwrap();
    assert_eq!(blocks(&sum.content)[0]["text"], "The sum of 2 and 3 is 5.");

    // An image result: text, the PNG as a base64 image block, text.
    let image = tool(&tools, "get-tiny-image")
        .call(value!({}), ctx())
        .await
        .unwrap();
    let content = blocks(&image.content);
    assert_eq!(content[0]["type"], "text");
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["mime_type"], "image/png");
    assert!(
        content[1]["base64"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo")
    );
    assert_eq!(content[2]["type"], "text");

    let structured = client
        .call_tool("get-structured-content", json!({"location": "Chicago"}))
        .await
        .unwrap();
    assert!(structured.artifact.to_json()["structured_content"]["temperature"].is_number());

    // Arguments the server's schema refuses: an error result naming what was wrong.
    let err = tool(&tools, "get-sum")
        .call(value!({"a": "two"}), ctx())
        .await
        .unwrap_err();
    let Error::ToolResult { message, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        message.contains("Invalid arguments for tool get-sum"),
        "{message}"
    );
    // Arguments that are not an object never reach the server.
    let err = client.call_tool("echo", json!([1])).await.unwrap_err();
    assert!(matches!(err, Error::ToolArgs { .. }), "{err}");
}

#[tokio::test]
async fn the_everything_server_over_stdio() {
    everything_answers(
        McpClient::connect("everything", everything_stdio())
            .await
            .unwrap(),
    )
    .await;
}

#[tokio::test]
async fn the_everything_server_over_streamable_http() {
    let server = everything_http().await;
    let client = McpClient::connect(
        "everything",
        McpServer::http(&server.url).header("X-Api-Key", "secret"),
    )
    .await
    .unwrap();
    everything_answers(client).await;
}

#[tokio::test]
async fn a_long_call_times_out_and_the_connection_stays() {
    let client = McpClient::connect(
        "everything",
        everything_stdio().timeout(Some(Duration::from_secs(2))),
    )
    .await
    .unwrap();
    let err = bounded(client.call_tool(
        "trigger-long-running-operation",
        json!({"duration": 20, "steps": 2}),
    ))
    .await
    .unwrap_err();
    let Error::Mcp(McpError::Timeout {
        server,
        request,
        after,
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!(
        (server.as_str(), request.as_str(), *after),
        (
            "everything",
            "tools/call trigger-long-running-operation",
            Duration::from_secs(2)
        )
    );
    assert_eq!(
        err.to_string(),
        "MCP server `everything`: tools/call trigger-long-running-operation took longer than 2s"
    );
    let echo = client
        .call_tool("echo", json!({"message": "still here"}))
        .await
        .unwrap();
    assert_eq!(blocks(&echo.content)[0]["text"], "Echo: still here");
}

fn pid_in(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap().trim().to_owned()
}

fn signal(sig: &str, pid: &str) {
    assert!(
        Command::new("kill")
            .args([sig, pid])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test]
async fn a_hung_server_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let client = McpClient::connect(
        "frozen",
        everything_stdio_with_pid(&pid_file).timeout(Some(Duration::from_secs(1))),
    )
    .await
    .unwrap();
    let pid = pid_in(&pid_file);
    signal("-STOP", &pid);
    let err = bounded(client.call_tool("echo", json!({"message": "anyone?"})))
        .await
        .unwrap_err();
    signal("-CONT", &pid);
    assert!(
        matches!(&err, Error::Mcp(McpError::Timeout { server, .. }) if server == "frozen"),
        "{err}"
    );
}

#[tokio::test]
async fn a_killed_server_is_an_error_naming_it_and_the_next_call_starts_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let client = McpClient::connect("doomed", everything_stdio_with_pid(&pid_file))
        .await
        .unwrap();
    let first = pid_in(&pid_file);
    let call = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            client
                .call_tool(
                    "trigger-long-running-operation",
                    json!({"duration": 25, "steps": 2}),
                )
                .await
        })
    };
    // Killed well inside the 25 s operation, however loaded the machine.
    tokio::time::sleep(Duration::from_secs(2)).await;
    signal("-KILL", &first);
    let err = bounded(call).await.unwrap().unwrap_err();
    let Error::Mcp(McpError::Closed {
        server, request, ..
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!(
        (server.as_str(), request.as_str()),
        ("doomed", "tools/call trigger-long-running-operation")
    );
    assert!(
        err.to_string().starts_with(
            "MCP server `doomed` closed the connection during tools/call trigger-long-running-operation"
        ),
        "{err}"
    );
    // The next call starts the server again.
    let echo = client
        .call_tool("echo", json!({"message": "back"}))
        .await
        .unwrap();
    assert_eq!(blocks(&echo.content)[0]["text"], "Echo: back");
    assert_ne!(pid_in(&pid_file), first);
}

#[tokio::test]
async fn a_server_that_cannot_start_is_a_connect_error() {
    let err = McpClient::connect("ghost", McpServer::stdio("/nonexistent/mcp-server", ["x"]))
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "MCP server `ghost`: cannot connect: cannot start `/nonexistent/mcp-server x`"
        ),
        "{err}"
    );
    // A process that exits at once: what it said on stderr is in the error.
    let err = McpClient::connect(
        "grumpy",
        McpServer::stdio("sh", ["-c", "echo 'no config file' >&2; exit 3"]),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no config file"), "{err}");
    let err = McpClient::connect("nowhere", McpServer::http("http://127.0.0.1:9/mcp"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Mcp(McpError::Connect { server, .. }) if server == "nowhere"),
        "{err}"
    );
}

#[tokio::test]
async fn the_tool_list_is_read_again_after_the_server_says_it_changed() {
    // The everything server registers more tools once the client is initialized and says so
    // with `notifications/tools/list_changed`.
    let client = McpClient::connect("everything", everything_stdio())
        .await
        .unwrap();
    let mut changes = client.tools_changed();
    bounded(changes.wait_for(|n| *n > 0)).await.unwrap();
    let tools = client.tools().await.unwrap();
    tool(&tools, "simulate-research-query");
}

#[tokio::test]
async fn a_changed_tool_list_replaces_the_one_read_before() {
    // A server on the official Python SDK that adds a tool when `unlock` is called, and says
    // so before it answers.
    let client = McpClient::connect(
        "vault",
        McpServer::stdio(
            mcp_dir().join("servers/bin/python"),
            [repo_root().join("scripts/interop/mcp_tools_change.py")],
        ),
    )
    .await
    .unwrap();
    let names = |tools: &[Arc<dyn Tool>]| {
        tools
            .iter()
            .map(|t| t.name().to_owned())
            .collect::<Vec<_>>()
    };
    let before = client.tools().await.unwrap();
    assert_eq!(names(&before), ["unlock"]);
    // Read once per connection: the same list until the server says it changed.
    assert_eq!(names(&client.tools().await.unwrap()), ["unlock"]);
    let mut changes = client.tools_changed();
    tool(&before, "unlock")
        .call(value!({}), ctx())
        .await
        .unwrap();
    bounded(changes.wait_for(|n| *n > 0)).await.unwrap();
    let after = client.tools().await.unwrap();
    assert_eq!(names(&after), ["unlock", "secret"]);
    let out = tool(&after, "secret")
        .call(value!({}), ctx())
        .await
        .unwrap();
    assert_eq!(blocks(&out.content)[0]["text"], "the secret is 42");
}

#[tokio::test]
async fn prompts_and_resources_of_the_everything_server() {
    let client = McpClient::connect("everything", everything_stdio())
        .await
        .unwrap();
    let prompts = client.list_prompts().await.unwrap();
    let args = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    let city = args.arguments.iter().find(|a| a.name == "city").unwrap();
    assert!(city.required);
    assert!(
        !args
            .arguments
            .iter()
            .find(|a| a.name == "state")
            .unwrap()
            .required
    );

    let messages = client
        .get_prompt("args-prompt", [("city", "Paris"), ("state", "Texas")])
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert!(
        matches!(messages[0], Message::Human(_)),
        "{:?}",
        messages[0]
    );
    assert_eq!(messages[0].text(), Some("What's weather in Paris, Texas?"));
    // A prompt with an embedded resource is not made of chat messages, as the adapters say.
    let err = client
        .get_prompt(
            "resource-prompt",
            [("resourceType", "Text"), ("resourceId", "1")],
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("has content of type resource, not text"),
        "{err}"
    );
    let err = client
        .get_prompt("no-such-prompt", Vec::<(String, String)>::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Mcp(McpError::Protocol { request, .. }) if request == "prompts/get no-such-prompt"),
        "{err}"
    );

    let resources = client.list_resources().await.unwrap();
    assert!(
        resources
            .iter()
            .any(|r| r.uri.starts_with("demo://resource/static/document/")),
        "{resources:?}"
    );
    let text = client
        .read_resource("demo://resource/dynamic/text/1")
        .await
        .unwrap();
    let ResourceData::Text(t) = &text[0].data else {
        panic!("{text:?}")
    };
    assert!(!t.is_empty());
    assert_eq!(text[0].uri, "demo://resource/dynamic/text/1");
    let blob = client
        .read_resource("demo://resource/dynamic/blob/1")
        .await
        .unwrap();
    let ResourceData::Bytes(b) = &blob[0].data else {
        panic!("{blob:?}")
    };
    assert!(!b.is_empty());
}

#[tokio::test]
async fn many_servers_prefix_their_tool_names_as_asked() {
    let both = |names| {
        MultiServerMcpClient::builder()
            .server("a", everything_stdio())
            .server("b", everything_stdio())
            .server("time", time_server())
            .tool_names(names)
            .connect()
    };
    let clients = both(ToolNames::AsGiven).await.unwrap();
    let err = clients.tools().await.err().unwrap();
    assert!(
        err.to_string()
            .starts_with("MCP tool name `echo` is offered by servers `a` and `b`"),
        "{err}"
    );
    let clients = both(ToolNames::PrefixOnClash).await.unwrap();
    let tools = clients.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert!(
        names.contains(&"a_echo") && names.contains(&"b_echo"),
        "{names:?}"
    );
    assert!(names.contains(&"get_current_time"), "{names:?}");
    let out = tool(&tools, "b_get-sum")
        .call(value!({"a": 1, "b": 1}), ctx())
        .await
        .unwrap();
    assert_eq!(blocks(&out.content)[0]["text"], "The sum of 1 and 1 is 2.");
    let clients = both(ToolNames::Prefixed).await.unwrap();
    let tools = clients.tools().await.unwrap();
    tool(&tools, "time_get_current_time");
    assert!(clients.client("time").is_some());

    let err = MultiServerMcpClient::builder()
        .server("x", time_server())
        .server("x", time_server())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid request: two MCP servers are named `x`"
    );
}

fn model(server: &ChatServer) -> ChatOpenAi {
    OpenAiConfig::new("replay")
        .base_url(server.base_url())
        .api_key("test-key")
        .build()
        .unwrap()
}

/// The tool calls the scripted model makes: an image, structured content, and arguments the
/// server refuses.
fn calls() -> Vec<Call> {
    vec![
        Call::new("call_image", "get-tiny-image", json!({})),
        Call::new(
            "call_weather",
            "get-structured-content",
            json!({"location": "New York"}),
        ),
        Call::new("call_bad", "get-sum", json!({"a": "two", "b": 2})),
    ]
}

/// A tool message as compared: without the message id (LangGraph gives one when it adds the
/// message to the thread) and the blocks' random ids; the structured weather varies from
/// call to call, so only its keys are kept.
fn comparable(mut m: Json) -> Json {
    let o = m.as_object_mut().unwrap();
    o.remove("id");
    for b in o["content"].as_array_mut().unwrap() {
        let id = b.as_object_mut().unwrap().remove("id").unwrap();
        assert!(id.as_str().unwrap().starts_with("lc_"));
    }
    if let Some(s) = o
        .get_mut("artifact")
        .and_then(|a| a.get_mut("structured_content"))
        .and_then(Json::as_object_mut)
    {
        for v in s.values_mut() {
            *v = Json::Null;
        }
    }
    if o["tool_call_id"] == "call_weather" {
        o["content"][0]["text"] = Json::Null;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_agent_calls_mcp_tools_as_python_agents_do() {
    let chat = ChatServer::start(|r| {
        if last_role(r) == "tool" {
            Answer::text("Here is what the tools said.")
        } else {
            Answer::calls(calls())
        }
    })
    .await;
    let servers = MultiServerMcpClient::builder()
        .server("everything", everything_stdio())
        .connect()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agent.sqlite");
    let saver = stategraph_sqlite::SqliteSaver::connect(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    let agent = create_react_agent(model(&chat), servers.tools().await.unwrap())
        .checkpointer(Arc::new(saver))
        .build()
        .unwrap();
    let out = agent
        .invoke(
            stategraph_agent::MessagesUpdate::messages([Message::human("Show me an image.")]),
            RunConfig::thread("mcp-1"),
        )
        .await
        .unwrap();
    assert_eq!(out.messages.len(), 6, "{:#?}", out.messages);
    assert_eq!(out.messages[5].text(), Some("Here is what the tools said."));
    // The model was told each tool's schema as the server gave it.
    let sent = &chat.requests()[0]["tools"];
    let sum = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "get-sum")
        .unwrap();
    assert_eq!(sum["function"]["parameters"]["required"], json!(["a", "b"]));

    // Python LangGraph reads the thread; its tool messages are what the adapters make.
    let read = run_python_json(
        [
            repo_root()
                .join("scripts/interop/read_messages.py")
                .into_os_string(),
            db.clone().into_os_string(),
            "mcp-1".into(),
        ],
        "",
    );
    let ours: Vec<Json> = serde_json::from_value::<Vec<Json>>(read)
        .unwrap()
        .into_iter()
        .filter(|m| m["type"] == "tool")
        .map(comparable)
        .collect();

    let python_calls: Vec<Json> = calls()
        .into_iter()
        .map(|c| json!({"name": c.name, "args": c.args, "id": c.id}))
        .collect();
    let mut adapters = Command::new(mcp_dir().join("adapters/bin/python"))
        .arg(repo_root().join("scripts/interop/mcp_adapters_call.py"))
        .arg("node")
        .arg(everything_js())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut adapters.stdin.take().unwrap(),
        serde_json::to_string(&python_calls).unwrap().as_bytes(),
    )
    .unwrap();
    let theirs = adapters.wait_with_output().unwrap();
    assert!(
        theirs.status.success(),
        "{}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    let theirs: Vec<Json> = serde_json::from_slice::<Vec<Json>>(&theirs.stdout)
        .unwrap()
        .into_iter()
        .map(comparable)
        .collect();
    assert_eq!(ours.len(), 3);
    assert_eq!(ours, theirs);
    assert_eq!(ours[2]["status"], "error");
    assert_eq!(ours[0]["content"][1]["type"], "image");
}
