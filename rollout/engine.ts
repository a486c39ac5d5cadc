/**
 * The policy server's core, without HTTP or Temporal: it holds the model version it serves, batches
 * act requests through the DynamicBatcher, samples each answer with its own seed, and swaps versions.
 *
 * Version swaps: `reload` reads and validates the checkpoint and builds a new ORT session while the
 * old one keeps answering; the swap itself is one assignment between two batches (a batch captures
 * the model it started with, so every answer names the version that actually produced it). The old
 * session is released once no batch uses it. Reloads are serialized; asking for the version already
 * served is a no-op (reloadPolicy is idempotent). A refused checkpoint leaves the served one untouched.
 *
 * The network: each checkpoint names its own (the spec in its safetensors header, the spec's hash in its
 * manifest), and a reload builds that network, so one server serves a campaign of any architecture
 * (policy.width, policy.clickMaxContext, …) without being told. `pinSpec` (a server given --spec-file)
 * refuses checkpoints of any other network instead. A request encoded for one network that meets another
 * (a reload to another architecture while it queued) is answered 503 network_changed: retried, never run on
 * the wrong input layout.
 *
 * Inference runs in this process, on the main thread. Why not a child process: one forward of the
 * default (then 23k-parameter) net cost ≈0.12 ms at B=1 and ≈7 ms at B=64 (env-and-policy.md §B4), so with
 * maxBatch capped (default 32) one blocking run() stays in the low milliseconds — far below any
 * heartbeat or HTTP timeout — while a child process would add a copy of every 49 KB observation over
 * IPC. For a much wider spec, lower maxBatch (the cap is what bounds the event-loop stall).
 * What does cost main-thread time is screenshot decoding (≈1–3 ms per PNG, ten times the forward pass
 * per sample). So the fast path takes the observation already encoded by the sender (the env worker,
 * which holds the screenshot anyway): the engine only checks its shape and values and packs it. PNG
 * observations still work; `preprocessThreads` moves their decoding to worker threads (rollout/preprocess.ts).
 */
import type { CanonicalAction } from '../schemas/actions';
import type { ObjectStore } from '../storage/object-store';
import { renderUiTarsResponse, uiTarsCoordSpace } from '../actions/uitars';
import { actionFromIndex, actionMask } from '../policy/action-space';
import { encodeInstruction, encodePreviousAction, type PreviousAction } from '../policy/observation';
import { sampleAction } from '../policy/sampling';
import { createInferenceSession, type ObservationRow, type PolicyInference } from '../policy/session';
import { IMAGE_CHANNELS, MASK_OFF, numActions, type PolicySpec } from '../policy/spec';
import type { PolicyWeights } from '../policy/weights';
import { BatchBuffers } from './batch-buffers';
import { DynamicBatcher, type BatchEvent } from './batcher';
import { CheckpointRejectedError, policySpecHash, readCheckpoint } from './checkpoint';
import type { PolicyHealthResult } from '../activities/policy/types';
import { inlinePreprocessor, threadPreprocessor, type Preprocessor } from './preprocess';

/**
 * The screenshot of one act request: a PNG the engine decodes, or the network input already encoded by
 * the sender (`encodeScreenshot` output, [3,S,S] float32 in [0,1]) plus the screenshot's own size (the
 * coordinate space of actionText).
 */
export type EngineScreenshot = { png: Uint8Array } | { image: Float32Array; width: number; height: number };

export type EngineObservation = EngineScreenshot & {
  instruction: string;
  fields: string[];
  /** Optional extra validity mask [A] (true = allowed), ANDed with the task's own mask. */
  mask?: boolean[];
  /**
   * The episode's previous action and whether the screen changed since (policy input `prev` of a spec
   * with previousAction); absent on the first step. The trainer rebuilds it from steps.jsonl.
   */
  previous?: PreviousAction;
};

export interface EngineActOptions {
  seed: number;
  temperature: number;
  greedy?: boolean;
}

export interface ActAnswer {
  actionIndex: number;
  action: CanonicalAction;
  actionText: string;
  /** Behaviour log-prob: of the tempered distribution actually sampled; log π(a) at T=1 when greedy. */
  logProb: number;
  /** Categorical entropy of the policy (T = 1), nats. */
  entropy: number;
  policyVersion: number;
  serverId: string;
}

export interface ServedModel {
  campaignId: string;
  version: number;
  specHash: string;
  loadedAt: number;
}

/** The engine's health: what policyHealth reports, minus the URL the HTTP layer adds (one definition, Node-free). */
export type EngineHealth = Omit<PolicyHealthResult, 'url'>;

export interface ReloadResult {
  serverId: string;
  campaignId: string;
  version: number;
  previousVersion: number | null;
  loadMs: number;
  /** True when this version was already being served (nothing was loaded). */
  unchanged: boolean;
}

export interface EngineOptions {
  serverId: string;
  /** The network before the first checkpoint is loaded, and for checkpoints that do not name theirs. */
  spec: PolicySpec;
  /** Serve this network only: a checkpoint of another one is refused (a server started with --spec-file). */
  pinSpec?: boolean;
  store: ObjectStore;
  maxBatch?: number;
  maxWaitMs?: number;
  maxQueue?: number;
  /** ORT intra-op threads per session. */
  threads?: number;
  /** Worker threads for PNG decode + downsample (0 = on the main thread). See rollout/preprocess.ts. */
  preprocessThreads?: number;
  onBatch?: (e: BatchEvent) => void;
}

/** No version loaded yet (HTTP 503): the campaign has not called reloadPolicy on this server. */
export class PolicyNotReadyError extends Error {
  constructor(serverId: string) {
    super(`policy server ${serverId} serves no model yet (call reloadPolicy first)`);
    this.name = 'PolicyNotReadyError';
  }
}

/**
 * The served network changed (a reload to a checkpoint of another architecture) while this request
 * waited (HTTP 503, retried): it was encoded for the old network's input layout.
 */
export class NetworkChangedError extends Error {
  constructor(serverId: string, from: string, to: string) {
    super(`policy server ${serverId} now serves network ${to}; this request was encoded for ${from}: send it again`);
    this.name = 'NetworkChangedError';
  }
}

/**
 * A request the server cannot answer as asked (HTTP 400): bad PNG, encoded image of the wrong size or
 * with values outside [0,1], mask of the wrong length, all actions masked. `code` is the HTTP error code.
 */
export class BadActRequestError extends Error {
  constructor(
    message: string,
    readonly code = 'bad_request'
  ) {
    super(message);
    this.name = 'BadActRequestError';
  }
}

/**
 * How densely checkEncodedImage range-checks values. A full scan of the 12k values costs a quarter of
 * the forward pass per sample, and the errors it is there for — a wrong scale (0–255, −1…1), data of
 * another dtype — show in almost every value. NaN and ±∞, which a spot check could miss,
 * are caught exactly from the output instead (PolicyEngine.act): they make that row's entropy non-finite.
 */
const RANGE_CHECK_STRIDE = 16;

/**
 * Checks an encoded screenshot against the served spec: 3·S·S values, spot-checked to lie in [0,1].
 * `field` names it in the error.
 */
export function checkEncodedImage(image: Float32Array, imageSize: number, field = 'observation.encoded'): void {
  const want = IMAGE_CHANNELS * imageSize * imageSize;
  if (image.length !== want)
    throw new BadActRequestError(
      `${field} holds ${image.length} float32 values; this policy's input is [${IMAGE_CHANNELS},${imageSize},${imageSize}] = ${want} values (encode the screenshot with imageSize ${imageSize})`,
      'bad_encoded_observation'
    );
  for (let i = 0; i < image.length; i += RANGE_CHECK_STRIDE) {
    const v = image[i]!;
    // Written so that NaN fails too.
    if (!(v >= 0 && v <= 1))
      throw new BadActRequestError(
        `${field} value ${i} is ${v}; encoded pixels must be in [0,1] (encodeScreenshot's output)`,
        'bad_encoded_observation'
      );
  }
}

/** One network the server can run, with what its spec sizes: batch buffers and instruction encodings. */
export interface ServedNetwork {
  readonly spec: PolicySpec;
  readonly specHash: string;
  /** Safe to share: the batcher runs one batch at a time (see rollout/batch-buffers.ts). */
  readonly buffers: BatchBuffers;
  /** Instruction encodings are reused across the steps and episodes of a task. */
  readonly textCache: Map<string, Float32Array>;
}

interface Model extends ServedModel {
  net: ServedNetwork;
  session: PolicyInference;
  users: number;
  retired: boolean;
}

interface QueuedRow {
  row: ObservationRow;
  net: ServedNetwork;
}

type BatchOut = { logp: Float32Array; entropy: number; version: number } | { changedTo: ServedNetwork };

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Width and height from the IHDR chunk (the decoder is run later by encodeScreenshot). */
export function pngSize(png: Uint8Array): { width: number; height: number } {
  if (png.byteLength < 24 || PNG_MAGIC.some((b, i) => png[i] !== b))
    throw new BadActRequestError('observation is not a PNG');
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width === 0 || height === 0 || width > 16384 || height > 16384)
    throw new BadActRequestError(`PNG size ${width}×${height} is out of range`);
  return { width, height };
}

export class PolicyEngine {
  readonly serverId: string;
  private readonly pinSpec: boolean;
  private readonly store: ObjectStore;
  private readonly threads: number;
  private readonly maxBatch: number;
  private current: Model | undefined;
  private loading: { campaignId: string; version: number } | null = null;
  private lastReloadError: string | null = null;
  private reloadChain: Promise<unknown> = Promise.resolve();
  private readonly batcher: DynamicBatcher<QueuedRow, BatchOut>;
  private readonly pre: Preprocessor;
  /** The configured network (served until a checkpoint names another). */
  private readonly defaultNet: ServedNetwork;
  /** The last other network built, kept so reloads within one campaign reuse its buffers. */
  private otherNet: ServedNetwork | undefined;

  constructor(opts: EngineOptions) {
    this.serverId = opts.serverId;
    this.pinSpec = opts.pinSpec ?? false;
    this.store = opts.store;
    this.threads = opts.threads ?? 1;
    const pt = opts.preprocessThreads ?? 0;
    this.pre = pt > 0 ? threadPreprocessor(pt) : inlinePreprocessor();
    const maxBatch = opts.maxBatch ?? 32;
    this.maxBatch = maxBatch;
    this.batcher = new DynamicBatcher<QueuedRow, BatchOut>(
      { run: (rows) => this.runBatch(rows) },
      {
        maxBatch,
        maxWaitMs: opts.maxWaitMs ?? 2,
        ...(opts.maxQueue !== undefined ? { maxQueue: opts.maxQueue } : {}),
      },
      opts.onBatch
    );
    // After the batcher, which refuses a bad maxBatch with a clear message.
    this.defaultNet = this.buildNetwork(opts.spec);
  }

  private buildNetwork(spec: PolicySpec): ServedNetwork {
    return {
      spec,
      specHash: policySpecHash(spec),
      buffers: new BatchBuffers(spec, this.maxBatch),
      textCache: new Map(),
    };
  }

  /** The network for `spec`: the configured one, the last other one, or a new one (which replaces it). */
  private networkFor(spec: PolicySpec): ServedNetwork {
    const hash = policySpecHash(spec);
    if (hash === this.defaultNet.specHash) return this.defaultNet;
    if (this.otherNet?.specHash !== hash) this.otherNet = this.buildNetwork(spec);
    return this.otherNet;
  }

  /** The network requests are encoded for now: the served model's, or the configured one before any. */
  get network(): ServedNetwork {
    return this.current?.net ?? this.defaultNet;
  }

  get served(): ServedModel | undefined {
    const m = this.current;
    return m ? { campaignId: m.campaignId, version: m.version, specHash: m.specHash, loadedAt: m.loadedAt } : undefined;
  }

  /** Batch-size histogram (size → count) since start. */
  batchSizes(): Map<number, number> {
    return new Map(this.batcher.sizes);
  }

  health(): EngineHealth {
    return {
      serverId: this.serverId,
      campaignId: this.current?.campaignId ?? null,
      version: this.current?.version ?? null,
      specHash: this.network.specHash,
      queueDepth: this.batcher.queueDepth,
      inFlight: this.batcher.inFlight,
      loading: this.loading,
      lastReloadError: this.lastReloadError,
      batches: this.batcher.batches,
      items: this.batcher.items,
      maxBatch: this.batcher.options.maxBatch,
    };
  }

  private async runBatch(queued: QueuedRow[]): Promise<BatchOut[]> {
    const model = this.current;
    if (!model) throw new PolicyNotReadyError(this.serverId);
    // Rows encoded for another network (a reload changed it while they queued) go back as network_changed.
    const runnable = queued.filter((q) => q.net === model.net);
    if (runnable.length === 0) return queued.map(() => ({ changedTo: model.net }));
    model.users += 1;
    try {
      const out = await model.session.run(model.net.buffers.pack(runnable.map((q) => q.row)));
      const A = numActions(model.net.spec);
      let i = 0;
      return queued.map((q) => {
        if (q.net !== model.net) return { changedTo: model.net };
        const k = i++;
        return { logp: out.logp.slice(k * A, (k + 1) * A), entropy: out.entropy[k] ?? NaN, version: model.version };
      });
    } finally {
      model.users -= 1;
      this.releaseIfIdle(model);
    }
  }

  private releaseIfIdle(model: Model): void {
    if (model.retired && model.users === 0) void model.session.release().catch(() => undefined);
  }

  private encodeText(net: ServedNetwork, instruction: string): Float32Array {
    let v = net.textCache.get(instruction);
    if (!v) {
      v = encodeInstruction(instruction, net.spec);
      if (net.textCache.size >= 1024) net.textCache.clear();
      net.textCache.set(instruction, v);
    }
    return v;
  }

  private encodeMask(net: ServedNetwork, obs: EngineObservation): Float32Array {
    const mask = actionMask(net.spec, { numFields: obs.fields.length });
    if (obs.mask) {
      if (obs.mask.length !== mask.length)
        throw new BadActRequestError(`mask has ${obs.mask.length} entries, this policy has ${mask.length} actions`);
      obs.mask.forEach((ok, i) => {
        if (!ok) mask[i] = MASK_OFF;
      });
    }
    if (!mask.some((v) => v === 0)) throw new BadActRequestError('every action is masked');
    return mask;
  }

  /**
   * One step's decision. Concurrent calls are batched together. `net`: the network the caller checked
   * the observation against (the HTTP layer, before it cut the body into images); default the served one.
   */
  async act(obs: EngineObservation, opts: EngineActOptions, net: ServedNetwork = this.network): Promise<ActAnswer> {
    if (!this.current) throw new PolicyNotReadyError(this.serverId);
    let size: { width: number; height: number };
    let image: Float32Array;
    if ('image' in obs) {
      checkEncodedImage(obs.image, net.spec.imageSize);
      size = { width: obs.width, height: obs.height };
      image = obs.image;
    } else {
      size = pngSize(obs.png);
      try {
        image = await this.pre.encode(obs.png, net.spec.imageSize);
      } catch (err) {
        throw new BadActRequestError(`cannot decode the PNG: ${(err as Error).message}`);
      }
    }
    let prev: Float32Array | undefined;
    try {
      prev = net.spec.previousAction ? encodePreviousAction(obs.previous, net.spec) : undefined;
    } catch (err) {
      throw new BadActRequestError((err as Error).message);
    }
    const row: ObservationRow = {
      obs: image,
      text: this.encodeText(net, obs.instruction),
      mask: this.encodeMask(net, obs),
      ...(prev ? { prev } : {}),
    };
    const out = await this.batcher.submit({ row, net });
    if ('changedTo' in out) throw new NetworkChangedError(this.serverId, net.specHash, out.changedTo.specHash);
    // Rows of a batch are computed independently, so a NaN or ∞ sent in an encoded image spoils only
    // its own row: refuse that request (a PNG cannot carry one).
    if ('image' in obs && !Number.isFinite(out.entropy))
      throw new BadActRequestError(
        "the policy's output for observation.encoded is not finite: the image holds NaN or ∞ values",
        'bad_encoded_observation'
      );
    const sample = sampleAction(out.logp, {
      seed: opts.seed >>> 0,
      temperature: opts.temperature,
      greedy: opts.greedy ?? false,
    });
    // sampleAction never picks a masked entry (weight exactly 0), so decoding cannot hit a reserved slot.
    const action = actionFromIndex(net.spec, sample.index, { fields: obs.fields });
    return {
      actionIndex: sample.index,
      action,
      actionText: renderUiTarsResponse(action, uiTarsCoordSpace(size)),
      logProb: opts.greedy ? sample.logp : sample.sampleLogp,
      entropy: Math.max(0, out.entropy),
      policyVersion: out.version,
      serverId: this.serverId,
    };
  }

  /** Serves `weights` directly as `version` (tests and benchmarks without a store round trip). */
  async loadWeights(campaignId: string, version: number, weights: PolicyWeights): Promise<void> {
    const net = this.defaultNet;
    const session = await createInferenceSession(net.spec, weights, { threads: this.threads });
    this.swap({
      campaignId,
      version,
      net,
      specHash: net.specHash,
      loadedAt: Date.now(),
      session,
      users: 0,
      retired: false,
    });
  }

  private swap(next: Model): void {
    const old = this.current;
    this.current = next;
    if (old) {
      old.retired = true;
      this.releaseIfIdle(old);
    }
  }

  /** Loads `version` of `campaignId` from the store and swaps it in; throws CheckpointRejectedError if refused. */
  reload(campaignId: string, version: number): Promise<ReloadResult> {
    const run = this.reloadChain.then(() => this.reloadNow(campaignId, version));
    this.reloadChain = run.catch(() => undefined);
    return run;
  }

  private async reloadNow(campaignId: string, version: number): Promise<ReloadResult> {
    const previousVersion = this.current?.version ?? null;
    if (this.current && this.current.campaignId === campaignId && this.current.version === version) {
      return { serverId: this.serverId, campaignId, version, previousVersion, loadMs: 0, unchanged: true };
    }
    const t0 = performance.now();
    this.loading = { campaignId, version };
    try {
      const { weights, spec } = await readCheckpoint(this.store, campaignId, version, {
        spec: this.defaultNet.spec,
        pinned: this.pinSpec,
      });
      const net = this.networkFor(spec);
      let session: PolicyInference;
      try {
        session = await createInferenceSession(net.spec, weights, { threads: this.threads });
      } catch (err) {
        throw new CheckpointRejectedError(
          'corrupt',
          campaignId,
          version,
          `onnxruntime refused the weights: ${(err as Error).message}`
        );
      }
      this.swap({
        campaignId,
        version,
        net,
        specHash: net.specHash,
        loadedAt: Date.now(),
        session,
        users: 0,
        retired: false,
      });
      this.lastReloadError = null;
      return {
        serverId: this.serverId,
        campaignId,
        version,
        previousVersion,
        loadMs: performance.now() - t0,
        unchanged: false,
      };
    } catch (err) {
      this.lastReloadError = (err as Error).message;
      throw err;
    } finally {
      this.loading = null;
    }
  }

  /** Stops accepting work; queued requests are rejected, the running batch finishes. */
  async close(): Promise<void> {
    this.batcher.close();
    await this.pre.close();
    await this.reloadChain;
    const m = this.current;
    this.current = undefined;
    if (m) {
      m.retired = true;
      this.releaseIfIdle(m);
    }
  }
}
