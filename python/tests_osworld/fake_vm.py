"""A loopback stand-in for OSWorld's in-VM control server (port 5000), just the endpoints the sidecar's
getters and setup steps call: POST /file (a file from a local folder; 404 when missing), GET /terminal,
POST /setup/<step> (recorded). `broken = True` makes it answer 500, as a dying VM's server does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs


class FakeVm:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.setup_calls: list[tuple[str, Any]] = []
        self.broken = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if fake.broken:
                    self._reply(500, b"{}")
                elif self.path == "/terminal":
                    self._reply(200, json.dumps({"output": ""}).encode())
                else:
                    self._reply(404, b"{}")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if fake.broken:
                    self._reply(500, b"{}")
                elif self.path == "/file":
                    name = parse_qs(raw.decode())["file_path"][0]
                    target = fake.root / name.lstrip("/")
                    if target.is_file():
                        self._reply(200, target.read_bytes(), "application/octet-stream")
                    else:
                        self._reply(404, b'{"error": "File not found"}')
                elif self.path.startswith("/setup/"):
                    fake.setup_calls.append((self.path, json.loads(raw or b"null")))
                    self._reply(200, b'{"status": "success"}')
                else:
                    self._reply(404, b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def address(self) -> dict[str, object]:
        return {"host": "127.0.0.1", "serverPort": self.port}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
