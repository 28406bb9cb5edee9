//! LangGraph's `wide_state` benchmark at 15×600: fifteen fields with list, dict and custom
//! reducers, six nodes that each read one field and write several, looping until `messages`
//! is longer than n.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph::{
    DynState, END, Map, NodeContext, Reducer, START, Schema, StateGraph, Value, graph::Goto,
};

use super::{Shared, attach, failed, fresh_config, letters, list_len, unexpected};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

/// Fields a node writes the whole read list to.
const LIST_FIELDS: &[&str] = &[
    "messages",
    "trigger_events",
    "categorizations",
    "responses",
    "memory_docs",
    "relevant_rules",
];
/// Fields a node writes the read list's last item to.
const DICT_FIELDS: &[&str] = &[
    "user_info",
    "crm_info",
    "slack_participants",
    "notified_assignees",
    "autoresponse",
    "issue",
];

/// Python's truthiness.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::UInt(u) => *u != 0,
        Value::Float(f) => *f != 0.0,
        Value::Str(s) => !s.is_empty(),
        Value::Bytes(b) => !b.is_empty(),
        Value::List(l) => !l.is_empty(),
        Value::Map(m) => !m.is_empty(),
        Value::Ext(_) => true,
    }
}

fn schema() -> Schema {
    // `y or x`, `y if y else x`: the update unless it is falsy.
    let y_or_x = |default: Value| {
        Reducer::new("y_or_x", Some(default), |x, y| {
            Ok(if truthy(&y) { y } else { x })
        })
    };
    // `y if y is not None else x`.
    let y_unless_none = || {
        Reducer::new("y_unless_none", None, |x, y| {
            Ok(if y.is_null() { x } else { y })
        })
    };
    Schema::new()
        .reducer("messages", Reducer::append())
        .reducer("trigger_events", Reducer::append())
        .reducer("primary_issue_medium", y_or_x(Value::Str("email".into())))
        .reducer("autoresponse", Reducer::new("always_y", None, |_, y| Ok(y)))
        .reducer("issue", y_or_x(Value::Null))
        .last_value("relevant_rules")
        .last_value("memory_docs")
        .reducer("categorizations", Reducer::append())
        .reducer("responses", Reducer::append())
        .reducer("user_info", y_unless_none())
        .reducer("crm_info", y_unless_none())
        .reducer("email_thread_id", y_unless_none())
        .reducer("slack_participants", Reducer::merge())
        .last_value("bot_id")
        .reducer("notified_assignees", Reducer::merge())
}

/// Upstream's `read_write`: read one field, write each of `writes` from it (lists get the
/// whole list, dicts its last item, anything else n random letters).
fn read_write(
    read: &'static str,
    writes: &'static [&'static str],
    n: usize,
) -> impl Fn(Arc<DynState>, NodeContext) -> std::future::Ready<Result<Map, stategraph::NodeError>>
+ Send
+ Sync
+ 'static {
    move |s, _c| {
        let val = match s.get(read).cloned().unwrap_or_default() {
            Value::Str(v) => Value::Map(Map::from_iter([(v.clone(), v)])),
            v => v,
        };
        let single = match &val {
            Value::List(l) => l.last().cloned().unwrap_or_default(),
            v => v.clone(),
        };
        let list = match &val {
            Value::List(_) => val.clone(),
            v => Value::from(vec![v.clone()]),
        };
        let update = writes
            .iter()
            .map(|&k| {
                let v = if LIST_FIELDS.contains(&k) {
                    list.clone()
                } else if DICT_FIELDS.contains(&k) {
                    single.clone()
                } else {
                    Value::from(letters(n))
                };
                (k, v)
            })
            .collect();
        std::future::ready(Ok(update))
    }
}

/// The input: one message, a 3 × 5 dict of lists.
fn input() -> Map {
    let inner = |j: usize| {
        let item = [
            Value::from("hi?".repeat(10)),
            Value::Bool(true),
            Value::Int(1),
            Value::Int(6_327_816_386_138),
            Value::Null,
        ];
        (
            j.to_string().repeat(10),
            Value::List(item.iter().cycle().take(25).cloned().collect()),
        )
    };
    let message: Map = (0..3)
        .map(|i| {
            (
                i.to_string().repeat(10),
                Value::Map((0..5).map(inner).collect()),
            )
        })
        .collect();
    Map::from_iter([("messages", Value::from(vec![Value::Map(message)]))])
}

/// `wide_state_15x600`.
pub(super) struct WideState;

#[async_trait::async_trait]
impl Workload for WideState {
    fn spec(&self) -> Spec {
        Spec::new("wide_state_15x600", 600, 5, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let loops = Arc::new(AtomicUsize::new(0));
        let mut g = StateGraph::<DynState>::with_schema(schema());
        let one = read_write("messages", &["trigger_events", "primary_issue_medium"], n);
        let counter = Arc::clone(&loops);
        g.add_node("one", move |s, c| {
            counter.fetch_add(1, Ordering::Relaxed);
            one(s, c)
        })
        .add_node(
            "two",
            read_write("trigger_events", &["autoresponse", "issue"], n),
        )
        .add_node("three", read_write("autoresponse", &["relevant_rules"], n))
        .add_node(
            "four",
            read_write(
                "trigger_events",
                &["categorizations", "responses", "memory_docs"],
                n,
            ),
        )
        .add_node(
            "five",
            read_write(
                "categorizations",
                &[
                    "user_info",
                    "crm_info",
                    "email_thread_id",
                    "slack_participants",
                    "bot_id",
                    "notified_assignees",
                ],
                n,
            ),
        )
        .add_node("six", read_write("responses", &["messages"], n));
        g.add_edge(START, "one")
            .add_edge("one", "two")
            .add_edge("two", "three")
            .add_edge("two", "four")
            .add_join(["three", "four"], "five")
            .add_edge("five", "six")
            .add_conditional_edges("six", move |s: &DynState| {
                let len = s
                    .get("messages")
                    .and_then(Value::as_list)
                    .map_or(0, <[Value]>::len);
                Ok(vec![Goto::from(if len > n { END } else { "one" })])
            });
        let graph: Shared<DynState> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            async move {
                let out = graph
                    .invoke(input(), fresh_config(backend))
                    .await
                    .map_err(failed("wide_state_15x600"))?;
                match list_len(&out.0, "messages") {
                    len if len > n => Ok(()),
                    len => Err(unexpected(
                        "wide_state_15x600",
                        format!("{len} messages, not more than {n}"),
                    )),
                }
            }
        })
        .await?;
        // Every run (the warm-up too) takes the same path: five super-steps a loop.
        let total = loops.load(Ordering::Relaxed);
        let steps = total
            .is_multiple_of(runs + 1)
            .then(|| 5 * total / (runs + 1));
        Ok(Measurement {
            samples_ms: samples,
            steps,
            ..Measurement::default()
        })
    }
}
