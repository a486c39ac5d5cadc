/**
 * Swaps the model one vLLM server serves, one reload at a time: fetch the version's checkpoint folder
 * from MinIO (sha256-verified), check it fits the served model, hold the front's gate (requests wait,
 * forwarded ones drain), then reload full weights (pause → reload_weights → resume) or load the LoRA
 * adapter in place, and reopen the gate stamped with the new version.
 *
 * Refusals keep the old version serving:
 * - missing or corrupt objects, a folder of another shape or architecture: refused before vLLM is
 *   touched (CheckpointRejectedError, non-retryable);
 * - vLLM itself refuses the reload (it answers with an error status): the previous weights are reloaded
 *   and the checkpoint is refused;
 * - vLLM cannot be reached (it died): a plain, retryable error; if the previous weights could not be
 *   restored either, the gate is marked broken and the front answers 503 until a reload succeeds.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ReloadPolicyResult } from '../../activities/policy/types';
import { CheckpointRejectedError } from '../checkpoint';
import type { ObjectStore } from '../../storage/object-store';
import { safeSegment } from '../../storage/keys';
import { checkFullWeightsCompatible, checkLoraAdapter, IncompatibleCheckpointError } from './compat';
import { downloadHfCheckpoint, hfCheckpointExists, readHfManifest } from './hf-checkpoint';
import type { ServingGate, Served } from './serving-gate';
import { VllmRefusedError, type VllmControl } from './vllm-control';

/** What a reload swaps in: always a version of a campaign. */
type Target = Served & { campaignId: string };

export interface ReloadProgress {
  phase: 'fetching' | 'checking' | 'draining' | 'reloading' | 'restoring';
  campaignId: string;
  version: number;
  file?: string;
}

export interface ModelManagerOptions {
  serverId: string;
  store: ObjectStore;
  control: VllmControl;
  gate: ServingGate;
  /** Downloaded checkpoint folders go to <cacheDir>/<campaign>/v<N>. */
  cacheDir: string;
  /** The model folder the server started from: version `initial.version` (of any campaign, or of `campaignId`). */
  initial: { dir: string; version: number; campaignId: string | null };
  /** How long a reload waits for forwarded requests to finish (default 120 s). */
  drainMs?: number;
  log?: (msg: string) => void;
}

export class VllmModelManager {
  private chain: Promise<unknown> = Promise.resolve();
  /** Folder of the full weights vLLM holds now (under any LoRA adapter): what a failed reload restores. */
  private baseDir: string;
  private loraLoaded = false;
  lastReloadError: string | null = null;

  constructor(private readonly o: ModelManagerOptions) {
    this.baseDir = o.initial.dir;
  }

  get loraName(): string {
    return `${this.o.control.servedModelName}-lora`;
  }

  /** Serialized: a second reload waits for the first (the rollout never sends two, a retry might). */
  reload(campaignId: string, version: number, progress?: (p: ReloadProgress) => void): Promise<ReloadPolicyResult> {
    const run = this.chain.then(() => this.reloadNow(campaignId, version, progress ?? (() => undefined)));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async reloadNow(
    campaignId: string,
    version: number,
    progress: (p: ReloadProgress) => void
  ): Promise<ReloadPolicyResult> {
    const { gate } = this.o;
    const started = Date.now();
    const before = gate.served;
    const result = (unchanged: boolean): ReloadPolicyResult => ({
      serverId: this.o.serverId,
      campaignId,
      version,
      previousVersion: before.version,
      loadMs: Date.now() - started,
      unchanged,
    });
    if (!gate.broken && before.version === version && (before.campaignId ?? campaignId) === campaignId)
      return result(true);
    try {
      const target = await this.fetchTarget(campaignId, version, progress);
      await this.swap(target, progress);
      this.lastReloadError = null;
      this.prune(target.dir, before.dir);
      return result(false);
    } catch (err) {
      this.lastReloadError = err instanceof Error ? err.message : String(err);
      throw err;
    }
  }

  /** The local folder of the version, checked against the server; refusals are CheckpointRejectedError. */
  private async fetchTarget(
    campaignId: string,
    version: number,
    progress: (p: ReloadProgress) => void
  ): Promise<Target> {
    const { initial, control } = this.o;
    const isInitial = version === initial.version && (initial.campaignId ?? campaignId) === campaignId;
    if (isInitial && !(await hfCheckpointExists(this.o.store, campaignId, version))) {
      // The start-up folder is this version (e.g. v0 of a campaign whose first weights were never uploaded).
      return { campaignId, version, kind: 'full', model: control.servedModelName, dir: initial.dir };
    }
    progress({ phase: 'fetching', campaignId, version });
    const manifest = await readHfManifest(this.o.store, campaignId, version);
    const dest = path.join(this.o.cacheDir, safeSegment(campaignId, 'campaignId'), `v${version}`);
    const { dir } = await downloadHfCheckpoint(this.o.store, manifest, dest, (file) =>
      progress({ phase: 'fetching', campaignId, version, file })
    );
    progress({ phase: 'checking', campaignId, version });
    try {
      if (manifest.kind === 'full') checkFullWeightsCompatible(initial.dir, dir);
      else if (!control.lora)
        throw new IncompatibleCheckpointError('a LoRA checkpoint, but this vLLM runs without --enable-lora');
      else checkLoraAdapter(dir, control.lora.maxRank);
    } catch (err) {
      fs.rmSync(dir, { recursive: true, force: true });
      if (err instanceof IncompatibleCheckpointError)
        throw new CheckpointRejectedError('mismatch', campaignId, version, err.message);
      throw err;
    }
    return {
      campaignId,
      version,
      kind: manifest.kind,
      model: manifest.kind === 'lora' ? this.loraName : control.servedModelName,
      dir,
    };
  }

  private async swap(target: Target, progress: (p: ReloadProgress) => void): Promise<void> {
    const { gate, control } = this.o;
    const { campaignId, version } = target;
    // A server with a LoRA adapter going back to the bare base weights it started from: no vLLM call,
    // requests just stop naming the adapter.
    const needsVllm = !(target.kind === 'full' && target.dir === this.baseDir && !gate.broken);
    progress({ phase: 'draining', campaignId, version });
    const release = await gate.hold(this.o.drainMs ?? 120_000);
    try {
      if (needsVllm) {
        progress({ phase: 'reloading', campaignId, version });
        try {
          if (target.kind === 'full') await control.reloadWeights(target.dir);
          else await control.loadLora(this.loraName, target.dir, this.loraLoaded);
        } catch (err) {
          await this.afterFailedLoad(target, err, progress);
        }
        if (target.kind === 'full') this.baseDir = target.dir;
        else this.loraLoaded = true;
      }
      gate.served = target;
      gate.broken = undefined;
      this.o.log?.(`serving ${campaignId} v${version} (${target.kind})`);
    } finally {
      release();
    }
  }

  /** Always throws: CheckpointRejectedError when vLLM refused and the old weights are back, else the cause. */
  private async afterFailedLoad(target: Target, err: unknown, progress: (p: ReloadProgress) => void): Promise<never> {
    const { gate, control } = this.o;
    const { campaignId, version } = target;
    const why = err instanceof Error ? err.message : String(err);
    if (target.kind === 'lora') {
      // load_lora_adapter validates the adapter before it replaces the one in use: nothing to restore.
      if (err instanceof VllmRefusedError)
        throw new CheckpointRejectedError('mismatch', campaignId, version, `vLLM refused the adapter: ${why}`);
      throw err;
    }
    // reload_weights may have replaced some tensors before failing: put the previous full weights back.
    progress({ phase: 'restoring', campaignId, version });
    try {
      await control.reloadWeights(this.baseDir);
    } catch (restoreErr) {
      gate.broken = `reloading ${campaignId} v${version} failed (${why}) and restoring ${this.baseDir} failed too (${String(restoreErr)})`;
      this.o.log?.(gate.broken);
      throw new Error(gate.broken);
    }
    if (err instanceof VllmRefusedError && (await control.healthy(5000)))
      throw new CheckpointRejectedError(
        'mismatch',
        campaignId,
        version,
        `vLLM could not load it (previous weights restored): ${why}`
      );
    throw err;
  }

  /** Keeps the served folder and the one before it (a rollback target); removes older downloads. */
  private prune(current: string, previous: string): void {
    const keep = new Set([path.resolve(current), path.resolve(previous), path.resolve(this.baseDir)]);
    let campaigns: string[];
    try {
      campaigns = fs.readdirSync(this.o.cacheDir);
    } catch {
      return;
    }
    for (const c of campaigns) {
      const cdir = path.join(this.o.cacheDir, c);
      for (const v of fs.readdirSync(cdir)) {
        const d = path.resolve(cdir, v);
        if (!keep.has(d)) fs.rmSync(d, { recursive: true, force: true });
      }
    }
  }
}
