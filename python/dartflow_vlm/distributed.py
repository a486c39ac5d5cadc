"""A data-parallel trainer worker: one process per rank, torch.distributed FSDP across them.

    python -m dartflow_vlm.worker --base-model DIR --world-size 2           # ranks 1.. spawned here
    torchrun --nproc-per-node 8 -m dartflow_vlm.worker --base-model DIR     # or torchrun starts them

Rank 0 is the Temporal worker: it polls the task queue, talks to MinIO (reads the step's samples and
checkpoints, writes the checkpoint and the ledger entry) and heartbeats. For each activity it broadcasts
one TrainJob (activities.py: the model sources, the whole batch, the settings, where to write) to every
rank; every rank then runs `run_job` — loads the models, shards the policy with FSDP (models.shard),
trains on its share of the batch (train_step.shard; advantages, entropy selection and the loss
normaliser are global), and takes part in gathering the weights and AdamW moments that rank 0 writes.
The other ranks never touch Temporal or MinIO; they read the folders rank 0 downloaded, so the ranks of
one worker share a machine (or a file system at the same paths).

Between jobs rank 0 broadcasts a keep-alive every KEEPALIVE_S, so a collective's timeout (--dist-timeout)
bounds real hangs, not idle time. A TrainerError (a refused step) is raised on every rank alike and the
ranks stay in step; any other failure on a rank leaves the process group unusable, so the worker stops
with a non-zero status (a supervisor restarts it; the step's idempotency covers the retry). Ranks 1..
that this process spawned exit when it exits (they watch their parent).
"""

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .activities import Heartbeat, JobResult, TrainJob, run_job
from .errors import TrainerError
from .models import PolicySetup, gpu_index

# Seconds between keep-alives to idle ranks (DARTFLOW_VLM_KEEPALIVE_S: tests make a dead rank show quickly).
KEEPALIVE_S = float(os.environ.get("DARTFLOW_VLM_KEEPALIVE_S", "30"))
_PING = "ping"
_STOP = "stop"


@dataclass(frozen=True)
class DistSettings:
    world_size: int
    backend: str  # "gloo": the ranks compute on CPU; "nccl": each rank on its own GPU
    timeout_s: float
    threads: int = 0  # torch intra-op threads per rank (0: cores / world size)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _init(rank: int, settings: DistSettings, init_method: str | None) -> None:
    threads = settings.threads or max(1, (os.cpu_count() or 1) // settings.world_size)
    torch.set_num_threads(threads)
    if settings.backend == "nccl":
        torch.cuda.set_device(gpu_index(rank))  # one GPU per rank on a machine
    dist.init_process_group(
        settings.backend,
        init_method=init_method,
        rank=rank,
        world_size=settings.world_size,
        timeout=timedelta(seconds=settings.timeout_s),
    )


def _broadcast(obj: Any) -> Any:
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class Coordinator:
    """Rank 0's side: runs a TrainJob on every rank (the activity thread), keeps idle ranks alive."""

    def __init__(self, setup: PolicySetup, on_broken: Callable[[str], None]) -> None:
        self.setup = setup
        self.on_broken = on_broken
        self.world = dist.get_world_size()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.broken: str | None = None
        self._keepalive = threading.Thread(target=self._keep_alive, name="dist-keepalive", daemon=True)
        self._keepalive.start()

    def _fail(self, what: str, err: BaseException) -> None:
        self.broken = f"{what}: {type(err).__name__}: {err}"
        print(f"[dartflow_vlm] rank 0: the process group is unusable ({self.broken}); stopping", flush=True)
        self.on_broken(self.broken)

    def run(self, job: TrainJob, heartbeat: Heartbeat) -> JobResult:
        with self._lock:
            if self.broken:
                raise RuntimeError(f"the distributed trainer is stopping: {self.broken}")
            try:
                _broadcast(job)
                return run_job(self.setup, job, heartbeat)
            except TrainerError:
                raise  # refused on every rank alike (train_step checks every rank's share): still in step
            except BaseException as err:
                self._fail("a train job failed", err)
                raise

    def _keep_alive(self) -> None:
        while not self._closed.wait(KEEPALIVE_S):
            if not self._lock.acquire(blocking=False):
                continue  # a job is running: its collectives keep the ranks busy
            try:
                if self.broken or self._closed.is_set():
                    return
                _broadcast(_PING)
            except BaseException as err:
                self._fail("a keep-alive to the other ranks failed (a rank died?)", err)
                return
            finally:
                self._lock.release()

    def close(self) -> None:
        """Tells the other ranks to exit (after the last job) and leaves the process group."""
        self._closed.set()
        with self._lock:
            if not self.broken:
                try:
                    _broadcast(_STOP)
                except BaseException as err:  # a rank is gone already: nothing left to tell
                    print(f"[dartflow_vlm] rank 0: could not stop the other ranks: {err}", flush=True)
        # An unusable group cannot be destroyed cleanly; the process exits anyway.
        with contextlib.suppress(BaseException):
            dist.destroy_process_group()


def follow(setup: PolicySetup) -> int:
    """Ranks 1..: run every job rank 0 broadcasts until it says stop."""
    rank = dist.get_rank()
    jobs = 0
    while True:
        job = _broadcast(None)
        if job == _PING:
            continue
        if job == _STOP:
            break
        assert isinstance(job, TrainJob)
        started = time.perf_counter()
        try:
            run_job(setup, job, lambda _: None)
            jobs += 1
            print(
                f'{{"rank": {rank}, "job": "{job.op}", "samples": {len(job.samples)}, '
                f'"seconds": {time.perf_counter() - started:.2f}}}',
                flush=True,
            )
        except TrainerError as err:
            print(f"[dartflow_vlm] rank {rank}: {job.op} refused on every rank: {err}", flush=True)
    dist.destroy_process_group()
    return 0


def _watch_parent(parent: int) -> None:
    """A spawned rank exits when the process that spawned it (rank 0) is gone, even after a kill -9."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def spawned_rank_main(
    index: int, parent: int, setup: PolicySetup, settings: DistSettings, init_method: str
) -> None:
    """Entry of a rank spawned by rank 0 (torch.multiprocessing): index 0 is rank 1."""
    _watch_parent(parent)
    # A terminal's Ctrl-C reaches the whole process group: rank 0 stops the ranks (a broadcast stop).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rank = index + 1
    try:
        _init(rank, settings, init_method)
        code = follow(setup)
    except BaseException as err:
        print(f"[dartflow_vlm] rank {rank}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        os._exit(1)
    sys.stdout.flush()
    os._exit(code)


def start_ranks(setup: PolicySetup, settings: DistSettings) -> Any:
    """Spawns ranks 1..world-1 and joins the process group as rank 0; returns the processes' context."""
    from torch.multiprocessing.spawn import start_processes

    init_method = f"tcp://127.0.0.1:{free_port()}"
    context = start_processes(
        spawned_rank_main,
        args=(os.getpid(), setup, settings, init_method),
        nprocs=settings.world_size - 1,
        join=False,
        start_method="spawn",
    )
    _init(0, settings, init_method)
    return context


def init_torchrun(settings: DistSettings) -> int:
    """Joins the process group torchrun describes (RANK, WORLD_SIZE, MASTER_ADDR/PORT); returns the rank."""
    rank = int(os.environ["RANK"])
    _init(rank, settings, "env://")
    return rank
