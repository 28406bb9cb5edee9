//! The weather agent of the agent tests: a tool `get_weather` ("Sunny in CITY") and a
//! loopback model that calls it for the last word of a question and, after the tool, answers
//! `"{prefix}{the tool's words}"`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use stategraph::agent::{ChatOpenAi, OpenAiConfig, Tool, tool};
use stategraph_testkit::chat::{Answer, Call, ChatServer, last_role};

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

/// `get_weather`: "Sunny in CITY".
pub(crate) fn weather_tool() -> Arc<dyn Tool> {
    Arc::new(tool(
        "get_weather",
        "Today's weather in a city.",
        |c: City, _ctx| async move { Ok::<_, std::convert::Infallible>(format!("Sunny in {}", c.city)) },
    ))
}

/// The model server (keep it alive) and a client of it. Call ids are `{id_prefix}{n}`, n
/// the number of messages the model was sent.
pub(crate) async fn weather_model(
    answer_prefix: &'static str,
    id_prefix: &'static str,
) -> (ChatServer, ChatOpenAi) {
    let server = ChatServer::start(move |r| {
        let messages = r["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        if last_role(r) == "tool" {
            Answer::text(&format!("{answer_prefix}{last}"))
        } else {
            let city = last.trim_end_matches('?').rsplit(' ').next().unwrap();
            Answer::calls(vec![Call::new(
                &format!("{id_prefix}{}", messages.len()),
                "get_weather",
                json!({"city": city}),
            )])
        }
    })
    .await;
    let model = OpenAiConfig::new("replay")
        .base_url(server.base_url())
        .build()
        .unwrap();
    (server, model)
}
