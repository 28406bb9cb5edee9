"""Write an encrypted thread with Python LangGraph.

Usage: python aes_thread.py DB THREAD

Runs the seeds' 2-node graph on THREAD of the SQLite file DB with
`EncryptedSerializer.from_pycryptodome_aes()` (key from LANGGRAPH_AES_KEY), so the Rust side
can check it reads Python's encrypted rows.
"""

import os
import sqlite3
import sys

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_graph import build  # noqa: E402


def main(db, thread):
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = SqliteSaver(conn, serde=EncryptedSerializer.from_pycryptodome_aes())
    graph, std_input = build("seed", saver)
    graph.invoke(std_input, {"configurable": {"thread_id": thread}})
    conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
