"""Print the messages of a thread's latest checkpoint as Python LangGraph reads them, as JSON.

Usage: python read_messages.py DB THREAD_ID

DB is a SQLite checkpoint database (SqliteSaver); the output is the list of
`message.model_dump()`s of the `messages` channel of the thread's newest checkpoint. The file
is only read.
"""

import json
import sqlite3
import sys

from langgraph.checkpoint.sqlite import SqliteSaver

conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
saver = SqliteSaver(conn)
saved = saver.get_tuple({"configurable": {"thread_id": sys.argv[2]}})
if saved is None:
    sys.exit(f"no checkpoint of thread {sys.argv[2]!r} in {sys.argv[1]}")
messages = saved.checkpoint["channel_values"]["messages"]
json.dump([m.model_dump() for m in messages], sys.stdout)
