"""Assistant records through LangGraph's Python client (langgraph-sdk): create, update,
versions, latest, schemas, subgraphs, delete.

Usage: assistants_flow.py URL. Prints one JSON object describing what the server answered.
"""

import json
import sys

from langgraph_sdk import get_sync_client


def main() -> None:
    client = get_sync_client(url=sys.argv[1])
    out = {}

    a = client.assistants.create(
        "seed", context={"model": "m1"}, metadata={"team": "blue"}, name="Blue"
    )
    out["created"] = {k: a[k] for k in ("graph_id", "context", "config", "version", "name")}
    same = client.assistants.create(
        "seed", assistant_id=a["assistant_id"], if_exists="do_nothing", name="other"
    )
    out["do_nothing_name"] = same["name"]
    b = client.assistants.update(a["assistant_id"], name="Blue 2", metadata={"n": 2})
    out["updated"] = {k: b[k] for k in ("version", "name", "metadata")}
    versions = client.assistants.get_versions(a["assistant_id"])
    out["versions"] = [v["version"] for v in versions]
    back = client.assistants.set_latest(a["assistant_id"], 1)
    out["latest"] = {k: back[k] for k in ("version", "name")}
    out["count_blue"] = client.assistants.count(metadata={"team": "blue"})
    out["search_name"] = [x["name"] for x in client.assistants.search(name="Blue")]
    schemas = client.assistants.get_schemas(a["assistant_id"])
    out["schemas"] = {"graph_id": schemas["graph_id"], "state": schemas["state_schema"]}
    out["subgraphs"] = client.assistants.get_subgraphs(a["assistant_id"])
    thread = client.threads.create()
    out["run"] = client.runs.wait(
        thread["thread_id"], a["assistant_id"], input={"foo": "", "bar": []}
    )
    client.assistants.delete(a["assistant_id"])
    try:
        client.assistants.get(a["assistant_id"])
        out["after_delete"] = 200
    except Exception as e:  # httpx.HTTPStatusError
        out["after_delete"] = e.response.status_code

    print(json.dumps(out))


if __name__ == "__main__":
    main()
