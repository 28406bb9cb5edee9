"""A MongoDB-compatible server for the tests: mongoeco's wire-protocol proxy on an in-memory engine.

Usage: python mongoeco_server.py HOST PORT

mongoeco (https://pypi.org/project/mongoeco/) is a MongoDB-compatible server written in Python,
not MongoDB: it speaks MongoDB's wire protocol (it answers `hello` as a standalone MongoDB 7.0),
so pymongo and the Rust driver can talk to it with
`mongodb://HOST:PORT/?directConnection=true`. Everything lives in memory and is gone when the
process exits.

Prints one line, `mongoeco listening on mongodb://HOST:PORT/?directConnection=true`, once the
socket accepts connections, then serves until SIGTERM or SIGINT. Python's logging (mongoeco's
warnings and errors) goes to stderr. `scripts/mongo-server.sh` runs it in the background with
stdout and stderr appended to its log file.
"""

import asyncio
import logging
import signal
import sys

from mongoeco.engines.memory import MemoryEngine
from mongoeco.wire.proxy import AsyncMongoEcoProxyServer


async def serve(host, port):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncMongoEcoProxyServer(engine=MemoryEngine(), host=host, port=port) as server:
        addr = server.address
        print(f"mongoeco listening on mongodb://{addr.host}:{addr.port}/?directConnection=true", flush=True)
        await stop.wait()
    logging.info("mongoeco stopped")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    host, port = sys.argv[1], int(sys.argv[2])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(host, port))


if __name__ == "__main__":
    main()
