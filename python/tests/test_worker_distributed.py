"""The Temporal trainer worker with two data-parallel ranks: `python -m dartflow_vlm.worker --world-size 2`
(FSDP over 2 processes on gloo, CPU) on the tiny Qwen2-VL, against the real Temporal dev server and MinIO
that `npm test` starts (skipped when either does not answer). Activities are called by name through a
workflow, as a campaign calls them.

- trainStep on 3 step samples (odd: one rank's share is padded) gives the same checkpoint as the same
  step in one process (weights equal up to reduction order), the same whole-batch metrics, and the
  per-sample record of all 3 samples; a second step resumes the sharded AdamW moments and still matches;
- behaviourClone with a minibatch that does not split evenly matches one process too;
- SIGTERM stops the worker and both ranks (status 0); a rank killed with SIGKILL makes rank 0 stop
  polling and exit non-zero instead of hanging in a collective.
"""

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from temporalio import workflow
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from dartflow_vlm import checkpoints
from dartflow_vlm.activities import TrainerDeps, run_behaviour_clone, run_train_step
from dartflow_vlm.models import PolicySetup
from dartflow_vlm.store import ObjectStore, S3Settings, StorageUnavailableError
from dartflow_vlm.worker import connect_temporal

from .trajectories import write_groups

TRAINER = {"learningRate": 1e-2, "klBeta": 0.05}
PYTHON_DIR = Path(__file__).resolve().parents[1]


@workflow.defn(name="callTrainerActivity")
class CallTrainerActivity:
    @workflow.run
    async def run(self, queue: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await workflow.execute_activity(
            name,
            payload,
            task_queue=queue,
            start_to_close_timeout=timedelta(minutes=10),
            heartbeat_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return result


def _bucket(label: str) -> Iterator[ObjectStore]:
    s = ObjectStore(S3Settings.from_env(), f"pytest-vlm-{label}-{uuid.uuid4().hex[:10]}")
    try:
        s.ensure_bucket()
    except StorageUnavailableError as err:
        pytest.skip(f"no MinIO: {err}")
    yield s
    s.remove_prefix("")
    s.remove_bucket()
    s.close()


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    """The 2-rank worker's bucket."""
    yield from _bucket("dist")


@pytest.fixture(scope="module")
def single_store() -> Iterator[ObjectStore]:
    """The same data for the same campaign in another bucket, trained in this process (world size 1)."""
    yield from _bucket("single")


@pytest.fixture(scope="module")
def temporal_ok() -> None:
    async def probe() -> None:
        client = await asyncio.wait_for(connect_temporal(dict(os.environ)), 10)
        await client.workflow_service.get_system_info(GetSystemInfoRequest())

    try:
        asyncio.run(probe())
    except Exception as err:
        pytest.skip(f"no Temporal server: {err}")


class RunningWorker:
    def __init__(self, proc: subprocess.Popen[str], log: Path, queue: str) -> None:
        self.proc, self.log, self.queue = proc, log, queue

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def ranks(self) -> list[int]:
        """The pids of the ranks this worker spawned (its children running Python)."""
        pids: list[int] = []
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*"):
            try:
                pids += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue
        return [p for p in pids if "spawn" in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_worker(
    store: ObjectStore, base: Path, work: Path, extra_env: dict[str, str] | None = None
) -> RunningWorker:
    queue = f"trainer-vlm-dist-{uuid.uuid4().hex[:8]}"
    log = work.parent / f"{queue}.log"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "S3_BUCKET": store.bucket,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **(extra_env or {}),
    }
    args = [sys.executable, "-m", "dartflow_vlm.worker", "--base-model", str(base)]
    args += ["--task-queue", queue, "--work-dir", str(work), "--world-size", "2", "--dist-timeout", "300"]
    with log.open("w") as out:
        proc = subprocess.Popen(
            args, cwd=PYTHON_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    worker = RunningWorker(proc, log, queue)
    deadline = time.monotonic() + 300
    while '"ready": true' not in worker.output():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the 2-rank worker did not start:\n{worker.output()[-4000:]}")
        time.sleep(0.5)
    assert '"worldSize": 2' in worker.output()
    return worker


def stop_worker(worker: RunningWorker, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
    if worker.proc.poll() is None:
        worker.proc.send_signal(sig)
    try:
        return worker.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        worker.proc.kill()
        raise


async def _call(queue: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
    client: Client = await connect_temporal(dict(os.environ))
    wf_queue = f"call-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=wf_queue,
        workflows=[CallTrainerActivity],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        result: dict[str, Any] = await client.execute_workflow(
            CallTrainerActivity.run,
            args=[queue, name, payload],
            id=f"call-{uuid.uuid4().hex}",
            task_queue=wf_queue,
        )
        return result


def call(queue: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_call(queue, name, payload))


def step_input(campaign: str, groups: list[dict[str, Any]], step: int, head: int) -> dict[str, Any]:
    return {
        "campaignId": campaign,
        "trainStep": step,
        "fromVersion": head,
        "groups": groups,
        "trainer": TRAINER,
        "maxStaleness": 2,
        "policy": {"seed": 0, "width": 1},
    }


def weights(store: ObjectStore, campaign: str, version: int, dest: Path) -> dict[str, torch.Tensor]:
    folder = checkpoints.download(store, checkpoints.read_hf_manifest(store, campaign, version), dest)
    return load_file(str(folder / "model.safetensors"))


def worst_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The L2 distance between two sets of weights, over every tensor."""
    assert a.keys() == b.keys()
    return math.sqrt(sum(float((a[k].double() - b[k].double()).pow(2).sum()) for k in a))


def ledger(store: ObjectStore, result: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(store.get_bytes(result["ledgerKey"]))
    return entry


@pytest.mark.usefixtures("temporal_ok")
def test_two_ranks_train_like_one_process_through_the_temporal_worker(
    store: ObjectStore, single_store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    base = models["seed0"]
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    # The same campaign and data in both buckets (BC's shuffle is seeded by the campaign id).
    for s in (store, single_store):
        groups = write_groups(s, base, campaign, groups=1, per_group=3)  # 3 samples: one share padded
        demos = write_groups(s, base, campaign, groups=1, per_group=3, seed=1, source="demo")
    single = TrainerDeps(single_store, PolicySetup(base), tmp_path / "single")
    lr = TRAINER["learningRate"]

    def compare(got: dict[str, Any], want: dict[str, Any], version: int) -> tuple[dict[str, Any], ...]:
        assert got["version"] == want["version"] == version
        w2 = weights(store, campaign, version, tmp_path / f"two-v{version}")
        w1 = weights(single_store, campaign, version, tmp_path / f"one-v{version}")
        parent = (
            load_file(str(base / "model.safetensors"))
            if version == 1
            else weights(single_store, campaign, version - 1, tmp_path / f"one-v{version - 1}")
        )
        # The two steps must agree to a small part of how far the step moved the weights. Only the
        # reduction order differs, and Adam turns that into large moves on the few weights whose gradient
        # is ~0 (g/√v of last-bit noise: the worst single weight has differed by 0.12·lr after BC's four
        # steps), so the measure is over all weights, not the worst one. Measured: 1e-7 (v1), 2e-5 (v2),
        # 4e-5 to 1e-4 (v3); another shuffle or a mis-shared batch moves most weights by ~lr differently (~1).
        relative = distance(w2, w1) / distance(w1, parent)
        worst = worst_difference(w2, w1)
        assert relative < 1e-2, (
            f"v{version}: the 2-rank step is another step (distance {relative:.3g} of the step's own; "
            f"worst weight {worst:.3g} = {worst / lr:.3g}·lr)"
        )
        l2, l1 = ledger(store, got), ledger(single_store, want)
        # Adam is scale-invariant: the gradient norm (before the clip) catches a mis-scaled gradient.
        assert l2["metrics"]["gradNorm"] == pytest.approx(l1["metrics"]["gradNorm"], rel=1e-4)
        return l2, l1

    worker = start_worker(store, base, tmp_path / "dist")
    try:
        ranks = worker.ranks()
        assert len(ranks) == 1, f"rank 0 spawned one more rank: {ranks}"
        for step in (1, 2):  # step 2 resumes step 1's AdamW moments, sharded over the ranks
            inp = step_input(campaign, groups, step, step - 1)
            l2, l1 = compare(call(worker.queue, "trainStep", inp), run_train_step(single, inp), step)
            m2, m1 = l2["metrics"], l1["metrics"]
            assert m2["worldSize"] == 2
            assert m1["worldSize"] == 1
            assert m2["samples"] == 3
            for k in ("samples", "tokens", "selectedFraction", "loss", "gradNorm", "isWeightMean"):
                assert m2[k] == pytest.approx(m1[k], rel=1e-4, abs=1e-7), k
            rows2 = [json.loads(r) for r in store.get_bytes(l2["samples"]["key"]).decode().split("\n")]
            rows1 = [json.loads(r) for r in single_store.get_bytes(l1["samples"]["key"]).decode().split("\n")]
            assert len(rows2) == 3, "a row per sample of the whole batch, none for the padding"
            for a, b in zip(rows2, rows1, strict=True):
                assert (a["trajectoryId"], a["selected"]) == (b["trajectoryId"], b["selected"])
                assert a["advantage"] == pytest.approx(b["advantage"], rel=1e-5, abs=1e-6)
        manifest = checkpoints.read_hf_manifest(store, campaign, 2)
        assert manifest["parentVersion"] == 1
        assert "optimizerState" in manifest

        bc = {
            "campaignId": campaign,
            "trainStep": 3,
            "fromVersion": 2,
            "demos": demos,
            "epochs": 2,
            "learningRate": 1e-2,
            "minibatchSize": 2,  # 3 demonstrations: the second minibatch has one row for two ranks
            "policy": {"seed": 0, "width": 1},
        }
        got = call(worker.queue, "behaviourClone", bc)
        l2, l1 = compare(got, run_behaviour_clone(single, bc), 3)
        assert l2["metrics"]["bcLoss"] == pytest.approx(l1["metrics"]["bcLoss"], rel=1e-4)
        assert l2["metrics"]["optimizerSteps"] == l1["metrics"]["optimizerSteps"] == 4
        assert '"rank": 1, "job": "train", "samples": 3' in worker.output(), "rank 1 ran the train jobs"
        assert '"rank": 1, "job": "bc"' in worker.output()
    finally:
        code = stop_worker(worker)
    assert code == 0, worker.output()[-3000:]
    assert not any(_alive(p) for p in ranks), "SIGTERM stopped rank 1 too"


@pytest.mark.usefixtures("temporal_ok")
def test_a_dead_rank_stops_the_worker_instead_of_hanging(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    worker = start_worker(store, models["seed0"], tmp_path / "dist", {"DARTFLOW_VLM_KEEPALIVE_S": "1"})
    try:
        [rank1] = worker.ranks()
        os.kill(rank1, signal.SIGKILL)
        code = worker.proc.wait(120)
    finally:
        if worker.proc.poll() is None:
            worker.proc.kill()
    assert code != 0, worker.output()[-3000:]
    assert "the process group is unusable" in worker.output()
