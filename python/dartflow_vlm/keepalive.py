"""Keeps a live trainer activity's attempt alive through long phases that send no heartbeat of their own.

The trainer heartbeats at every phase and sample, but one phase of a real VLM can outlast the heartbeat
timeout by itself: loading a 7B checkpoint, writing and uploading its safetensors, one minibatch on a
slow device, a collective waiting for the other ranks. Temporal then times the live attempt out and
starts a retry on another trainer while the first still trains (the env workers had the same bug with
long OSWorld resets; activities/env/heartbeat-gate.ts is their fix). While the activity runs, a thread
re-sends the latest heartbeat details whenever nothing went out for a third of the heartbeat timeout
(checked every sixth of it); the SDK, which throttles heartbeats to one per 0.8 of the timeout, then
sends the server one at least that often. A dead or cut-off worker still
times out (its process, and this thread, are gone). A step that sent nothing of its own for
MAX_SILENCE_S (10 minutes: longer than loading or uploading a 7B checkpoint) is no longer kept alive,
so a hung step (a collective waiting for a dead rank on NCCL, which only gives up at --dist-timeout)
times out and is retried elsewhere after that instead of holding on to the start-to-close timeout.
"""

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

Send = Callable[[dict[str, Any]], None]

MAX_SILENCE_S = 600.0


class KeepAlive:
    """`beat` sends (and remembers) heartbeat details; between `start` and `stop` a thread re-sends the
    latest ones through `resend` after `timeout_s / 3` of silence. `resend` runs on that thread: it must be
    safe to call from it (Temporal's sync-activity heartbeat is, inside a copy of the activity's context)."""

    def __init__(
        self,
        send: Send,
        resend: Send,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_silence_s: float = MAX_SILENCE_S,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self._send = send
        self._resend = resend
        self._quiet_s = timeout_s / 3
        self._clock = clock
        self._lock = threading.Lock()
        self._max_silence_s = max_silence_s
        self._latest: dict[str, Any] = {}
        self._last = clock()
        self._last_own = self._last
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self, details: dict[str, Any]) -> None:
        with self._lock:
            self._latest = details
            self._last = self._last_own = self._clock()
            self._send(details)

    def tick(self) -> bool:
        """Re-sends the latest details if nothing went out for a third of the timeout (and the step sent
        something of its own within max_silence_s); True if it did."""
        with self._lock:
            now = self._clock()
            if now - self._last < self._quiet_s or now - self._last_own > self._max_silence_s:
                return False
            self._last = now
            # Under the lock, so a newer beat() cannot be overtaken by this older re-send.
            # A failed send must not end the keep-alive: the next tick tries again.
            with contextlib.suppress(Exception):
                self._resend({**self._latest, "keptAlive": True})
        return True

    def _run(self) -> None:
        # Waking every sixth of the timeout bounds the silence at half of it.
        while not self._stopped.wait(self._quiet_s / 2):
            self.tick()

    def start(self) -> "KeepAlive":
        self._thread = threading.Thread(target=self._run, name="trainer-keepalive", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "KeepAlive":
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
