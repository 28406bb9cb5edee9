"""Functional API workflows (`@entrypoint`, `@task`) in Python LangGraph, on a SQLite file or
a Postgres database, for stategraph's differential tests.

Usage: python functional.py DB WORKFLOW THREAD ACTION...

DB is a SQLite file path or a postgres:// URL. WORKFLOW (stategraph's test builds the same
ones, with the same names):
- `seq`: `wf(n) = double(add_one(n))`, the two tasks awaited one after the other;
- `par`: `wf(n)` calls `double(i)` for i in 0..n, all started before any is awaited; sum;
- `retry`: `wf(n) = flaky(n)`, where `flaky` fails its first try (a RetryPolicy of two
  tries retries it) and returns n + 100;
- `retry_list`: `wf(n) = stubborn(n)`, where `stubborn` raises ConnectionError on its first
  two tries and returns n * 3; its policies are a list: one for ValueError only (five
  tries), then one with LangGraph's default filter and three tries, which is the one that
  applies;
- `hitl`: `a = double(n)`; `answer = interrupt({"question": "approve?", "a": a})`;
  `b = add_one(a)`; returns {"a": a, "answer": answer, "b": b};
- `prev`: returns `entrypoint.final(value=previous, save=(previous or 0) + n)`;
- `node`: a StateGraph whose node `work` calls `double(x)` and writes `y`;
- `task_hitl`: `wf(n) = ask(n)`, where the task `ask` calls `interrupt({"q": n})` and
  returns the answer;
- `timeout`: a StateGraph whose async node `slow` (timeout 0.2 s, two tries 10 ms apart)
  sleeps 5 s on its first try, so that it is cancelled and retried, then writes `y = 2x`;
- `task_timeout`: `wf(n) = sleepy(n)`, where the async task `sleepy` (timeout 0.2 s, two
  tries) sleeps 5 s on its first try and returns n + 1;
- `cache`: a StateGraph whose node `expensive` writes `y = 2x`, cached by `x` (key
  `str(x)`, TTL 600 s) in the cache FUNC_CACHE names: a SQLite file path (`SqliteCache`) or
  a redis:// URL (`RedisCache`, under the prefix FUNC_CACHE_PREFIX);
- `task_cache`: `wf(n) = costly(n)`, where the task `costly` returns n * 10, cached the same
  way (key `str(n)`) in the entrypoint's cache;
- `ask`: a StateGraph whose node `ask` calls `interrupt({"x": x})` and writes the answer to
  `y`;
- `io`: a StateGraph over `question`, `notes`, `answer` with `input_schema` {question} and
  `output_schema` {answer}: `think` writes `notes`, then `reply` writes `answer`;
- `pair`: a StateGraph START → a, b (in parallel) over `done` (operator.add); `b` raises
  ConnectionError on its first run (counted in FUNC_LOG), so the step fails after `a`
  finished, and continuing the thread runs only `b`.
- `handled` / `handled_flaky`: a StateGraph START → a, b (in parallel) over `done`, where `a`
  raises ValueError and has an error handler that writes `handled a` and goes to `fallback`;
  in `handled_flaky` the handler raises ConnectionError on its first run, so the run fails
  and continuing it runs the handler again (never `a`).
- `sub_task` / `sub_thread` / `sub_off`: a StateGraph over `n`, `total` whose node `child`
  is a subgraph over `n`, `seen` (operator.add), `total`, compiled with `checkpointer=None`
  / `True` / `False`; its node `remember` appends `n` to `seen` and writes `total` as their
  sum (so a per-thread subgraph remembers earlier runs);
- `sub_call`: a StateGraph whose node `outer` invokes a subgraph over `n`, `total` inside
  its code; the subgraph's node `ask` interrupts with `{"n": n}` and writes the answer to
  `total`.
The two timeout workflows run on LangGraph's async savers (timeouts need async nodes).
Every task appends its name to the file FUNC_LOG names, if set (the side effects a test
counts).

ACTIONS, in order: `run:JSON` (invoke with that input), `resume:JSON` (invoke with
Command(resume=JSON)), `stream:JSON` / `stream_resume:JSON` (the same, printing the
`updates` and `values` streams under `streams`, each part `[mode, chunk]`; a run that fails
ends its parts with `["error", repr]`), `stream_continue` (the same, continuing the thread:
`stream(None)`), `tasks:JSON` / `tasks_continue` (the `tasks` stream of a run or of
continuing the thread, each part `["start", name]` or `["result", name, failed]`), `invoke:JSON` (invoke, printing the output under `outputs`), `invoke_v2:JSON` / `resume_v2:JSON` (invoke with `version="v2"`, printing
the `GraphOutput`'s value and interrupts under `outputs`), `stream_v2:JSON` /
`stream_resume_v2:JSON` (the `updates` and `values` streams with `version="v2"`: each part a
`{type, ns, data(, interrupts)}` dict), `dump` (print the thread's checkpoints and writes,
normalized, under `dump`).
"""

import asyncio
import json
import operator
import os
import sqlite3
import sys
from typing import Annotated, Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import NodeError
from langgraph.func import entrypoint, task
from langgraph.graph import START, StateGraph
from langgraph.types import CachePolicy, Command, RetryPolicy, interrupt
from typing_extensions import TypedDict


def ran():
    """The names logged so far."""
    path = os.environ.get("FUNC_LOG")
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().split()


def log(name):
    path = os.environ.get("FUNC_LOG")
    if path:
        with open(path, "a") as f:
            f.write(name + "\n")


@task
def add_one(x: int) -> int:
    log("add_one")
    return x + 1


@task
def double(x: int) -> int:
    log("double")
    return x * 2


FLAKY_TRIES = {"n": 0}


@task(retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False))
def flaky(x: int) -> int:
    log("flaky")
    FLAKY_TRIES["n"] += 1
    if FLAKY_TRIES["n"] == 1:
        raise ConnectionError("first try fails")
    return x + 100


STUBBORN_TRIES = {"n": 0}


@task(
    retry_policy=[
        RetryPolicy(retry_on=ValueError, max_attempts=5, initial_interval=0.01, jitter=False),
        RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False),
    ]
)
def stubborn(x: int) -> int:
    log("stubborn")
    STUBBORN_TRIES["n"] += 1
    if STUBBORN_TRIES["n"] < 3:
        raise ConnectionError("not yet")
    return x * 3


QUICK = RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False)
SLOW_TRIES = {"n": 0}


async def slow(s):
    log("slow")
    SLOW_TRIES["n"] += 1
    if SLOW_TRIES["n"] == 1:
        await asyncio.sleep(5)
    return {"y": s["x"] * 2}


@task(timeout=0.2, retry_policy=QUICK)
async def sleepy(x: int) -> int:
    log("sleepy")
    SLOW_TRIES["n"] += 1
    if SLOW_TRIES["n"] == 1:
        await asyncio.sleep(5)
    return x + 1


ASYNC_FLOWS = {"timeout", "task_timeout"}


def expensive(s):
    log("expensive")
    return {"y": s["x"] * 2}


@task(cache_policy=CachePolicy(key_func=lambda x: str(x), ttl=600))
def costly(x: int) -> int:
    log("costly")
    return x * 10


def node_cache():
    """The cache FUNC_CACHE names (none without it: `dump` needs none)."""
    where = os.environ.get("FUNC_CACHE")
    if not where:
        return None
    if where.startswith("redis://"):
        import redis
        from langgraph.cache.redis import RedisCache

        return RedisCache(redis.Redis.from_url(where), prefix=os.environ["FUNC_CACHE_PREFIX"])
    from langgraph.cache.sqlite import SqliteCache

    return SqliteCache(path=where)


@task
def ask(x: int):
    log("ask")
    return interrupt({"q": x})


class Pair(TypedDict):
    done: Annotated[list[str], operator.add]


def pair_node(name):
    def run(s):
        first = name not in ran()
        log(name)
        if name == "b" and first:
            raise ConnectionError("flaky upstream")
        return {"done": [name]}

    return run


def plain(name):
    def run(s):
        log(name)
        return {"done": [name]}

    return run


def broken(s):
    log("a")
    raise ValueError("a broke")


def handler_of(flaky):
    def handler(s: Pair, error: NodeError):
        first = "handler" not in ran()
        log("handler")
        if flaky and first:
            raise ConnectionError("handler flaked")
        return Command(update={"done": [f"handled {error.node}"]}, goto="fallback")

    return handler


class Outer(TypedDict):
    n: int
    total: int


class Inner(TypedDict):
    n: int
    seen: Annotated[list[int], operator.add]
    total: int


def remember(s: Inner):
    log("remember")
    return {"seen": [s["n"]], "total": sum(s.get("seen") or []) + s["n"]}


def inner_graph(checkpointer):
    g = StateGraph(Inner)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    return g.compile(checkpointer=checkpointer)


def asker():
    def ask_inner(s: Outer):
        log("ask")
        return {"total": interrupt({"n": s["n"]})}

    g = StateGraph(Outer)
    g.add_node("ask", ask_inner)
    g.add_edge(START, "ask")
    return g.compile()


class IoIn(TypedDict):
    question: str


class IoOut(TypedDict):
    answer: str


class IoAll(TypedDict):
    question: str
    notes: str
    answer: str


class Node(TypedDict):
    x: int
    y: int


def build(name, saver):
    if name == "seq":

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> int:
            return double(add_one(n).result()).result()

    elif name == "par":

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> int:
            futures = [double(i) for i in range(n)]
            return sum(f.result() for f in futures)

    elif name == "retry":

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> int:
            return flaky(n).result()

    elif name == "retry_list":

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> int:
            return stubborn(n).result()

    elif name == "hitl":

        @entrypoint(checkpointer=saver)
        def wf(n: int) -> dict:
            a = double(n).result()
            answer = interrupt({"question": "approve?", "a": a})
            b = add_one(a).result()
            return {"a": a, "answer": answer, "b": b}

    elif name == "prev":

        @entrypoint(checkpointer=saver)
        def wf(n: int, *, previous: Any = None) -> entrypoint.final[Any, int]:
            return entrypoint.final(value=previous, save=(previous or 0) + n)

    elif name == "task_hitl":

        @entrypoint(checkpointer=saver)
        def wf(n: int):
            return ask(n).result()

    elif name == "task_timeout":

        @entrypoint(checkpointer=saver)
        async def wf(n: int) -> int:
            return await sleepy(n)

    elif name == "timeout":
        g = StateGraph(Node)
        g.add_node("slow", slow, timeout=0.2, retry_policy=QUICK)
        g.add_edge(START, "slow")
        return g.compile(checkpointer=saver)
    elif name == "ask":

        def ask_node(s: Node):
            return {"y": interrupt({"x": s["x"]})}

        g = StateGraph(Node)
        g.add_node("ask", ask_node)
        g.add_edge(START, "ask")
        return g.compile(checkpointer=saver)
    elif name == "io":
        g = StateGraph(IoAll, input_schema=IoIn, output_schema=IoOut)
        g.add_node("think", lambda s: {"notes": "thought about " + s["question"]})
        g.add_node("reply", lambda s: {"answer": s["notes"].upper()})
        g.add_edge(START, "think")
        g.add_edge("think", "reply")
        return g.compile(checkpointer=saver)
    elif name == "pair":
        g = StateGraph(Pair)
        for n in ["a", "b"]:
            g.add_node(n, pair_node(n))
        # One branch to both: two plain edges' writes are ordered by a set, which differs
        # between processes.
        g.add_conditional_edges(START, lambda s: ["a", "b"], ["a", "b"])
        return g.compile(checkpointer=saver)
    elif name in ("handled", "handled_flaky"):
        g = StateGraph(Pair)
        g.add_node("a", broken, error_handler=handler_of(name == "handled_flaky"))
        g.add_node("b", plain("b"))
        g.add_node("fallback", plain("fallback"))
        g.add_conditional_edges(START, lambda s: ["a", "b"], ["a", "b"])
        return g.compile(checkpointer=saver)
    elif name in ("sub_task", "sub_thread", "sub_off"):
        mode = {"sub_task": None, "sub_thread": True, "sub_off": False}[name]
        g = StateGraph(Outer)
        g.add_node("child", inner_graph(mode))
        g.add_edge(START, "child")
        return g.compile(checkpointer=saver)
    elif name == "sub_call":
        inner = asker()

        def outer(s: Outer):
            log("outer")
            return {"total": inner.invoke({"n": s["n"]})["total"]}

        g = StateGraph(Outer)
        g.add_node("outer", outer)
        g.add_edge(START, "outer")
        return g.compile(checkpointer=saver)
    elif name == "task_cache":

        @entrypoint(checkpointer=saver, cache=node_cache())
        def wf(n: int) -> int:
            return costly(n).result()

    elif name == "cache":
        g = StateGraph(Node)
        g.add_node("expensive", expensive, cache_policy=CachePolicy(key_func=lambda s: str(s["x"]), ttl=600))
        g.add_edge(START, "expensive")
        return g.compile(checkpointer=saver, cache=node_cache())
    elif name == "node":

        def work(s: Node):
            return {"y": double(s["x"]).result()}

        g = StateGraph(Node)
        g.add_node("work", work)
        g.add_edge(START, "work")
        return g.compile(checkpointer=saver)
    else:
        raise SystemExit(f"unknown workflow {name}")
    return wf


def version(v):
    """A channel version's counter (the random fraction differs between runs)."""
    return int(str(v).split(".")[0]) if isinstance(v, str) else v


def dump(saver, conn, thread, is_pg):
    """The thread's checkpoints, newest first, with ids and task ids replaced by ordinals."""
    config = {"configurable": {"thread_id": thread}}
    tuples = list(saver.list(config))
    cp_ids = {t.config["configurable"]["checkpoint_id"]: f"cp{i}" for i, t in enumerate(tuples)}
    task_ids = {}

    def tid(t):
        if t == "00000000-0000-0000-0000-000000000000":
            return "null"
        return task_ids.setdefault(t, f"task{len(task_ids)}")

    def ns_of(ns):
        """A namespace with its task ids replaced by ordinals."""
        return "|".join(
            ":".join([p.split(":")[0]] + [tid(x) for x in p.split(":")[1:]]) for p in ns.split("|")
        ) if ns else ""

    out = []
    for t in reversed(tuples):
        c = t.checkpoint
        cid = t.config["configurable"]["checkpoint_id"]
        ns = t.config["configurable"]["checkpoint_ns"]
        if is_pg:
            with conn.cursor() as cur:
                cur.execute(
                    "select task_id, idx, channel, task_path from checkpoint_writes "
                    "where thread_id = %s and checkpoint_ns = %s and checkpoint_id = %s",
                    (thread, ns, cid),
                )
                rows = [(r["task_id"], r["idx"], r["channel"], r["task_path"]) for r in cur.fetchall()]
        else:
            rows = conn.execute(
                "select task_id, idx, channel, task_path from writes "
                "where thread_id = ? and checkpoint_ns = ? and checkpoint_id = ?",
                (thread, ns, cid),
            ).fetchall()
        value_of = {(w[0], w[1]): w[2] for w in t.pending_writes}
        writes = [
            [tid(task_id), idx, channel, path, jsonable(value_of.get((task_id, channel)))]
            for task_id, idx, channel, path in sorted(rows, key=lambda r: (r[3], r[1], r[2]))
        ]
        out.append(
            {
                "id": cp_ids[cid],
                "ns": ns_of(ns),
                "parent": cp_ids.get((t.parent_config or {}).get("configurable", {}).get("checkpoint_id")),
                "metadata": jsonable(
                    {**t.metadata, "parents": {k: cp_ids.get(v, v) for k, v in (t.metadata.get("parents") or {}).items()}}
                ),
                "channel_values": jsonable(c["channel_values"]),
                "channel_versions": {k: version(v) for k, v in c["channel_versions"].items()},
                "versions_seen": {
                    n: {k: version(v) for k, v in seen.items()} for n, seen in c["versions_seen"].items()
                },
                "writes": writes,
            }
        )
    return out


INTERRUPT_IDS = {}


# The stream modes `stream:` and `stream_resume:` print, each part as `[mode, chunk]`.
MODES = ["updates", "values"]


def jsonable(v):
    """JSON of a value, with interrupt ids (hashes of checkpoint-derived task ids) replaced
    by ordinals."""
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "value") and hasattr(v, "id") and type(v).__name__ == "Interrupt":
        return {"value": jsonable(v.value), "id": INTERRUPT_IDS.setdefault(v.id, f"i{len(INTERRUPT_IDS)}")}
    if isinstance(v, BaseException):
        return repr(v)
    return v


async def run_async(db, name, thread, actions, is_pg, out):
    """`actions` of an async workflow, on LangGraph's async saver of the same database."""
    if is_pg:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as Saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as Saver
    async with Saver.from_conn_string(db) as saver:
        wf = build(name, saver)
        config = {"configurable": {"thread_id": thread}}
        for action in actions:
            verb, _, arg = action.partition(":")
            value = json.loads(arg) if arg else None
            if verb == "run":
                await wf.ainvoke(value, config)
            elif verb == "stream":
                parts = [p async for p in wf.astream(value, config, stream_mode=MODES)]
                out["streams"].append([jsonable(p) for p in parts])
            else:
                raise SystemExit(f"unknown action {action} for {name}")


def main(db, name, thread, actions):
    is_pg = db.startswith(("postgres://", "postgresql://"))
    out = {"streams": [], "outputs": []}
    if name in ASYNC_FLOWS:
        running = [a for a in actions if a != "dump"]
        asyncio.run(run_async(db, name, thread, running, is_pg, out))
        actions = [a for a in actions if a == "dump"]
    if is_pg:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
        saver.setup()
    else:
        conn = sqlite3.connect(db, check_same_thread=False)
        saver = SqliteSaver(conn)
    wf = build(name, saver)
    config = {"configurable": {"thread_id": thread}}
    for action in actions:
        verb, _, arg = action.partition(":")
        value = json.loads(arg) if arg else None
        if verb == "run":
            wf.invoke(value, config)
        elif verb == "resume":
            wf.invoke(Command(resume=value), config)
        elif verb in ("stream", "stream_resume", "stream_continue"):
            arg = {"stream": value, "stream_resume": Command(resume=value), "stream_continue": None}[verb]
            parts = []
            try:
                for p in wf.stream(arg, config, stream_mode=MODES):
                    parts.append(jsonable(p))
            except Exception as e:
                parts.append(["error", repr(e)])
            out["streams"].append(parts)
        elif verb in ("tasks", "tasks_continue"):
            parts = []
            try:
                for p in wf.stream(value if verb == "tasks" else None, config, stream_mode="tasks"):
                    if "input" in p:
                        parts.append(["start", p["name"]])
                    else:
                        parts.append(["result", p["name"], p["error"] is not None])
            except Exception as e:
                parts.append(["error", repr(e)])
            out["streams"].append(parts)
        elif verb == "invoke":
            out["outputs"].append(jsonable(wf.invoke(value, config)))
        elif verb in ("invoke_v2", "resume_v2"):
            arg = value if verb == "invoke_v2" else Command(resume=value)
            o = wf.invoke(arg, config, version="v2")
            out["outputs"].append({"value": jsonable(o.value), "interrupts": jsonable(list(o.interrupts))})
        elif verb in ("stream_v2", "stream_resume_v2"):
            arg = value if verb == "stream_v2" else Command(resume=value)
            parts = wf.stream(arg, config, stream_mode=MODES, version="v2")
            out["streams"].append([jsonable(p) for p in parts])
        elif verb == "dump":
            out["dump"] = dump(saver, conn, thread, is_pg)
        else:
            raise SystemExit(f"unknown action {action}")
    conn.close()
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
