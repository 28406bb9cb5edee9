//! `Send` and `Interrupt` as first-class values of a typed state: stored as Python stores
//! `langgraph.types.Send` / `Interrupt`, read back, and refused with a clear error when the
//! value is something else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::{Deserialize, Serialize};
use stategraph_checkpoint::{Value, value};
use stategraph_graph::{Interrupt, Send};
use stategraph_value::py::PyType;

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Job {
    item: i64,
}

#[test]
fn send_round_trips_in_python_form() {
    let send = Send::new("worker", Job { item: 3 });
    let v = send.to_py().unwrap();
    assert_eq!(
        v.to_string(),
        r#"langgraph.types.Send(["worker", {"item": 3}])"#
    );
    let back = Send::<Job>::from_py(&v).unwrap();
    assert_eq!((back.node.as_str(), back.arg), ("worker", Job { item: 3 }));
    let err = Send::<Job>::from_py(&value!({"node": "worker"})).unwrap_err();
    assert!(err.to_string().contains("langgraph.types.Send"), "{err}");
}

#[test]
fn interrupt_round_trips_in_python_form() {
    let i = Interrupt {
        value: value!({"question": "approve?"}),
        id: "abc".into(),
    };
    let v = i.to_py().unwrap();
    assert!(matches!(v, Value::Ext(_)));
    assert_eq!(Interrupt::from_py(&v).unwrap(), i);
    let send = Send::new("x", Job { item: 1 }).to_py().unwrap();
    let err = Interrupt::from_py(&send).unwrap_err();
    assert!(
        err.to_string().contains("langgraph.types.Interrupt"),
        "{err}"
    );
}
