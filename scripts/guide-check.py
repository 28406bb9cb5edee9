#!/usr/bin/env python3
"""Runs what the guide (crates/stategraph/guide/*.md) tells a reader to type.

Usage: scripts/guide-check.py [shell|newcomer|all]   (default: all)

- shell: each chapter's ```sh blocks, in order, in one bash session per chapter
  (`set -euo pipefail`), from the repository root. (Its ```rust blocks are doc tests of the
  `stategraph` crate, run by `cargo test`.)
- newcomer: follows chapters 1-3 as a new user would, in a fresh directory: the ```sh newcomer
  blocks in order in one bash session (so `cd` carries over), each ```rust block whose first
  line is `// src/main.rs` written to `src/main.rs` with its hidden doc-test lines (`# ...`)
  left out, as a reader copying from the rendered page gets it. `cargo add stategraph` becomes
  a path dependency on this checkout. The output of each `cargo run` must equal the ```text
  block that follows it.

The Rust builds use CARGO_TARGET_DIR (default ~/.cache/stategraph/target), so dependencies
already built by the test suite are reused; the new crate starts from this checkout's
Cargo.lock for the same reason (a reader's `cargo add` may pick newer patch releases).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "crates" / "stategraph" / "guide"
FENCE = re.compile(r"^```(.*)$")


def blocks(path):
    """The fenced blocks of a Markdown file: (info string, text, line number)."""
    out, info, body, start = [], None, [], 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line.strip()) if line.startswith("```") else None
        if info is None and m is not None:
            info, body, start = m.group(1).strip(), [], n
        elif info is not None and line.startswith("```"):
            out.append((info, "\n".join(body) + "\n", start))
            info = None
        elif info is not None:
            body.append(line)
    if info is not None:
        sys.exit(f"{path.name}:{start}: a code block is never closed")
    return out


def visible(rust):
    """A doc-test block as the rendered page shows it: hidden `# ` lines left out."""
    lines = []
    for line in rust.splitlines():
        s = line.strip()
        if s == "#" or s.startswith("# "):
            continue
        lines.append(line.replace("##", "#", 1) if s.startswith("##") else line)
    return "\n".join(lines) + "\n"


def env():
    e = dict(os.environ)
    e.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "stategraph" / "target"))
    e.setdefault("CARGO_INCREMENTAL", "0")
    e["CARGO_TERM_COLOR"] = "never"
    return e


def run_shell():
    for chapter in sorted(GUIDE.glob("*.md")):
        script = [b for b in blocks(chapter) if b[0] == "sh"]
        if not script:
            continue
        t0 = time.time()
        text = "set -euo pipefail\n" + "".join(
            f"echo '+ {chapter.name}:{line}' >&2\n{body}" for _, body, line in script
        )
        r = subprocess.run(["bash", "-c", text], cwd=REPO, env=env())
        if r.returncode != 0:
            sys.exit(f"guide-check: a shell block of {chapter.name} failed (exit {r.returncode})")
        print(f"guide-check: {chapter.name}: {len(script)} shell blocks ran in {time.time() - t0:.0f} s", file=sys.stderr)


def run_newcomer():
    chapters = sorted(GUIDE.glob("*.md"))[:3]
    steps = []  # ("sh", text) | ("main", text) | ("expect", text)
    for chapter in chapters:
        last_ran = False
        for info, body, line in blocks(chapter):
            words = info.replace(",", " ").split()
            if words[:2] == ["sh", "newcomer"]:
                steps.append(("sh", body, f"{chapter.name}:{line}"))
                last_ran = "cargo run" in body
            elif words[:1] == ["rust"] or info == "":
                if body.startswith("// src/main.rs"):
                    steps.append(("main", visible(body), f"{chapter.name}:{line}"))
                last_ran = False
            elif words[:1] == ["text"] and last_ran:
                steps.append(("expect", body, f"{chapter.name}:{line}"))
                last_ran = False
            else:
                last_ran = False
    if not any(k == "main" for k, _, _ in steps):
        sys.exit("guide-check: chapters 1-3 have no `// src/main.rs` program")
    work = Path(tempfile.mkdtemp(prefix="stategraph-newcomer-"))
    path_dep = f"cp {shlex.quote(str(REPO / 'Cargo.lock'))} . && cargo add stategraph --path {shlex.quote(str(REPO / 'crates' / 'stategraph'))}"
    # One bash session: the state file keeps the working directory between steps.
    cwd, output = work, None
    t0 = time.time()
    for kind, body, where in steps:
        if kind == "sh":
            text = re.sub(r"(?m)^cargo add stategraph\s*$", path_dep, body)
            runs = "cargo run" in text
            script = f"set -euo pipefail\n{text}\npwd > {shlex.quote(str(work / '.cwd'))}\n"
            r = subprocess.run(["bash", "-c", script], cwd=cwd, env=env(), stdout=subprocess.PIPE, text=True)
            sys.stderr.write(r.stdout if not runs else "")
            if r.returncode != 0:
                sys.stderr.write(r.stdout)
                sys.exit(f"guide-check: newcomer step at {where} failed (exit {r.returncode})")
            cwd = Path((work / ".cwd").read_text().strip())
            output = r.stdout if runs else None
        elif kind == "main":
            (cwd / "src" / "main.rs").write_text(body)
            print(f"guide-check: wrote src/main.rs from {where}", file=sys.stderr)
        elif kind == "expect":
            if output is None:
                sys.exit(f"guide-check: the output at {where} follows no `cargo run`")
            if output.strip() != body.strip():
                sys.exit(
                    f"guide-check: `cargo run` printed something else than {where} shows:\n"
                    f"--- printed\n{output}--- the guide\n{body}"
                )
            print(f"guide-check: output matches {where}", file=sys.stderr)
    print(f"guide-check: the newcomer path of chapters 1-3 ran in {time.time() - t0:.0f} s", file=sys.stderr)
    shutil.rmtree(work)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what not in ("shell", "newcomer", "all"):
        sys.exit(__doc__)
    if what in ("newcomer", "all"):
        run_newcomer()
    if what in ("shell", "all"):
        run_shell()


if __name__ == "__main__":
    main()
