//! Run with `cargo run -p stategraph --example routing`.
//!
//! The ways a graph chooses its path: a conditional edge with a path map, a fan-out to two
//! parallel nodes and a join that waits for both, and a node that returns a `Command`
//! (update + where to go).

use stategraph::graph::Command;
use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Ticket {
    text: String,
    urgent: bool,
    #[reducer(append)]
    trail: Vec<String>,
}

fn step(name: &'static str) -> TicketUpdate {
    TicketUpdate::default().trail([name])
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), stategraph::Error> {
    let mut g = StateGraph::<Ticket>::new();
    g.add_node("classify", |s, _c| async move {
        Ok(step("classify").urgent(s.text.contains("down")))
    });
    g.add_node("page_oncall", |_s, _c| async { Ok(step("page_oncall")) });
    g.add_node("open_incident", |_s, _c| async {
        Ok(step("open_incident"))
    });
    g.add_node("notify_team", |_s, _c| async { Ok(step("notify_team")) });
    g.add_node("postmortem", |_s, _c| async { Ok(step("postmortem")) });
    g.add_node("triage", |s, _c| async move {
        // A Command: update the state and choose the next node in one answer.
        let next = if s.text.len() > 20 {
            "escalate"
        } else {
            "close"
        };
        Ok(Command::update_and_goto(step("triage"), [next]))
    });
    g.add_node("escalate", |_s, _c| async { Ok(step("escalate")) });
    g.add_node("close", |_s, _c| async { Ok(step("close")) });

    g.add_edge(START, "classify");
    g.add_conditional_edges("classify", |s: &Ticket| {
        Ok(vec![if s.urgent { "urgent" } else { "normal" }.into()])
    })
    .path_map([("urgent", "page_oncall"), ("normal", "triage")]);
    // Urgent: two things in parallel, then a postmortem once both are done (a join).
    g.add_edge("page_oncall", "open_incident")
        .add_edge("page_oncall", "notify_team");
    g.add_join(["open_incident", "notify_team"], "postmortem");
    g.add_destinations("triage", ["escalate", "close"]);
    let graph = g.compile()?;

    for text in [
        "the site is down",
        "typo on the pricing page, please fix it",
    ] {
        let out = graph
            .invoke(TicketUpdate::default().text(text), RunConfig::default())
            .await?;
        println!("{text:?}: {:?}", out.trail);
    }
    Ok(())
}
