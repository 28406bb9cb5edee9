//! Unit tests of the store's SQL helpers and connections.

use rusqlite::{Connection, params, params_from_iter};

use super::conn::open_connection;
use super::read::push_prefix_condition;
use super::vec::f32_blob;
use crate::config::SqliteConfig;

#[test]
fn prefix_condition_is_label_wise_and_case_sensitive() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (prefix TEXT)").unwrap();
    for p in [
        "a.b", "a.b.c", "a.bc", "A.B.c", "a.b_", "a_b.c", "x%.y", "xz.y",
    ] {
        conn.execute("INSERT INTO t VALUES (?1)", [p]).unwrap();
    }
    let matching = |labels: &[&str]| {
        let mut sql = "SELECT prefix FROM t WHERE ".to_owned();
        let mut params = Vec::new();
        let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
        push_prefix_condition(&mut sql, &mut params, "prefix", &labels);
        sql.push_str(" ORDER BY prefix");
        let mut stmt = conn.prepare(&sql).unwrap();
        stmt.query_map(params_from_iter(params), |r| r.get::<_, String>(0))
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
    };
    assert_eq!(matching(&["a", "b"]), ["a.b", "a.b.c"]);
    assert_eq!(matching(&["a_b"]), ["a_b.c"]);
    assert_eq!(matching(&["x%"]), ["x%.y"]);
}

#[test]
fn namespace_collation_orders_label_by_label() {
    let conn = open_connection(&SqliteConfig::memory(), false).unwrap();
    conn.execute_batch("CREATE TABLE t (prefix TEXT)").unwrap();
    for p in ["a-x", "a.b", "a", "a.b.c", "a!"] {
        conn.execute("INSERT INTO t VALUES (?1)", [p]).unwrap();
    }
    let got: Vec<String> = conn
        .prepare("SELECT prefix FROM t ORDER BY prefix COLLATE sg_namespace")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut want: Vec<Vec<&str>> = got.iter().map(|p| p.split('.').collect()).collect();
    want.sort();
    let want: Vec<String> = want.into_iter().map(|l| l.join(".")).collect();
    assert_eq!(got, want);
    assert_eq!(got, ["a", "a.b", "a.b.c", "a!", "a-x"]);
}

#[test]
fn sqlite_vec_is_registered_per_connection() {
    let conn = open_connection(&SqliteConfig::memory(), false).unwrap();
    let d: f64 = conn
        .query_row(
            "SELECT vec_distance_cosine(?1, ?2)",
            params![f32_blob(&[1.0, 0.0]), f32_blob(&[0.0, 2.0])],
            |r| r.get(0),
        )
        .unwrap();
    assert!((d - 1.0).abs() < 1e-6);
    // A zero vector has no direction: NaN, which SQLite turns into NULL.
    let z: Option<f64> = conn
        .query_row(
            "SELECT vec_distance_cosine(?1, ?2)",
            params![f32_blob(&[0.0, 0.0]), f32_blob(&[0.0, 2.0])],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(z, None);
    let plain = Connection::open_in_memory().unwrap();
    assert!(
        plain
            .query_row("SELECT vec_version()", [], |r| r.get::<_, String>(0))
            .is_err()
    );
}
