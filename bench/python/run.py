"""The Python LangGraph side of the stategraph benchmark comparison.

    $PY bench/python/run.py WORKLOAD --backend B [--db URL] [--n N] [--runs R]
                            [--delta] [--snapshot-every K] [--json] [--check]

`$PY` is the venv `scripts/python-env.sh` prints (LangGraph 1.2.22 and its savers, pinned).
`bench/WORKLOADS.md` is the contract shared with the Rust `stategraph-bench`: the command
line, the workloads and the JSON object printed with `--json` (exactly one object on stdout,
everything else on stderr; without `--json` a one-line human summary). In short:

- WORKLOAD: linear, fanout, chat, history, sequential_1000, wide_state_15x600,
  react_agent_100x, fanout_to_subgraph_100x (graphs in `workloads.py`).
- B: none (no checkpointer), memory (InMemorySaver), sqlite (SqliteSaver), postgres
  (PostgresSaver in a fresh schema), mongodb (MongoDBSaver in a fresh database) — see
  `backends.py`. mysql and redis have no pinned
  Python saver: asking for them exits with code 2, as does an unknown workload.
- Each timed sample is one sync `graph.invoke` on a fresh uuid4 thread (recursion limit
  10**9, the library's default durability "async"), after one untimed warm-up invoke;
  `chat` times each turn of one thread (no warm-up), `history` times
  `list(graph.get_state_history(config))` of a `chat` thread built untimed.
- Timing is `time.perf_counter` around the call only; inputs are built and garbage is
  collected outside the timed region.

`--check` (Python only, not part of the contract) asserts that the graphs did what the
workload says (item/message/joke counts, super-steps, checkpoints per run/turn) and logs it
on stderr; it adds one untimed checked run to the store, so `rows`/`db_bytes` then differ.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import json
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional
from uuid import uuid4

sys.dont_write_bytecode = True  # no __pycache__ next to the helper modules in the clone
import backends  # noqa: E402  (helper modules next to this file)
import workloads as wl  # noqa: E402

RECURSION_LIMIT = 10**9
SUPPORTED_BACKENDS = ("none", "memory", "sqlite", "postgres", "mongodb")
UNSUPPORTED_BACKENDS = ("mysql", "redis")


@dataclass(frozen=True)
class Workload:
    default_n: int
    default_runs: int
    # The per-run figure the contract reports besides median/min: ms_per_step,
    # ms_per_invoke or ms_per_checkpoint.
    per: str


WORKLOADS = {
    "linear": Workload(100, 10, "ms_per_step"),
    "fanout": Workload(50, 10, "ms_per_invoke"),
    "chat": Workload(200, 1, "ms_per_invoke"),
    "history": Workload(200, 10, "ms_per_checkpoint"),
    "sequential_1000": Workload(1000, 10, "ms_per_step"),
    "wide_state_15x600": Workload(600, 5, "ms_per_invoke"),
    "react_agent_100x": Workload(100, 5, "ms_per_invoke"),
    "create_agent_20x": Workload(20, 5, "ms_per_invoke"),
    "fanout_to_subgraph_100x": Workload(100, 5, "ms_per_invoke"),
    "functional_50": Workload(50, 10, "ms_per_invoke"),
}


class UsageError(Exception):
    """A request this side cannot serve (exit code 2)."""


def log(msg: str) -> None:
    print(f"run.py: {msg}", file=sys.stderr, flush=True)


def run_config(backend: backends.Backend, thread_id: Optional[str] = None) -> dict:
    """The invoke config: a thread id only when there is a checkpointer."""
    config: dict[str, Any] = {"recursion_limit": RECURSION_LIMIT}
    if backend.saver is not None:
        config["configurable"] = {"thread_id": thread_id or str(uuid4())}
    return config


def count_supersteps(graph, inp: Any) -> int:
    """Super-steps of one invoke of an *uncheckpointed* graph, from its debug stream.

    Counts the distinct steps in which a task ran, i.e. excluding the input step that runs
    the `__start__` node (so a chain of n nodes has n super-steps).
    """
    steps = set()
    for event in graph.stream(inp, {"recursion_limit": RECURSION_LIMIT}, stream_mode="debug"):
        if event["type"] == "task":
            steps.add(event["step"])
    return len(steps)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(milliseconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1000.0, result


# --------------------------------------------------------------------------------------------
# Invoke workloads: one invoke per run on a fresh thread


def invoke_setup(name: str, n: int, saver) -> tuple[Any, Callable[[], Any], Optional[Callable]]:
    """(compiled graph, input factory, checker of one invoke's output) for an invoke workload."""
    if name == "linear":
        graph = wl.build_linear(n).compile(checkpointer=saver)

        def check(out):
            assert out["items"] == [f"item {i}" for i in range(n)], "linear items"
            assert out["counter"] == max(n - 1, 0), "linear counter"

        return graph, lambda: {"counter": 0}, check
    if name == "fanout":
        graph = wl.build_fanout(n).compile(checkpointer=saver)

        def check(out):
            assert sorted(out["results"]) == sorted(f"result {i}" for i in range(n)), "results"
            assert out["topic"] == f"joined {n}", "fanout topic"

        return graph, lambda: {"topic": "t"}, check
    if name == "sequential_1000":
        graph = wl.build_sequential(n).compile(checkpointer=saver)

        def check(out):
            assert out["messages"] == [], "sequential messages"

        return graph, lambda: {"messages": []}, check
    if name == "wide_state_15x600":
        graph = wl.build_wide_state(n).compile(checkpointer=saver)

        def check(out):
            assert len(out["messages"]) > n, "wide_state loop bound"

        return graph, wl.wide_state_input, check
    if name == "react_agent_100x":
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        graph = wl.build_react_agent(n, saver)

        def check(out):
            msgs = out["messages"]
            # human, n × (AI tool call, tool result), final AI answer
            assert len(msgs) == 2 * n + 2, f"react messages {len(msgs)}"
            assert sum(isinstance(m, ToolMessage) for m in msgs) == n, "tool messages"
            assert isinstance(msgs[-1], AIMessage) and msgs[-1].content == "answer" * 100
            assert msgs[2].content.startswith("result for query: "), "tool output"

        return graph, lambda: {"messages": [HumanMessage("hi?")]}, check
    if name == "create_agent_20x":
        from langchain_core.messages import AIMessage, HumanMessage

        graph = wl.build_create_agent(n, saver)

        def check(out):
            msgs = out["messages"]
            assert len(msgs) == 2 * n + 2, f"create_agent messages {len(msgs)}"
            assert isinstance(msgs[-1], AIMessage) and msgs[-1].content == "answer" * 100

        return graph, lambda: {"messages": [HumanMessage("hi?")]}, check
    if name == "fanout_to_subgraph_100x":
        graph = wl.build_fanout_to_subgraph().compile(checkpointer=saver)
        # The same n subjects for every run (built once, outside the timed region).
        subjects = [wl.random_text(1000) for _ in range(n)]

        def check(out):
            jokes = out["jokes"]
            assert len(jokes) == n, f"jokes {len(jokes)}"
            suffix = " - hohoho" + " a" * 10
            assert sorted(jokes) == sorted(f"Joke about {s}{suffix}" for s in subjects), "jokes"

        return graph, lambda: {"subjects": list(subjects)}, check
    if name == "functional_50":
        graph = wl.build_functional(saver)

        def check(out):
            assert out == [f"result {i}" for i in range(n)], "functional results"

        return graph, lambda: n, check
    raise AssertionError(name)


def fixed_steps(name: str, n: int) -> Optional[int]:
    """Super-steps of one invoke where the graph shape fixes them (None: not fixed)."""
    return {"linear": n, "sequential_1000": n, "fanout": 3}.get(name)


def run_invoke_workload(name: str, n: int, runs: int, backend, check: bool) -> dict:
    graph, make_input, checker = invoke_setup(name, n, backend.saver)

    steps = fixed_steps(name, n)
    if name == "wide_state_15x600" or (check and steps is not None):
        # Counted on an uncheckpointed copy so the store holds only the warm-up and timed runs.
        counted = count_supersteps(invoke_setup(name, n, None)[0], make_input())
        if steps is not None:
            assert counted == steps, f"super-steps: counted {counted}, expected {steps}"
            log(f"check: {counted} super-steps")
        steps = counted

    # Untimed warm-up (its own fresh thread).
    out = graph.invoke(make_input(), run_config(backend))
    if check:
        checker(out)
        if backend.saver is not None:
            # One checkpoint per super-step plus the input and __start__ ones.
            cfg = run_config(backend)
            graph.invoke(make_input(), cfg)
            listed = len(list(graph.get_state_history(cfg)))
            if steps is not None:
                assert listed == steps + 2, f"checkpoints {listed}, steps {steps}"
            log(f"check: {listed} checkpoints in one run")
        log(f"check: {name} output ok")

    samples = []
    for _ in range(runs):
        inp, config = make_input(), run_config(backend)
        gc.collect()
        ms, _ = timed(lambda: graph.invoke(inp, config))
        samples.append(ms)

    result = summarize(samples)
    median = result["median_ms"]
    if WORKLOADS[name].per == "ms_per_step":
        result["ms_per_step"] = median / steps
    else:
        result["ms_per_invoke"] = median
    if steps is not None:
        result["steps"] = steps
    return result


# --------------------------------------------------------------------------------------------
# chat and history: one thread of n turns


def chat_thread(n: int, backend, delta: bool, snapshot_every: int):
    """(graph, config, user messages) of a chat thread with n pre-generated turns."""
    users = [wl.random_text(200) for _ in range(n)]
    replies = iter([wl.random_text(200) for _ in range(n)])
    graph = wl.build_chat(replies, delta, snapshot_every).compile(checkpointer=backend.saver)
    return graph, run_config(backend), users


def run_chat(n: int, backend, delta: bool, snapshot_every: int, check: bool) -> dict:
    graph, config, users = chat_thread(n, backend, delta, snapshot_every)
    turn_ms: list[float] = []
    bytes_by_turn: list[list[int]] = []
    for turn, user in enumerate(users, start=1):
        inp = {"messages": [user]}
        ms, _ = timed(lambda: graph.invoke(inp, config))
        turn_ms.append(ms)
        if backend.measure is not None and (turn % 10 == 0 or turn == n):
            bytes_by_turn.append([turn, backend.measure()[0]])
    if check and backend.saver is not None:
        msgs = graph.get_state(config).values["messages"]
        assert len(msgs) == 2 * n and all(isinstance(m, str) for m in msgs), "chat messages"
        assert msgs[-2] == users[-1], "chat order"
        log(f"check: chat thread holds {len(msgs)} messages")

    result = summarize(turn_ms)
    result["ms_per_invoke"] = result["median_ms"]
    result["turn_ms"] = turn_ms
    result["first20_ms"] = statistics.median(turn_ms[:20])
    result["last20_ms"] = statistics.median(turn_ms[-20:])
    if backend.measure is not None:
        result["bytes_by_turn"] = bytes_by_turn
    result["delta"] = delta
    result["snapshot_every"] = snapshot_every if delta else None
    return result


def run_history(n: int, runs: int, backend, delta: bool, snapshot_every: int, check: bool) -> dict:
    if backend.saver is None:
        raise UsageError("history needs a checkpointer (backend none has no history)")
    graph, config, users = chat_thread(n, backend, delta, snapshot_every)
    for user in users:
        graph.invoke({"messages": [user]}, config)

    samples = []
    checkpoints = None
    for _ in range(runs):
        gc.collect()
        ms, listed = timed(lambda: list(graph.get_state_history(config)))
        samples.append(ms)
        checkpoints = len(listed)
    if check:
        assert checkpoints == 3 * n, f"history: {checkpoints} checkpoints for {n} turns"
        assert len(listed[0].values["messages"]) == 2 * n, "history head"
        log(f"check: history lists {checkpoints} checkpoints (3 per turn)")

    result = summarize(samples)
    result["ms_per_checkpoint"] = result["median_ms"] / checkpoints if checkpoints else None
    result["checkpoints"] = checkpoints
    result["delta"] = delta
    result["snapshot_every"] = snapshot_every if delta else None
    return result


# --------------------------------------------------------------------------------------------


def summarize(samples: list[float]) -> dict:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples)}


def human_line(r: dict) -> str:
    head = f"{r['impl']} {r['workload']} backend={r['backend']} n={r['n']} runs={r['runs']}:"
    parts = [f"{head} median {r['median_ms']:.3f} ms", f"min {r['min_ms']:.3f} ms"]
    for key, unit in (("ms_per_step", "ms/step"), ("ms_per_invoke", "ms/invoke"),
                      ("ms_per_checkpoint", "ms/checkpoint")):
        if r.get(key) is not None:
            parts.append(f"{r[key]:.4f} {unit}")
    if "steps" in r:
        parts.append(f"{r['steps']} steps")
    if "first20_ms" in r:
        parts.append(f"first20 {r['first20_ms']:.3f} ms, last20 {r['last20_ms']:.3f} ms")
    if "checkpoints" in r:
        parts.append(f"{r['checkpoints']} checkpoints")
    if "db_bytes" in r:
        parts.append(f"db {r['db_bytes']} bytes, rows {r['rows']}")
    return ", ".join(parts)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Python LangGraph side of the stategraph benchmarks.")
    p.add_argument("workload", choices=sorted(WORKLOADS))
    p.add_argument("--backend", required=True, choices=SUPPORTED_BACKENDS + UNSUPPORTED_BACKENDS)
    p.add_argument("--db", help="sqlite file / postgres or mongodb URL (default: temp file / fresh schema or database)")
    p.add_argument("--n", type=int)
    p.add_argument("--runs", type=int)
    p.add_argument("--delta", action="store_true", help="chat/history: DeltaChannel messages")
    p.add_argument("--snapshot-every", type=int, default=100, help="DeltaChannel snapshot_frequency")
    p.add_argument("--json", action="store_true", help="print the contract's JSON object")
    p.add_argument("--check", action="store_true", help="assert on the graphs' outputs (stderr)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)  # exits with code 2 on an unknown workload/backend
    if args.backend in UNSUPPORTED_BACKENDS:
        log(f"backend {args.backend} has no pinned Python LangGraph saver; "
            f"supported: {', '.join(SUPPORTED_BACKENDS)}")
        return 2
    spec = WORKLOADS[args.workload]
    n = spec.default_n if args.n is None else args.n
    runs = spec.default_runs if args.runs is None else args.runs
    if n < 1 or runs < 1 or args.snapshot_every < 1:
        log("--n, --runs and --snapshot-every must be positive")
        return 2
    if args.workload == "chat" and runs != 1:
        log("chat: the turns are the samples; --runs is ignored (runs = 1)")
        runs = 1
    if args.delta and args.workload not in ("chat", "history"):
        log(f"--delta only applies to chat/history; ignored for {args.workload}")

    result: dict[str, Any] = {
        "impl": "python",
        "version": "langgraph " + importlib.metadata.version("langgraph"),
        "workload": args.workload,
        "backend": args.backend,
        "n": n,
        "runs": runs,
        "durability": "async",
    }
    # Keep stdout for the one JSON object: anything the libraries print goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            with backends.open_backend(args.backend, args.db) as backend:
                if args.workload == "chat":
                    body = run_chat(n, backend, args.delta, args.snapshot_every, args.check)
                elif args.workload == "history":
                    body = run_history(n, runs, backend, args.delta, args.snapshot_every, args.check)
                else:
                    body = run_invoke_workload(args.workload, n, runs, backend, args.check)
                if backend.measure is not None:
                    body["db_bytes"], body["rows"] = backend.measure()
        except UsageError as e:
            log(str(e))
            return 2

    # Contract order: timings, per-unit figure, steps, storage, then workload-specific fields.
    order = ["median_ms", "min_ms", "ms_per_step", "ms_per_invoke", "ms_per_checkpoint",
             "steps", "db_bytes", "rows"]
    for key in order:
        if key in body:
            result[key] = body.pop(key)
    result.update(body)

    if args.json:
        print(json.dumps(result))
    else:
        print(human_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
