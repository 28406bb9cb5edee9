use super::abandons;
use stategraph_checkpoint::Error;
use stategraph_graph::GraphError;

#[test]
fn a_lost_lease_or_connection_abandons_the_attempt() {
    let lost = GraphError::from(Error::LeaseLost {
        run_id: "r".into(),
        worker: "w".into(),
    });
    assert_eq!(abandons(&lost), Some("the run's lease is lost"));
    let cut = GraphError::from(Error::ConnectionLost {
        backend: "postgres",
        operation: "committing a checkpoint".into(),
        source: None,
    });
    assert!(abandons(&cut).is_some());
    let other = GraphError::from(Error::invalid("x", "y"));
    assert_eq!(abandons(&other), None);
}
