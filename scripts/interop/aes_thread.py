"""Write an encrypted thread with Python LangGraph.

Usage: python aes_thread.py DB THREAD

Runs the seeds' 2-node graph on THREAD of the SQLite file DB with
`EncryptedSerializer.from_pycryptodome_aes()` (key from LANGGRAPH_AES_KEY), so the Rust side
can check it reads Python's encrypted rows.
"""

import operator
import sqlite3
import sys
from typing import Annotated

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class Seed(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


def main(db, thread):
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = SqliteSaver(conn, serde=EncryptedSerializer.from_pycryptodome_aes())
    g = StateGraph(Seed)
    g.add_node("node_a", lambda s: {"foo": "a", "bar": ["a"]})
    g.add_node("node_b", lambda s: {"foo": "b", "bar": ["b"]})
    g.add_edge(START, "node_a")
    g.add_edge("node_a", "node_b")
    g.add_edge("node_b", END)
    g.compile(checkpointer=saver).invoke({"foo": "", "bar": []}, {"configurable": {"thread_id": thread}})
    conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
