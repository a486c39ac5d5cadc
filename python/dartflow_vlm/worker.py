"""The VLM trainer as a Temporal worker: `trainStep` and `behaviourClone` on the trainer task queue,
the same activity names, inputs, results and failure types as workers/trainer-worker.ts, so a campaign
routes VLM training here by the queue alone.

    .tools/vlm-venv/bin/python -m dartflow_vlm.worker --base-model /models/tiny-qwen2-vl \\
        [--task-queue trainer-vlm] [--lora-rank 8] [--work-dir .data/vlm-trainer] [--threads 2] \\
        [--world-size 2 [--dist-timeout 1800]]

With --world-size N > 1 (or under torchrun) the step trains data-parallel over N processes with FSDP
(distributed.py): this process is rank 0, the Temporal worker, and spawns ranks 1..N-1.

Temporal and MinIO are found through the same environment variables as the TypeScript roles
(TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_TLS_*, S3_*; the local dev servers otherwise).
One step at a time (the trainer owns its CPU/GPU); the activities run in a worker thread and heartbeat
at every phase and every sample, and a keep-alive thread re-sends the latest heartbeat through
phases longer than that (a checkpoint load or upload of a large model; keepalive.py). A TrainerError
becomes a non-retryable ApplicationError with the TypeScript trainer's type name (InvalidTrainInput,
CheckpointMismatchError, CheckpointUnavailableError, NonFiniteLossError); anything else (MinIO
unreachable, a lost version race) stays retryable. When the worker is ready it prints one JSON line
`{"ready": true, "taskQueue": ...}` to stdout.
"""

import argparse
import asyncio
import contextvars
import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import torch
from temporalio import activity
from temporalio.client import Client, TLSConfig
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from .activities import TrainerDeps, run_behaviour_clone, run_train_step
from .distributed import Coordinator, DistSettings, follow, init_torchrun, start_ranks
from .errors import TrainerError
from .keepalive import KeepAlive
from .models import DeviceUnavailableError, PolicySetup, choose_device
from .store import ObjectStore, S3Settings

DEFAULT_QUEUE = "trainer-vlm"  # schemas/task-queues.ts TASK_QUEUES.trainerVlm (a VLM campaign trains there)


def _heartbeat(details: dict[str, Any]) -> None:
    activity.heartbeat(details)


def _as_application_error(err: TrainerError) -> ApplicationError:
    return ApplicationError(str(err), type=err.type, non_retryable=True)


T = TypeVar("T")


def kept_alive(run: Callable[[Callable[[dict[str, Any]], None]], T]) -> T:
    """Runs `run(heartbeat)` inside a sync activity with the keep-alive (keepalive.py) while it runs:
    a phase longer than the activity's heartbeat timeout does not time the live attempt out. Without a
    heartbeat timeout there is nothing to keep alive."""
    timeout = activity.info().heartbeat_timeout
    if not timeout or timeout.total_seconds() <= 0:
        return run(_heartbeat)
    # The keep-alive thread heartbeats inside its own copy of the activity's context (a context can be
    # entered by one thread at a time; the activity's thread keeps its own).
    thread_context = contextvars.copy_context()
    keep = KeepAlive(
        send=_heartbeat,
        resend=lambda details: thread_context.run(_heartbeat, details),
        timeout_s=timeout.total_seconds(),
    )
    with keep:
        return run(keep.beat)


class TrainerActivities:
    def __init__(self, deps: TrainerDeps) -> None:
        self.deps = deps

    @activity.defn(name="trainStep")
    def train_step(self, raw: Any) -> dict[str, Any]:
        try:
            return kept_alive(lambda beat: run_train_step(replace(self.deps, heartbeat=beat), raw))
        except TrainerError as err:
            raise _as_application_error(err) from err

    @activity.defn(name="behaviourClone")
    def behaviour_clone(self, raw: Any) -> dict[str, Any]:
        try:
            return kept_alive(lambda beat: run_behaviour_clone(replace(self.deps, heartbeat=beat), raw))
        except TrainerError as err:
            raise _as_application_error(err) from err


async def connect_temporal(env: dict[str, str]) -> Client:
    port = env.get("DARTFLOW_TEMPORAL_PORT", "7233")
    address = env.get("TEMPORAL_ADDRESS") or f"127.0.0.1:{port}"
    tls: TLSConfig | bool = False
    cert, key = env.get("TEMPORAL_TLS_CERT_PATH"), env.get("TEMPORAL_TLS_KEY_PATH")
    if cert or key:
        if not (cert and key):
            raise ValueError("set both TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH (mTLS), or neither")
        ca = env.get("TEMPORAL_TLS_CA_PATH")
        tls = TLSConfig(
            client_cert=Path(cert).read_bytes(),
            client_private_key=Path(key).read_bytes(),
            server_root_ca_cert=Path(ca).read_bytes() if ca else None,
            domain=env.get("TEMPORAL_TLS_SERVER_NAME") or None,
        )
    return await Client.connect(address, namespace=env.get("TEMPORAL_NAMESPACE", "default"), tls=tls)


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ
    data_dir = Path(env.get("DARTFLOW_DATA_DIR", Path(__file__).resolve().parents[2] / ".data"))
    p = argparse.ArgumentParser(prog="python -m dartflow_vlm.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--task-queue", default=env.get("DARTFLOW_TRAINER_QUEUE", DEFAULT_QUEUE))
    p.add_argument(
        "--base-model",
        default=env.get("DARTFLOW_VLM_BASE_MODEL"),
        help="the Hugging Face folder the vLLM servers started from (v0, and the processor)",
    )
    p.add_argument(
        "--lora-rank", type=int, default=0, help="train a LoRA adapter of this rank (0: full weights)"
    )
    p.add_argument("--lora-alpha", type=int, default=16)
    p.add_argument(
        "--work-dir", default=str(data_dir / "vlm-trainer"), help="downloaded checkpoints, outputs"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads per rank (0: torch's default; cores / world size with --world-size)",
    )
    p.add_argument(
        "--world-size",
        type=int,
        default=int(env.get("DARTFLOW_VLM_WORLD_SIZE", "1")),
        help="data-parallel ranks (FSDP), one process each, spawned by this one (under torchrun: WORLD_SIZE)",
    )
    p.add_argument(
        "--dist-timeout", type=float, default=1800.0, help="seconds a collective may wait for the other ranks"
    )
    p.add_argument(
        "--device",
        default=env.get("DARTFLOW_VLM_DEVICE", "auto"),
        help="where the model computes: cuda (one GPU per rank; ranks talk over nccl), cpu (gloo), or auto "
        "(cuda when torch sees a GPU)",
    )
    args = p.parse_args(argv)
    try:
        args.device = choose_device(args.device)
    except (ValueError, DeviceUnavailableError) as err:
        p.error(str(err))
    under_torchrun = int(env.get("WORLD_SIZE", "1")) > 1 and "RANK" in env
    if under_torchrun:
        if args.world_size not in (1, int(env["WORLD_SIZE"])):
            p.error(f"--world-size {args.world_size} under torchrun, whose WORLD_SIZE is {env['WORLD_SIZE']}")
        args.world_size = int(env["WORLD_SIZE"])
    args.torchrun = under_torchrun
    if args.world_size < 1:
        p.error(f"--world-size must be ≥ 1, got {args.world_size}")
    if args.world_size > 1 and args.lora_rank > 0:
        p.error(
            "--world-size > 1 trains full weights only (FSDP of a LoRA adapter is not supported): "
            "drop --lora-rank, or train the adapter in one process"
        )
    if not args.base_model:
        p.error(
            "--base-model (or DARTFLOW_VLM_BASE_MODEL) is required: the folder the vLLM servers started from"
        )
    if not (Path(args.base_model) / "config.json").exists():
        p.error(f"--base-model {args.base_model}: no config.json there; give a Hugging Face model folder")
    return args


async def run(args: argparse.Namespace, coordinator: Coordinator | None = None) -> int:
    """Rank 0 (or the only process): the Temporal worker."""
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    store = ObjectStore(S3Settings.from_env())
    await asyncio.to_thread(store.ensure_bucket)
    setup = policy_setup(args)
    deps = TrainerDeps(
        store=store,
        setup=setup,
        work_dir=Path(args.work_dir),
        runner=coordinator.run if coordinator else None,
    )
    client = await connect_temporal(dict(os.environ))
    acts = TrainerActivities(deps)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if coordinator is not None:
        # The process group broke (a rank died, a job failed half-way): stop polling and exit non-zero.
        def on_broken(_reason: str) -> None:
            loop.call_soon_threadsafe(stop.set)

        coordinator.on_broken = on_broken
    with ThreadPoolExecutor(max_workers=1) as executor:
        worker = Worker(
            client,
            task_queue=args.task_queue,
            activities=[acts.train_step, acts.behaviour_clone],
            activity_executor=executor,
            max_concurrent_activities=1,
            # Let an in-flight step finish on SIGTERM; a kill -9 is covered by the step's idempotency.
            graceful_shutdown_timeout=timedelta(minutes=2),
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            print(
                json.dumps(
                    {
                        "ready": True,
                        "taskQueue": args.task_queue,
                        "kind": deps.setup.kind,
                        "worldSize": args.world_size,
                    }
                ),
                flush=True,
            )
            await stop.wait()
    store.close()
    return 1 if coordinator is not None and coordinator.broken else 0


def policy_setup(args: argparse.Namespace) -> PolicySetup:
    return PolicySetup(
        base_model=Path(args.base_model),
        lora_rank=args.lora_rank,
        lora_alpha=args.lora_alpha,
        device=args.device,
    )


def exit_with_parent() -> bool:
    """
    Started by dartflow's local launcher (DARTFLOW_PARENT_PID set): SIGTERM when the launcher dies, a kill -9
    included (Linux PR_SET_PDEATHSIG), as the Node roles notice through their IPC channel. Without it a
    killed launcher left this worker polling Temporal for a campaign nobody runs. Not set when a user starts
    the worker by hand (it must outlive the shell that started it). Returns whether it is armed.
    """
    parent = os.environ.get("DARTFLOW_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return False
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    # The launcher may have died before prctl: this process was re-parented already, and no signal comes.
    if os.getppid() != int(parent):
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def main() -> int:
    args = parse_args(sys.argv[1:])
    exit_with_parent()
    if args.world_size == 1:
        return asyncio.run(run(args))
    settings = DistSettings(
        world_size=args.world_size,
        # GPU ranks talk over nccl (one GPU each), CPU ranks over gloo.
        backend="nccl" if args.device == "cuda" else "gloo",
        timeout_s=args.dist_timeout,
        threads=args.threads,
    )
    setup = policy_setup(args)
    context = None
    if args.torchrun:
        if init_torchrun(settings) != 0:
            return follow(setup)  # torchrun's other ranks: no Temporal, no MinIO
    else:
        context = start_ranks(setup, settings)
    coordinator = Coordinator(setup, on_broken=lambda _reason: None)
    try:
        code = asyncio.run(run(args, coordinator))
    finally:
        coordinator.close()
        if context is not None:
            for p in context.processes:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
    return code


if __name__ == "__main__":
    sys.exit(main())
