//! `Overwrite`: a reducer key replaced as it is (its threads are compared with Python
//! LangGraph's in `stategraph-tests`' `python_graph_interop`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::{Map, Value, value};
use stategraph_graph::{
    DynState, GraphError, Overwrite, Reducer, RunConfig, START, Schema, StateGraph,
};

fn graph(b_writes: Vec<Value>) -> stategraph_graph::CompiledGraph<DynState> {
    let mut g =
        StateGraph::<DynState>::with_schema(Schema::new().reducer("log", Reducer::append()));
    g.add_node("a", |_s, _c| async {
        Ok(Map::from_iter([("log", value!(["a"]))]))
    });
    g.add_node("b", move |_s, _c| {
        let writes = b_writes.clone();
        async move {
            Ok(stategraph_graph::NodeOutput::<Map>::Writes(
                writes.into_iter().map(|w| ("log".to_owned(), w)).collect(),
            ))
        }
    });
    g.add_edge(START, "a").add_edge(START, "b");
    g.compile().unwrap()
}

async fn log_after(b_writes: Vec<Value>) -> Result<Value, GraphError> {
    let out = graph(b_writes)
        .invoke_values(
            Map::from_iter([("log", value!(["old"]))]),
            RunConfig::default(),
        )
        .await?;
    Ok(out["log"].clone())
}

#[tokio::test]
async fn an_overwrite_replaces_what_the_step_reduced() {
    let log = log_after(vec![Overwrite::new(value!(["b"])).into()])
        .await
        .unwrap();
    assert_eq!(log, value!(["b"]));
    // The dict forms a JSON client sends are overwrites too.
    let keyed = log_after(vec![value!({"__overwrite__": ["k"]})])
        .await
        .unwrap();
    assert_eq!(keyed, value!(["k"]));
    let tagged = log_after(vec![value!({"type": "__overwrite__", "value": ["t"]})])
        .await
        .unwrap();
    assert_eq!(tagged, value!(["t"]));
}

#[tokio::test]
async fn two_overwrites_of_one_key_in_a_step_are_refused() {
    let err = log_after(vec![
        Overwrite::new(value!(["x"])).into(),
        Overwrite::new(value!(["y"])).into(),
    ])
    .await
    .unwrap_err();
    assert!(
        matches!(&err, GraphError::InvalidUpdate { channel, message }
            if channel == "log" && message.contains("one Overwrite")),
        "{err}"
    );
}

#[test]
fn an_overwrite_is_stored_as_python_stores_it() {
    let stored = Overwrite::new(value!(["b"])).to_value();
    let bytes = stategraph_value::encode(&stored);
    // `JsonPlusSerializer().dumps_typed(Overwrite(value=["b"]))` in LangGraph 1.2.22.
    let python = "c7380293af6c616e6767726170682e7479706573a94f766572777269746582a576616c756591\
                  a162a474797065ad5f5f6f76657277726974655f5f";
    assert_eq!(hex(&bytes), python);
    assert_eq!(Overwrite::of(&stored), Some(value!(["b"])));
    assert_eq!(Overwrite::of(&value!(["b"])), None);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
