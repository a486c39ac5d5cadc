"""`python -m dartflow_osworld --port 0`: starts the sidecar and prints `LISTENING http://host:port`
(on stdout, one line) once it accepts requests, so a parent process knows where it is."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .operations import Settings
from .osworld_modules import load_osworld_modules
from .server import Sidecar, serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dartflow_osworld", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50010)
    parser.add_argument("--cache-dir", default=".data/osworld-cache", help="OSWorld's download cache")
    parser.add_argument(
        "--probe-timeout", type=float, default=10.0, help="seconds to wait for the VM to answer"
    )
    parser.add_argument(
        "--retry-interval", type=float, default=5.0, help="seconds between OSWorld's VM retries"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    mods = load_osworld_modules()
    for module, error in sorted(mods.failed.items()):
        logging.getLogger("dartflow_osworld").warning("not available: %s (%s)", module, error)
    token = os.environ.get("DARTFLOW_OSWORLD_SIDECAR_TOKEN") or None
    settings = Settings(probe_timeout_s=args.probe_timeout, retry_interval_s=args.retry_interval)
    server = serve(Sidecar(mods, Path(args.cache_dir).resolve(), settings, token), args.host, args.port)
    print(f"LISTENING http://{args.host}:{server.server_address[1]}", flush=True)
    # OSWorld's metrics print() freely: send that to the log, so a parent that stops reading stdout after
    # the LISTENING line can never block the sidecar on a full pipe.
    sys.stdout = sys.stderr
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
