"""The VLM trainer's `trainStep` and `behaviourClone`, without Temporal (worker.py registers them): the
contracts of activities/trainer/train-step.ts for a Hugging Face VLM.

    validate the input (generated JSON Schemas) → committed already? return it (reused)
    → read the checkpoint chain (a damaged hf.json refuses the step before any training)
    → fetch the current version (and the KL reference) → load the step samples from MinIO
    → staleness bound along the lineage (pooled successes exempt)
    → a TrainJob for the runner: load the models, train (train_step.py / bc_step.py), save the folder +
      AdamW moments — in this process (`run_job`), or on every rank of a distributed worker
      (distributed.py: FSDP; rank 0 runs this module and writes)
    → commit (commit.py: one checkpoint, one ledger entry, and for a train step the per-sample record
      the entry names)

Errors a retry cannot change are TrainerErrors (errors.py) with the TypeScript trainer's type names;
an unreachable MinIO (StorageUnavailableError) and a lost version race are plain, retryable errors.
"""

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import checkpoints, keys, models
from .bc_step import bc_epochs
from .commit import StepOutcome, commit_train_step, complete_manifests, read_committed
from .errors import CheckpointUnavailableError, InvalidTrainInput
from .models import PolicySetup
from .samples import LoadedBatch, LoadedSample, load_samples
from .store import CorruptObjectError, ObjectNotFoundError, ObjectStore
from .train_step import (
    SampleStats,
    StepSample,
    TrainConfig,
    _distributed,
    make_optimizer,
    shard,
    train_step,
)
from .validate import validate_behaviour_clone_input, validate_train_step_input


@dataclass(frozen=True)
class ModelSource:
    """Where a version's model comes from: a downloaded checkpoint folder, or the base (folder None)."""

    folder: Path | None
    kind: str | None
    what: str  # for error messages: "current checkpoint v3 of campaign c (…/hf.json)"


@dataclass(frozen=True)
class BcSettings:
    epochs: int
    minibatch_size: int
    seed: str
    learning_rate: float


@dataclass(frozen=True)
class TrainJob:
    """What every rank of a (distributed) worker runs for one activity: picklable, paths on a file system
    every rank sees (a distributed worker's ranks share its machine)."""

    op: str  # "train" or "bc"
    current: ModelSource
    samples: list[StepSample]  # the whole batch: each rank takes its share
    out_dir: Path  # rank 0 writes `hf/` and `optimizer.safetensors` here
    reference: ModelSource | None = None
    config: TrainConfig | None = None  # op "train"
    optimizer_state: Path | None = None  # AdamW moments to resume (op "train")
    optimizer_what: str = ""
    bc: BcSettings | None = None  # op "bc"


@dataclass(frozen=True)
class JobResult:
    metrics: dict[str, float]
    samples: list[SampleStats]  # op "train": one per sample of the batch, in order
    folder: Path
    optimizer_file: Path


Heartbeat = Callable[[dict[str, Any]], None]
Runner = Callable[[TrainJob, Heartbeat], JobResult]


def run_job(setup: PolicySetup, job: TrainJob, heartbeat: Heartbeat) -> JobResult:
    """Loads the models, trains and saves: on every rank under torch.distributed (FSDP over the ranks, each
    on its share of the batch; the folder and moments are gathered and rank 0 writes them)."""
    rank, world = _distributed()
    processor = models.load_processor(setup)
    model = models.load_policy(setup, job.current.folder, job.current.kind, job.current.what, True)
    reference = (
        models.load_policy(setup, job.reference.folder, job.reference.kind, job.reference.what, False)
        if job.reference is not None
        else None
    )
    if world > 1:
        models.shard(model)
    stats: list[SampleStats] = []
    if job.op == "train":
        assert job.config is not None
        optimizer = make_optimizer(model, job.config)
        if job.optimizer_state is not None:
            models.load_optimizer(model, optimizer, job.optimizer_state, job.optimizer_what)
        result = train_step(
            model,
            processor,
            shard(job.samples, rank, world),
            job.config,
            optimizer,
            reference=reference,
            heartbeat=heartbeat,
        )
        metrics, stats = dict(result.metrics), result.samples
    elif job.op == "bc":
        assert job.bc is not None
        # BC starts fresh moments (as the TypeScript trainer), with its own learning rate and no decay.
        optimizer = make_optimizer(model, TrainConfig(learning_rate=job.bc.learning_rate, weight_decay=0.0))
        metrics = bc_epochs(
            model,
            processor,
            job.samples,
            optimizer,
            epochs=job.bc.epochs,
            minibatch_size=job.bc.minibatch_size,
            seed=job.bc.seed,
            heartbeat=heartbeat,
        )
        metrics["worldSize"] = float(world)
    else:
        raise ValueError(f"internal: unknown job {job.op!r}")
    folder, optimizer_file = job.out_dir / "hf", job.out_dir / "optimizer.safetensors"
    models.save(model, processor, folder)
    models.save_optimizer(model, optimizer, optimizer_file)
    return JobResult(metrics, stats, folder, optimizer_file)


@dataclass
class TrainerDeps:
    store: ObjectStore
    setup: PolicySetup
    # Downloaded checkpoints (reused across steps) and each attempt's output folder.
    work_dir: Path
    heartbeat: Heartbeat = lambda _: None
    # Runs a TrainJob: in this process by default; a distributed worker's rank 0 broadcasts it to every rank.
    runner: Runner | None = None

    def run(self, job: TrainJob) -> JobResult:
        if self.runner is not None:
            return self.runner(job, self.heartbeat)
        return run_job(self.setup, job, self.heartbeat)


@dataclass
class Fetched:
    source: ModelSource
    manifest: dict[str, Any] | None  # None: the base folder (v0 without hf.json)


def _unavailable(campaign_id: str, version: int, role: str, err: Exception) -> CheckpointUnavailableError:
    what = "is missing" if isinstance(err, ObjectNotFoundError) else "is corrupt"
    return CheckpointUnavailableError(
        f"{role} checkpoint v{version} of campaign {campaign_id} {what} ({err}); the step is refused and "
        f"nothing new is written. Restore the object or pin an intact version: dartflow campaign pin "
        f"{campaign_id} <version>"
    )


def fetch_version(deps: TrainerDeps, campaign_id: str, version: int, role: str) -> Fetched:
    """A version's model source: its hf.json folder downloaded from MinIO, or (v0 without one) the base
    folder; checked against the worker's kind and base architecture before anything loads it."""
    try:
        if not deps.store.exists(keys.hf_manifest(campaign_id, version)):
            if version == 0:
                return Fetched(ModelSource(None, None, f"the base model {deps.setup.base_model}"), None)
            raise ObjectNotFoundError(keys.hf_manifest(campaign_id, version), deps.store.bucket)
        manifest = checkpoints.read_hf_manifest(deps.store, campaign_id, version)
        deps.heartbeat({"phase": "downloading", "version": version})
        dest = deps.work_dir / "checkpoints" / keys.safe_segment(campaign_id) / f"v{version}"
        folder = checkpoints.download(deps.store, manifest, dest)
    except (ObjectNotFoundError, CorruptObjectError) as err:
        raise _unavailable(campaign_id, version, role, err) from err
    what = (
        f"{role} checkpoint v{version} of campaign {campaign_id} ({keys.hf_manifest(campaign_id, version)})"
    )
    models.check_source(deps.setup, folder, manifest["kind"], what)
    return Fetched(ModelSource(folder, manifest["kind"], what), manifest)


def _read_chain(deps: TrainerDeps, campaign_id: str) -> None:
    try:
        complete_manifests(deps.store, campaign_id)
    except (ObjectNotFoundError, CorruptObjectError) as err:
        raise CheckpointUnavailableError(
            f"checkpoint object unusable ({err}); the step is refused and nothing new is written"
        ) from err


def _refuse_if_all_skipped(train_step_no: int, groups: int, loaded: LoadedBatch) -> None:
    if len(loaded.skipped_groups) < groups:
        return
    shown = "; ".join(f"{g.group_id}: {g.key}" for g in loaded.skipped_groups[:3])
    raise InvalidTrainInput(
        f"train step {train_step_no}: all {groups} groups reference objects that are gone or corrupt "
        "in MinIO "
        f"({shown}{'; …' if len(loaded.skipped_groups) > 3 else ''}); the previous checkpoint stays current"
    )


def _nothing_trainable(what: str, loaded: LoadedBatch, stale: int) -> InvalidTrainInput:
    reasons = [f"{n} without {r.removeprefix('no ')}" for r, n in sorted(loaded.skip_reasons.items())]
    if stale:
        reasons.append(f"{stale} outside the staleness bound")
    detail = f" (steps skipped: {', '.join(reasons)})" if reasons else ""
    hint = (
        "; VLM step records need responseTokenIds, tokenLogProbs and a promptKey (docs/vlm.md)"
        if loaded.skip_reasons
        else ""
    )
    return InvalidTrainInput(f"{what}{detail}{hint}")


def _staleness(inp: dict[str, Any]) -> tuple[Callable[[int], bool], Callable[[int], int]]:
    allowed: list[int] | None = inp.get("allowedVersions")
    head, bound = inp["fromVersion"], inp["maxStaleness"]

    def is_allowed(v: int) -> bool:
        return v in allowed if allowed is not None else head - bound <= v <= head

    def staleness(v: int) -> int:
        return allowed.index(v) if allowed is not None and v in allowed else max(0, head - v)

    return is_allowed, staleness


def compact(x: float) -> float:
    """A per-sample record value rounded to 6 significant digits (train-step.ts `compact`)."""
    return float(f"{x:.6g}")


def sample_rows(
    fresh: Sequence[LoadedSample], stats: Sequence[SampleStats], staleness: Callable[[int], int]
) -> list[dict[str, Any]]:
    """The per-sample record (schemas/records.ts TrainSampleRecordSchema): one row per trained step
    sample, in batch order."""
    if len(fresh) != len(stats):
        raise ValueError(f"internal: {len(stats)} per-sample results for {len(fresh)} step samples")
    return [
        {
            "trajectoryId": f.sample.trajectory_id,
            "step": f.sample.step,
            "advantage": compact(st.advantage),
            "selected": st.selected,
            "entropy": compact(st.entropy),
            "logpOld": compact(st.logp_old),
            "logpBehaviour": None if st.logp_behaviour is None else compact(st.logp_behaviour),
            "isWeight": compact(st.is_weight),
            "staleness": staleness(f.policy_version),
        }
        for f, st in zip(fresh, stats, strict=True)
    ]


def _finite(metrics: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v == v and abs(v) != float("inf")}


def _commit(
    deps: TrainerDeps,
    out: JobResult,
    *,
    campaign: str,
    step_no: int,
    head: int,
    metrics: dict[str, float],
    groups: Sequence[dict[str, Any]],
    loaded: LoadedBatch,
    staleness: Callable[[int], int],
    is_weight: dict[str, float],
    started_at: int | None = None,
    samples: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Commits the saved folder and moments (checkpoint + ledger entry) as one step."""
    return commit_train_step(
        deps.store,
        StepOutcome(
            campaign_id=campaign,
            train_step=step_no,
            from_version=head,
            kind=deps.setup.kind,
            folder=out.folder,
            optimizer_file=out.optimizer_file,
            metrics=_finite(metrics),
            groups=groups,
            min_versions=loaded.min_versions,
            staleness=staleness,
            skipped=loaded.skipped_groups,
            is_weight=is_weight,
            started_at=started_at,
            samples=samples,
        ),
    )


def _scratch(deps: TrainerDeps) -> Path:
    """This attempt's output folder (removed after the commit)."""
    return Path(tempfile.mkdtemp(prefix="step-", dir=deps.work_dir))


def _train_step(deps: TrainerDeps, raw: Any) -> dict[str, Any]:
    inp = validate_train_step_input(raw)
    campaign, step_no, head = inp["campaignId"], inp["trainStep"], inp["fromVersion"]
    started = time.time()
    committed = read_committed(deps.store, campaign, step_no)
    if committed:
        return committed
    _read_chain(deps, campaign)
    cfg_raw = inp["trainer"]
    if cfg_raw.get("epochs", 1) != 1:
        raise InvalidTrainInput(
            f"invalid trainStep input: trainer.epochs is {cfg_raw['epochs']}; the VLM trainer takes one "
            "optimiser step per train step over the whole batch (DART: ppo_epochs 1): set trainer.epochs=1"
        )
    if cfg_raw.get("targetKl") is not None:
        # targetKl stops a step's remaining minibatch updates (activities/trainer/grpo-update.ts); with one
        # update per step there is nothing after the first to stop, so a set value would be silently ignored.
        raise InvalidTrainInput(
            f"invalid trainStep input: trainer.targetKl is {cfg_raw['targetKl']}; the VLM trainer takes one "
            "optimiser step per train step, so there are no further minibatch updates to stop early: set "
            "trainer.targetKl=null (anchor the policy with trainer.klBeta instead)"
        )
    if cfg_raw.get("demoAnchorCoef", 0) > 0:
        # The demonstration anchor (activities/trainer/demo-anchor.ts) exists only in the embedded trainer;
        # the config refuses it for policy.kind vlm, this guards an input built by hand.
        raise InvalidTrainInput(
            f"invalid trainStep input: trainer.demoAnchorCoef is {cfg_raw['demoAnchorCoef']}; the VLM "
            "trainer has no demonstration anchor: set trainer.demoAnchorCoef=0 (anchor the policy with "
            "trainer.klBeta)"
        )
    config = TrainConfig.from_trainer(cfg_raw)
    deps.work_dir.mkdir(parents=True, exist_ok=True)
    processor = models.load_processor(deps.setup)
    current = fetch_version(deps, campaign, head, "current")
    use_kl = config.loss.use_kl and config.loss.kl_beta > 0
    reference = fetch_version(deps, campaign, inp["referenceVersion"], "KL reference") if use_kl else None

    loaded = load_samples(
        deps.store,
        processor,
        inp["groups"],
        on_progress=lambda p: deps.heartbeat({"phase": "loading", "trainStep": step_no, **p}),
    )
    _refuse_if_all_skipped(step_no, len(inp["groups"]), loaded)
    is_allowed, staleness = _staleness(inp)
    # Staleness bound per step sample (DART §3.4), along the lineage when given; pooled successes exempt.
    fresh = [s for s in loaded.samples if s.injected_from_pool or is_allowed(s.policy_version)]
    stale = len(loaded.samples) - len(fresh)
    if not fresh:
        raise _nothing_trainable(
            f"train step {step_no}: no fresh, trainable step in {len(inp['groups'])} groups", loaded, stale
        )

    reset = cfg_raw.get("optimizerReset", "none")
    fresh_optimizer = reset == "every-step" or (reset == "rl-start" and head == inp["referenceVersion"])
    state: Path | None = None
    if current.manifest is not None and not fresh_optimizer:
        state = checkpoints.fetch_optimizer(
            deps.store, current.manifest, deps.work_dir / f"opt-{step_no}.safetensors"
        )
    out_dir = _scratch(deps)
    try:
        out = deps.run(
            TrainJob(
                op="train",
                current=current.source,
                reference=reference.source if reference else None,
                samples=[s.sample for s in fresh],
                out_dir=out_dir,
                config=config,
                optimizer_state=state,
                optimizer_what=f"checkpoint v{head} of campaign {campaign}",
            )
        )
        if state is not None:
            state.unlink(missing_ok=True)
        metrics = {k: v for k, v in out.metrics.items() if k not in ("numSamples", "numSelected")}
        metrics.update(
            staleSteps=float(stale),
            skippedSteps=float(loaded.skipped_steps),
            skippedGroups=float(len(loaded.skipped_groups)),
            optimizerSteps=1.0,
            samplesPerSecond=len(fresh) / max(1e-3, time.time() - started),
        )
        return _commit(
            deps,
            out,
            campaign=campaign,
            step_no=step_no,
            head=head,
            metrics=metrics,
            groups=inp["groups"],
            loaded=loaded,
            staleness=staleness,
            is_weight={
                "mean": metrics.get("isWeightMean", 1.0),
                "min": metrics.get("isWeightMin", 1.0),
                "truncatedFraction": metrics.get("isWeightTruncatedFraction", 0.0),
            },
            started_at=int(started * 1000),
            samples=sample_rows(fresh, out.samples, staleness),
        )
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        if state is not None:
            state.unlink(missing_ok=True)


def _behaviour_clone(deps: TrainerDeps, raw: Any) -> dict[str, Any]:
    inp = validate_behaviour_clone_input(raw)
    campaign, step_no, head = inp["campaignId"], inp["trainStep"], inp["fromVersion"]
    committed = read_committed(deps.store, campaign, step_no)
    if committed:
        return committed
    started = time.time()  # the ledger's startedAt: trainer time per step (benchmarks)
    _read_chain(deps, campaign)
    deps.work_dir.mkdir(parents=True, exist_ok=True)
    processor = models.load_processor(deps.setup)
    current = fetch_version(deps, campaign, head, "current")
    loaded = load_samples(
        deps.store,
        processor,
        inp["demos"],
        on_progress=lambda p: deps.heartbeat({"phase": "loading", "trainStep": step_no, **p}),
    )
    _refuse_if_all_skipped(step_no, len(inp["demos"]), loaded)
    if not loaded.samples:
        raise _nothing_trainable("behaviourClone: the demonstrations hold no trainable step", loaded, 0)
    out_dir = _scratch(deps)
    try:
        out = deps.run(
            TrainJob(
                op="bc",
                current=current.source,
                samples=[s.sample for s in loaded.samples],
                out_dir=out_dir,
                bc=BcSettings(
                    epochs=inp["epochs"],
                    minibatch_size=inp["minibatchSize"],
                    seed=f"{campaign}/bc/{step_no}",
                    learning_rate=inp["learningRate"],
                ),
            )
        )
        _, staleness = _staleness({"fromVersion": head, "maxStaleness": 0})
        return _commit(
            deps,
            out,
            campaign=campaign,
            step_no=step_no,
            head=head,
            metrics=out.metrics,
            groups=inp["demos"],
            loaded=loaded,
            staleness=staleness,
            is_weight={"mean": 1.0, "min": 1.0, "truncatedFraction": 0.0},
            started_at=int(started * 1000),
        )
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _refusing_damaged_checkpoints(
    fn: Callable[[TrainerDeps, Any], dict[str, Any]],
) -> Callable[[TrainerDeps, Any], dict[str, Any]]:
    """Any other checkpoint object gone or damaged (an optimizer state, a manifest while listing):
    refused non-retryably, as the TypeScript trainer does; other missing objects propagate."""

    def run(deps: TrainerDeps, raw: Any) -> dict[str, Any]:
        try:
            return fn(deps, raw)
        except (ObjectNotFoundError, CorruptObjectError) as err:
            if "/checkpoints/" not in err.key:
                raise
            raise CheckpointUnavailableError(
                f"checkpoint object unusable ({err}); the step is refused and nothing new is written"
            ) from err

    return run


run_train_step = _refusing_damaged_checkpoints(_train_step)
run_behaviour_clone = _refusing_damaged_checkpoints(_behaviour_clone)
