"""The trainer's heartbeat keep-alive (dartflow_vlm/keepalive.py, worker.kept_alive).

- With a controlled clock: the latest details are re-sent after a third of the timeout of silence, a
  phase that heartbeats often gets no extra sends, a send that fails does not end it, nothing after stop.
- On the real Temporal dev server that `npm test` starts (skipped when it does not answer): a sync
  activity whose one phase lasts 25 s under a 10-s heartbeat timeout completes on its first attempt when
  run through kept_alive (without it, every attempt times out on its heartbeat). The SDK sends a heartbeat
  at most every 0.8 of the timeout: 10 s leaves 2 s of margin on a loaded machine.
"""

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from dartflow_vlm.keepalive import KeepAlive
from dartflow_vlm.worker import connect_temporal, kept_alive


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_latest_details_are_re_sent_after_a_third_of_the_timeout_of_silence() -> None:
    clock = Clock()
    sent: list[dict[str, Any]] = []
    resent: list[dict[str, Any]] = []
    keep = KeepAlive(send=sent.append, resend=resent.append, timeout_s=60, clock=clock)
    keep.beat({"phase": "loading", "trainStep": 3})
    clock.now = 19.9
    assert keep.tick() is False, "not yet: 19.9 s of silence, under a third of 60 s"
    clock.now = 20.0
    assert keep.tick() is True
    assert resent == [{"phase": "loading", "trainStep": 3, "keptAlive": True}]
    clock.now = 30.0
    assert keep.tick() is False, "the re-send counts as a heartbeat"
    # A phase that heartbeats every 10 s gets no extra sends.
    for t in range(40, 200, 10):
        clock.now = float(t)
        keep.beat({"phase": "update", "minibatch": t})
        assert keep.tick() is False
    assert len(resent) == 1
    assert len(sent) == 1 + 16


def test_a_step_silent_for_longer_than_max_silence_is_no_longer_kept_alive() -> None:
    clock = Clock()
    resent: list[dict[str, Any]] = []
    keep = KeepAlive(send=lambda _d: None, resend=resent.append, timeout_s=60, clock=clock, max_silence_s=600)
    keep.beat({"phase": "saving"})
    for t in range(20, 601, 20):
        clock.now = float(t)
        keep.tick()
    assert len(resent) == 30, "kept alive through 10 minutes of its own silence"
    clock.now = 620.0
    assert keep.tick() is False, "then left to time out (a hung collective)"
    keep.beat({"phase": "update"})
    clock.now = 640.0
    assert keep.tick() is True, "a heartbeat of its own starts it again"


def test_a_failed_re_send_does_not_end_the_keep_alive_and_nothing_is_sent_after_stop() -> None:
    calls: list[dict[str, Any]] = []

    def flaky(details: dict[str, Any]) -> None:
        calls.append(details)
        if len(calls) == 1:
            raise RuntimeError("server unreachable")

    keep = KeepAlive(send=lambda _d: None, resend=flaky, timeout_s=0.3)
    with keep:
        keep.beat({"phase": "saving"})
        deadline = time.monotonic() + 10
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(calls) >= 2, "the thread went on after a failed send"
    after = len(calls)
    time.sleep(0.5)
    assert len(calls) == after, "nothing after stop"
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        KeepAlive(send=lambda _d: None, resend=lambda _d: None, timeout_s=0)


PHASE_S = 25.0


def _one_long_phase(heartbeat: Callable[[dict[str, Any]], None]) -> str:
    heartbeat({"phase": "loading"})
    time.sleep(PHASE_S)  # a checkpoint load that sends nothing
    return f"attempt {activity.info().attempt}"


@activity.defn(name="longPhaseKeptAlive")
def long_phase_kept_alive() -> str:
    return kept_alive(_one_long_phase)


@activity.defn(name="longPhaseBare")
def long_phase_bare() -> str:
    return _one_long_phase(lambda details: activity.heartbeat(details))


@workflow.defn(name="callLongPhase")
class CallLongPhase:
    @workflow.run
    async def run(self, name: str) -> str:
        result: str = await workflow.execute_activity(
            name,
            start_to_close_timeout=timedelta(minutes=2),
            heartbeat_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=100)),
        )
        return result


async def _client() -> Client:
    client = await asyncio.wait_for(connect_temporal(dict(os.environ)), 10)
    await client.workflow_service.get_system_info(GetSystemInfoRequest())
    return client


def test_a_phase_longer_than_the_heartbeat_timeout_completes_on_its_first_attempt() -> None:
    async def scenario() -> tuple[str, BaseException | None]:
        try:
            client = await _client()
        except Exception as err:
            pytest.skip(f"no Temporal server: {err}")
        queue = f"keepalive-{uuid.uuid4().hex[:8]}"
        with ThreadPoolExecutor(max_workers=2) as executor:
            async with Worker(
                client,
                task_queue=queue,
                workflows=[CallLongPhase],
                activities=[long_phase_kept_alive, long_phase_bare],
                activity_executor=executor,
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):
                kept = await client.execute_workflow(
                    CallLongPhase.run, "longPhaseKeptAlive", id=f"kept-{uuid.uuid4().hex}", task_queue=queue
                )
                bare_error: BaseException | None = None
                try:
                    await client.execute_workflow(
                        CallLongPhase.run, "longPhaseBare", id=f"bare-{uuid.uuid4().hex}", task_queue=queue
                    )
                except WorkflowFailureError as err:
                    bare_error = err
        return kept, bare_error

    kept, bare_error = asyncio.run(scenario())
    assert kept == "attempt 1", "the kept-alive phase completed on its first attempt"
    # The control: the same phase without the keep-alive times out on every attempt.
    assert bare_error is not None
    activity_error = bare_error.__cause__
    assert isinstance(activity_error, ActivityError)
    timeout = activity_error.__cause__
    assert isinstance(timeout, TimeoutError)
    assert timeout.type == TimeoutType.HEARTBEAT
