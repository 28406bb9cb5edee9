//! Human-in-the-loop: dynamic interrupts, resume by value and by id, static breakpoints,
//! interrupts inside subgraphs — on every saver (memory, SQLite, Postgres, MySQL, Redis).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use stategraph::graph::{Command, Resume};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, GraphError, Map, Value};

#[derive(State, Clone, Debug, Default)]
struct Doc {
    draft: String,
    status: String,
    #[reducer(append)]
    log: Vec<String>,
}

on_every_saver!(
    approve_edit_reject,
    several_interrupts_in_one_node,
    parallel_interrupts_resumed_by_id,
    breakpoint_then_update_then_resume,
    interrupt_after_stops_after_the_node,
    subgraph_resumes_where_it_stopped,
    exit_durability_saves_the_pending_interrupt,
    command_updates_and_routes_at_a_breakpoint,
    command_at_a_past_checkpoint_forks,
    bad_commands_are_refused_before_anything_runs,
);

fn review_graph(saver: Arc<dyn CheckpointSaver>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("write", |_s, _c| async {
        Ok(DocUpdate::default().draft("first draft").log(["write"]))
    });
    g.add_node("review", |s, ctx| async move {
        let answer =
            ctx.interrupt(value!({"draft": s.draft.as_str(), "ask": "approve, edit or reject?"}))?;
        let action = answer
            .as_map()
            .and_then(|m| m.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("");
        Ok(match action {
            "approve" => {
                Command::update_and_goto(DocUpdate::default().status("approved"), ["publish"])
            }
            "edit" => {
                let text = answer
                    .as_map()
                    .and_then(|m| m.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Command::update_and_goto(
                    DocUpdate::default().draft(text).status("edited"),
                    ["publish"],
                )
            }
            _ => Command::update_and_goto(DocUpdate::default().status("rejected"), [END]),
        })
    });
    g.add_node("publish", |s, _c| async move {
        Ok(DocUpdate::default().log([format!("published: {}", s.draft)]))
    });
    g.add_edge(START, "write")
        .add_edge("write", "review")
        .add_destinations("review", ["publish"]);
    g.compile().unwrap().with_checkpointer(saver)
}

async fn approve_edit_reject(saver: Arc<dyn CheckpointSaver>) {
    let g = review_graph(saver);
    let cases = [
        (
            value!({"action": "approve"}),
            "approved",
            "published: first draft",
        ),
        (
            value!({"action": "edit", "text": "better draft"}),
            "edited",
            "published: better draft",
        ),
        (value!({"action": "reject"}), "rejected", "write"),
    ];
    for (i, (answer, status, last_log)) in cases.into_iter().enumerate() {
        let config = RunConfig::thread(format!("review-{i}"));
        let out = g
            .invoke_values(DocUpdate::default(), config.clone())
            .await
            .unwrap();
        let pending = out["__interrupt__"].as_list().unwrap();
        assert_eq!(pending.len(), 1);
        let state = g.get_state(&config).await.unwrap();
        assert_eq!(state.next, ["review"]);
        assert_eq!(state.tasks[0].interrupts.len(), 1);
        assert_eq!(
            state.tasks[0].interrupts[0].value,
            value!({"draft": "first draft", "ask": "approve, edit or reject?"})
        );
        assert_eq!(state.interrupts, state.tasks[0].interrupts);

        let out = g
            .resume_values(Resume::Value(answer), config.clone())
            .await
            .unwrap();
        assert!(!out.contains_key("__interrupt__"));
        assert_eq!(out["status"], value!(status));
        assert_eq!(
            out["log"].as_list().unwrap().last().unwrap(),
            &value!(last_log)
        );
        let done = g.get_state(&config).await.unwrap();
        assert!(done.next.is_empty() && done.interrupts.is_empty());
    }
}

async fn several_interrupts_in_one_node(saver: Arc<dyn CheckpointSaver>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<Doc>::new();
    let r = Arc::clone(&runs);
    g.add_node("form", move |_s, ctx| {
        r.fetch_add(1, SeqCst);
        async move {
            let name = ctx.interrupt("name?")?;
            let age = ctx.interrupt("age?")?;
            Ok(DocUpdate::default().log([format!("{} {}", name.as_str().unwrap_or(""), age)]))
        }
    });
    g.add_edge(START, "form");
    let g = g.compile().unwrap().with_checkpointer(saver);
    let config = RunConfig::thread("form");
    let out = g
        .invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let first =
        stategraph::graph::Interrupt::from_value(&out["__interrupt__"].as_list().unwrap()[0])
            .unwrap();
    assert_eq!(first.value, value!("name?"));
    let out = g
        .resume_values(Resume::Value("ada".into()), config.clone())
        .await
        .unwrap();
    let second =
        stategraph::graph::Interrupt::from_value(&out["__interrupt__"].as_list().unwrap()[0])
            .unwrap();
    assert_eq!(second.value, value!("age?"));
    assert_ne!(
        first.id, second.id,
        "the second interrupt of a task has its own id"
    );
    let out = g
        .resume_values(Resume::Value(36.into()), config.clone())
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["ada 36"]));
    assert_eq!(
        runs.load(SeqCst),
        3,
        "the node re-runs from its start on every resume"
    );
}

async fn parallel_interrupts_resumed_by_id(saver: Arc<dyn CheckpointSaver>) {
    let mut g = StateGraph::<Doc>::new();
    for name in ["legal", "finance"] {
        g.add_node(name, move |_s, ctx| async move {
            let ok = ctx.interrupt(format!("{name} approves?"))?;
            Ok(DocUpdate::default().log([format!("{name}: {}", ok.as_str().unwrap_or(""))]))
        });
        g.add_edge(START, name);
    }
    let g = g.compile().unwrap().with_checkpointer(saver);
    let config = RunConfig::thread("parallel");
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let state = g.get_state(&config).await.unwrap();
    assert_eq!(state.interrupts.len(), 2);
    assert_ne!(
        state.interrupts[0].id, state.interrupts[1].id,
        "ids are unique per task"
    );
    // A bare answer is ambiguous with two pending interrupts.
    let err = g
        .resume_values(Resume::Value("yes".into()), config.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GraphError::AmbiguousResume { pending } if pending.len() == 2),
        "{err}"
    );
    let answers = state
        .tasks
        .iter()
        .map(|t| {
            (
                t.interrupts[0].id.clone(),
                Value::from(format!("yes from {}", t.name)),
            )
        })
        .collect();
    let out = g
        .resume_values(Resume::ById(answers), config.clone())
        .await
        .unwrap();
    assert_eq!(
        out["log"],
        value!(["finance: yes from finance", "legal: yes from legal"])
    );
}

fn pipeline(saver: Arc<dyn CheckpointSaver>, counter: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("compose", |_s, _c| async {
        Ok(DocUpdate::default().draft("v1").log(["compose"]))
    });
    g.add_node("send", move |s, _c| {
        counter.fetch_add(1, SeqCst);
        async move { Ok(DocUpdate::default().log([format!("sent {}", s.draft)])) }
    });
    g.add_edge(START, "compose").add_edge("compose", "send");
    g.compile().unwrap().with_checkpointer(saver)
}

async fn breakpoint_then_update_then_resume(saver: Arc<dyn CheckpointSaver>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let g = pipeline(saver, Arc::clone(&sent)).with_interrupt_before(["send"]);
    let config = RunConfig::thread("bp");
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let state = g.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["send"]);
    assert_eq!(sent.load(SeqCst), 0, "stopped before `send`");
    // A human fixes the draft, as `compose` (so `send` stays next), then lets it go on.
    g.update_state(&config, DocUpdate::default().draft("v2"), "compose")
        .await
        .unwrap();
    let out = g.continue_values(config.clone()).await.unwrap();
    assert_eq!(sent.load(SeqCst), 1);
    assert_eq!(out["log"], value!(["compose", "sent v2"]));
    // Per-invocation override: no breakpoint this time.
    let mut free = RunConfig::thread("bp2");
    free.interrupt_before = Some(Vec::new());
    g.invoke_values(DocUpdate::default(), free).await.unwrap();
    assert_eq!(sent.load(SeqCst), 2);
}

async fn interrupt_after_stops_after_the_node(saver: Arc<dyn CheckpointSaver>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let g = pipeline(saver, Arc::clone(&sent)).with_interrupt_after(["compose"]);
    let config = RunConfig::thread("after");
    let out = g
        .invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    assert_eq!(out["draft"], value!("v1"), "compose ran");
    assert_eq!(sent.load(SeqCst), 0);
    assert_eq!(g.get_state(&config).await.unwrap().next, ["send"]);
    g.continue_values(config.clone()).await.unwrap();
    assert_eq!(sent.load(SeqCst), 1);
}

async fn subgraph_resumes_where_it_stopped(saver: Arc<dyn CheckpointSaver>) {
    let first_runs = Arc::new(AtomicUsize::new(0));
    let mut inner = StateGraph::<Doc>::new();
    let f = Arc::clone(&first_runs);
    inner.add_node("prepare", move |_s, _c| {
        f.fetch_add(1, SeqCst);
        async { Ok(DocUpdate::default().log(["prepare"])) }
    });
    inner.add_node("confirm", |_s, ctx| async move {
        let ok = ctx.interrupt("confirm?")?;
        Ok(DocUpdate::default().log([format!("confirmed {}", ok.as_str().unwrap_or(""))]))
    });
    inner
        .add_edge(START, "prepare")
        .add_edge("prepare", "confirm");
    let mut outer = StateGraph::<Doc>::new();
    outer.add_subgraph("sub", inner.compile().unwrap());
    outer.add_node("finish", |_s, _c| async {
        Ok(DocUpdate::default().log(["finish"]))
    });
    outer.add_edge(START, "sub").add_edge("sub", "finish");
    let g = outer.compile().unwrap().with_checkpointer(saver);
    let config = RunConfig::thread("nested");
    let out = g
        .invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    assert!(out.contains_key("__interrupt__"));
    let state = g.get_state_with_subgraphs(&config).await.unwrap();
    assert_eq!(state.next, ["sub"]);
    assert_eq!(
        state.interrupts.len(),
        1,
        "the parent task carries the subgraph's interrupt"
    );
    let sub = state.tasks[0]
        .state
        .as_ref()
        .expect("the subgraph's own state");
    assert_eq!(sub.next, ["confirm"]);
    assert_eq!(sub.interrupts[0].id, state.interrupts[0].id);

    let out = g
        .resume_values(Resume::Value("yes".into()), config.clone())
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["prepare", "confirmed yes", "finish"]));
    assert_eq!(
        first_runs.load(SeqCst),
        1,
        "the subgraph resumed; `prepare` did not run again"
    );
    let _ = Map::new();
}

async fn exit_durability_saves_the_pending_interrupt(saver: Arc<dyn CheckpointSaver>) {
    let g = review_graph(Arc::clone(&saver));
    let config = RunConfig::thread("exit").with_durability(stategraph::graph::Durability::Exit);
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    // Only the checkpoint the interrupted step started from is saved, with its writes.
    let all = saver.list(&ListOptions::thread("exit")).await.unwrap();
    assert_eq!(all.len(), 1);
    let state = g.get_state(&config).await.unwrap();
    assert_eq!(state.next, ["review"]);
    assert_eq!(state.interrupts.len(), 1);
    let out = g
        .resume_values(Resume::Value(value!({"action": "approve"})), config.clone())
        .await
        .unwrap();
    assert_eq!(out["status"], value!("approved"));
    assert_eq!(
        saver
            .list(&ListOptions::thread("exit"))
            .await
            .unwrap()
            .len(),
        2
    );
}

async fn command_updates_and_routes_at_a_breakpoint(saver: Arc<dyn CheckpointSaver>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let g = pipeline(saver, Arc::clone(&sent)).with_interrupt_before(["send"]);
    let config = RunConfig::thread("cmd");
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let stopped_at = g.get_state(&config).await.unwrap();
    // One command fixes the draft and also routes back to `compose`: both run in the next
    // step, after the update.
    let command =
        RunCommand::update(DocUpdate::default().draft("v2").log(["fixed"])).with_goto("compose");
    let out = g.command_values(command, config.clone()).await.unwrap();
    assert_eq!(sent.load(SeqCst), 1);
    assert_eq!(
        out["log"],
        value!(["compose", "fixed", "compose", "sent v2"])
    );
    // The writes were saved without a task on the checkpoint the command started from.
    let stopped_id = stopped_at.config.unwrap().checkpoint_id.unwrap();
    let at = g
        .get_state(&config.clone().with_checkpoint_id(stopped_id))
        .await
        .unwrap();
    assert_eq!(
        at.values["draft"],
        value!("v2"),
        "writes without a task are read as part of their checkpoint, as LangGraph reads them"
    );
    let history = g
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|s| {
                s.metadata.as_ref().and_then(|m| m.source)
                    == Some(stategraph::CheckpointSource::Input)
            })
            .count(),
        1,
        "a command saves no input checkpoint"
    );
    // `goto` alone schedules a node on a finished thread.
    let out = g
        .command_values(RunCommand::goto("send"), config.clone())
        .await
        .unwrap();
    assert_eq!(sent.load(SeqCst), 2);
    assert_eq!(
        out["log"],
        value!(["compose", "fixed", "compose", "sent v2", "sent v1"])
    );
}

async fn command_at_a_past_checkpoint_forks(saver: Arc<dyn CheckpointSaver>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let g = pipeline(saver, Arc::clone(&sent));
    let config = RunConfig::thread("cmd-fork");
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let history = g
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    let before_send = history.iter().find(|s| s.next == ["send"]).unwrap();
    let before_id = before_send.config.clone().unwrap().checkpoint_id.unwrap();
    let past = RunConfig::thread("cmd-fork").with_checkpoint_id(before_id.clone());
    let out = g
        .command_values(RunCommand::update(DocUpdate::default().draft("v3")), past)
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["compose", "sent v3"]));
    // The fork carries the update; the old branch is untouched.
    let after = g
        .get_state_history(&config, Default::default())
        .await
        .unwrap();
    let fork = after
        .iter()
        .find(|s| {
            s.metadata.as_ref().and_then(|m| m.source) == Some(stategraph::CheckpointSource::Fork)
        })
        .expect("a fork checkpoint");
    assert_eq!(fork.values["draft"], value!("v3"));
    assert_eq!(
        fork.parent_config.as_ref().unwrap().checkpoint_id,
        Some(before_id.clone())
    );
    let old = g
        .get_state(&config.clone().with_checkpoint_id(before_id))
        .await
        .unwrap();
    assert_eq!(old.values["draft"], value!("v1"));
    assert!(old.tasks.iter().all(|t| t.error.is_none()));
}

async fn bad_commands_are_refused_before_anything_runs(saver: Arc<dyn CheckpointSaver>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let g = pipeline(Arc::clone(&saver), Arc::clone(&sent));
    let config = RunConfig::thread("cmd-bad");
    let fresh = g
        .command_values(RunCommand::goto("send"), config.clone())
        .await
        .unwrap_err();
    assert!(matches!(fresh, GraphError::NothingToResume), "{fresh}");
    g.invoke_values(DocUpdate::default(), config.clone())
        .await
        .unwrap();
    let before = saver
        .list(&stategraph::ListOptions::thread("cmd-bad"))
        .await
        .unwrap()
        .len();
    let empty = RunCommand::<DocUpdate> {
        resume: None,
        update: None,
        goto: Vec::new(),
    };
    let err = g.command_values(empty, config.clone()).await.unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidArgument { what, .. } if what == "command"),
        "{err}"
    );
    let err = g
        .command_values(RunCommand::goto("nowhere"), config.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`nowhere` is not a node"), "{err}");
    assert!(err.to_string().contains("compose, send"), "{err}");
    let mut raw = g.stream_command_values(
        RunCommand::update(Map::from_iter([("nope", value!(1))])),
        config.clone(),
        &[StreamMode::Values],
    );
    use futures_util::StreamExt;
    let err = raw.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidUpdate { channel, .. } if channel == "nope"),
        "{err}"
    );
    assert!(raw.next().await.is_none());
    let after = saver
        .list(&stategraph::ListOptions::thread("cmd-bad"))
        .await
        .unwrap()
        .len();
    assert_eq!(before, after, "nothing was saved");
    assert_eq!(sent.load(SeqCst), 1);
}
