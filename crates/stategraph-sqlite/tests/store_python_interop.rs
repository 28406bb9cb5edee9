//! `SqliteStore` interop with Python LangGraph's `langgraph.store.sqlite.SqliteStore` on one
//! file, both directions:
//!
//! - `we_read_items_python_wrote`: Python creates the tables and puts items; we open the file
//!   (our migrations find Python's and change nothing) and read every item back with the
//!   value, key, namespace and timestamps Python reports.
//! - `python_reads_items_we_wrote`: we create the file and put items; Python's `setup()` finds
//!   our migrations complete, and its `get`/`search` report exactly what we stored.
//!
//! Python runs the script below with the pinned environment (`scripts/python-env.sh`, which
//! `scripts/test.sh` runs; or `STATEGRAPH_PYTHON`). These tests fail, never skip, when it is
//! missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value as Json, json};
use stategraph_sqlite::SqliteStoreConfig;
use stategraph_store::{
    ListNamespacesOptions, ManualClock, PutOptions, SearchOptions, Store, Timestamp, Ttl, TtlConfig,
};

/// The Python side. `write PATH`: create the tables and put the items of `python_items()`
/// (`ttl` in minutes where given). `read PATH WANTED`: report the items at the addresses in
/// the JSON list `WANTED` and a few searches. Both print JSON (items as `Item.dict()`).
const SCRIPT: &str = r#"
import json
import sys

from langgraph.store.sqlite import SqliteStore

mode, path = sys.argv[1], sys.argv[2]


def dump(item):
    return None if item is None else item.dict()


with SqliteStore.from_conn_string(path) as store:
    store.setup()
    if mode == "write":
        for ns, key, value, ttl in json.loads(sys.argv[3]):
            if ttl is None:
                store.put(tuple(ns), key, value)
            else:
                store.put(tuple(ns), key, value, ttl=ttl)
        wanted = []
    else:
        wanted = json.loads(sys.argv[3])
    out = {
        "all": [dump(i) for i in store.search((), limit=100)],
        "gets": [dump(store.get(tuple(ns), key)) for ns, key in wanted],
        "users": [dump(i) for i in store.search(("users",), limit=100)],
        "fruit": [dump(i) for i in store.search((), filter={"kind": "fruit"}, limit=100)],
        "migrations": [r[0] for r in store.conn.execute("SELECT v FROM store_migrations ORDER BY v")],
    }
    print(json.dumps(out, ensure_ascii=False))
"#;

/// The Python interpreter of the pinned environment.
use stategraph_testkit::python::python_interpreter as python;

fn run_python(mode: &str, db: &Path, arg: &Json) -> Json {
    let out = Command::new(python())
        .arg("-c")
        .arg(SCRIPT)
        .arg(mode)
        .arg(db)
        .arg(arg.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python store script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn migrations(db: &Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT v FROM store_migrations ORDER BY v")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn ns_of(j: &Json) -> Vec<String> {
    j["namespace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

fn time_of(j: &Json, field: &str) -> Timestamp {
    let text = j[field].as_str().unwrap();
    Timestamp::parse(text).unwrap_or_else(|| panic!("{field} {text:?}"))
}

fn addresses(items: &Json) -> Vec<(Vec<String>, String)> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (ns_of(i), i["key"].as_str().unwrap().to_owned()))
        .collect()
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

#[tokio::test]
async fn we_read_items_python_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("py.sqlite");
    let items = json!([
        [["users", "u1", "prefs"], "theme",
         {"theme": "dark", "n": 5, "ratio": 0.25, "kind": "fruit",
          "nested": {"l": [1, 2.5, null, true], "s": "héllo ✓"}}, null],
        [["users", "u1", "memories"], "m1", {"text": "I like pizza", "tags": ["food"]}, null],
        [["users", "u2", "memories"], "m1", {"text": "我喜欢披萨 🍕", "kind": "fruit"}, null],
        [["docs"], "d-1", {"big": 9007199254740993u64, "neg": -3, "quote": "it's \"q\""}, null],
        [["users", "u3"], "ttl", {"v": 1}, 60.0],
    ]);
    let theirs = run_python("write", &db, &items);
    assert_eq!(theirs["all"].as_array().unwrap().len(), 5);

    let store = SqliteStoreConfig::file(&db).connect().await.unwrap();
    assert_eq!(
        migrations(&db),
        [0, 1, 2, 3, 4],
        "Python's migrations are recognised"
    );
    for item in theirs["all"].as_array().unwrap() {
        let ns = ns_of(item);
        let ns_ref: Vec<&str> = ns.iter().map(String::as_str).collect();
        let key = item["key"].as_str().unwrap();
        let ours = store.get(&ns_ref, key).await.unwrap().expect("present");
        assert_eq!(ours.value, item["value"], "{ns:?}/{key}");
        assert_eq!(ours.key, key);
        assert_eq!(ours.namespace, ns);
        assert_eq!(ours.created_at, time_of(item, "created_at"), "{ns:?}/{key}");
        assert_eq!(ours.updated_at, time_of(item, "updated_at"), "{ns:?}/{key}");
    }
    // Python wrote the original values too: compare with what was put.
    for put in items.as_array().unwrap() {
        let ns: Vec<&str> = put[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        let got = store.get(&ns, put[1].as_str().unwrap()).await.unwrap();
        assert_eq!(got.unwrap().value, put[2]);
    }

    let all = store
        .search(&[], SearchOptions::new().limit(100))
        .await
        .unwrap();
    let ours: Vec<(Vec<String>, String)> = all
        .iter()
        .map(|i| (i.namespace.clone(), i.key.clone()))
        .collect();
    assert_eq!(sorted(ours), sorted(addresses(&theirs["all"])));
    let fruit = store
        .search(&[], SearchOptions::new().filter(json!({"kind": "fruit"})))
        .await
        .unwrap();
    let ours: Vec<(Vec<String>, String)> = fruit
        .iter()
        .map(|i| (i.namespace.clone(), i.key.clone()))
        .collect();
    assert_eq!(sorted(ours), sorted(addresses(&theirs["fruit"])));
    assert_eq!(
        store
            .list_namespaces(ListNamespacesOptions::new().max_depth(1))
            .await
            .unwrap(),
        [vec!["docs".to_owned()], vec!["users".to_owned()]]
    );
    // Python's TTL item (expires_at written by Python, an hour ahead) is alive, not swept.
    assert!(store.get(&["users", "u3"], "ttl").await.unwrap().is_some());
    assert_eq!(store.sweep_ttl().await.unwrap(), 0);

    // Updating a Python item keeps its created_at.
    let before = store
        .get(&["users", "u1", "prefs"], "theme")
        .await
        .unwrap()
        .unwrap();
    store
        .put(
            &["users", "u1", "prefs"],
            "theme",
            json!({"theme": "light"}),
        )
        .await
        .unwrap();
    let after = store
        .get(&["users", "u1", "prefs"], "theme")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.created_at, before.created_at);
    assert!(after.updated_at > before.updated_at);
    assert_eq!(after.value, json!({"theme": "light"}));
}

#[tokio::test]
async fn python_reads_items_we_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ours.sqlite");
    // Our clock, moved on between puts so that each has its own time.
    let clock = ManualClock::starting_now();
    let store = SqliteStoreConfig::file(&db)
        .ttl(TtlConfig::default().with_clock(clock.clock()))
        .connect()
        .await
        .unwrap();
    let puts = [
        (
            vec!["users", "u1", "prefs"],
            "theme",
            json!({"theme": "dark", "n": 5, "kind": "fruit",
            "nested": {"l": [1, 2.5, null, true], "s": "héllo ✓"}}),
        ),
        (
            vec!["users", "u1", "memories"],
            "m1",
            json!({"text": "I like pizza", "tags": ["food"]}),
        ),
        (
            vec!["users", "u2", "memories"],
            "m1",
            json!({"text": "我喜欢披萨 🍕", "kind": "fruit"}),
        ),
        (
            vec!["docs"],
            "d-1",
            json!({"big": 9007199254740993u64, "neg": -3, "quote": "it's \"q\""}),
        ),
    ];
    for (ns, key, value) in &puts {
        store.put(ns, key, value.clone()).await.unwrap();
        clock.advance(Duration::from_millis(2));
    }
    let hour = PutOptions {
        ttl: Ttl::After(Duration::from_secs(60 * 60)),
        ..PutOptions::default()
    };
    store
        .put_with(
            &["users", "u3"],
            "ttl",
            json!({"v": 1, "kind": "veg"}),
            hour,
        )
        .await
        .unwrap();
    // An update: created_at stays, updated_at moves.
    clock.advance(Duration::from_millis(2));
    store
        .put(
            &["users", "u1", "memories"],
            "m1",
            json!({"text": "I like sushi"}),
        )
        .await
        .unwrap();

    let mut wanted: Vec<(Vec<&str>, &str)> =
        puts.iter().map(|(ns, key, _)| (ns.clone(), *key)).collect();
    wanted.push((vec!["users", "u3"], "ttl"));
    wanted.push((vec!["users", "nobody"], "missing"));
    let theirs = run_python("read", &db, &json!(wanted));
    assert_eq!(
        theirs["migrations"],
        json!([0, 1, 2, 3, 4]),
        "Python's setup() found nothing to migrate"
    );
    let gets = theirs["gets"].as_array().unwrap();
    assert_eq!(gets.len(), wanted.len());
    for ((ns, key), got) in wanted.iter().zip(gets) {
        let ours = store.get(ns, key).await.unwrap();
        let Some(ours) = ours else {
            assert!(got.is_null(), "{ns:?}/{key}: {got}");
            continue;
        };
        assert_eq!(got["value"], ours.value, "{ns:?}/{key}");
        assert_eq!(got["key"], *key);
        assert_eq!(ns_of(got), ours.namespace);
        assert_eq!(time_of(got, "created_at"), ours.created_at, "{ns:?}/{key}");
        assert_eq!(time_of(got, "updated_at"), ours.updated_at, "{ns:?}/{key}");
    }
    let updated = store
        .get(&["users", "u1", "memories"], "m1")
        .await
        .unwrap()
        .unwrap();
    assert!(updated.updated_at > updated.created_at);

    // Python orders a plain search by updated_at DESC, as we do.
    let ours: Vec<(Vec<String>, String)> = store
        .search(&["users"], SearchOptions::new().limit(100))
        .await
        .unwrap()
        .iter()
        .map(|i| (i.namespace.clone(), i.key.clone()))
        .collect();
    assert_eq!(ours, addresses(&theirs["users"]));
    let ours: Vec<(Vec<String>, String)> = store
        .search(&[], SearchOptions::new().limit(100))
        .await
        .unwrap()
        .iter()
        .map(|i| (i.namespace.clone(), i.key.clone()))
        .collect();
    assert_eq!(ours, addresses(&theirs["all"]));
    // Python's json_extract filters read our JSON text.
    let ours: Vec<(Vec<String>, String)> = store
        .search(&[], SearchOptions::new().filter(json!({"kind": "fruit"})))
        .await
        .unwrap()
        .iter()
        .map(|i| (i.namespace.clone(), i.key.clone()))
        .collect();
    assert_eq!(ours.len(), 2);
    assert_eq!(ours, addresses(&theirs["fruit"]));
}
