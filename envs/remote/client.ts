/**
 * Client of the dartflow env protocol: a GuiEnv whose screen lives on another machine. Every call has
 * a timeout; idempotent calls (create, reset, observe, evaluate, oracle, release) are retried with
 * backoff on network errors and 5xx/503; step is never retried (it is not idempotent). Server error
 * types come back as the same typed errors the local envs throw.
 */
import type { z } from 'zod';
import type { CanonicalAction } from '../../schemas/actions';
import type { TaskSpec } from '../../tasks/schema';
import {
  EnvCrashedError,
  EnvError,
  EnvProtocolError,
  EnvTimeoutError,
  EnvUnavailableError,
  TaskConfigError,
} from '../errors';
import { SlotPool } from '../slot-pool';
import type { EvalResult, GuiEnv, Observation, ResetResult, StepResult } from '../types';
import {
  CreateEnvResponseSchema,
  ErrorResponseSchema,
  EvaluateResponseSchema,
  ObservationWireSchema,
  OracleResponseSchema,
  ResetResponseSchema,
  ReleaseResponseSchema,
  StepResponseSchema,
} from './protocol';

export interface RemoteEnvOptions {
  baseUrl: string;
  token?: string;
  /** Per-call deadlines; resets of VMs need minutes, steps seconds. */
  timeouts?: { createMs?: number; resetMs?: number; stepMs?: number; observeMs?: number };
  retries?: number;
  retryBaseMs?: number;
}

const wireObs = (o: z.infer<typeof ObservationWireSchema>): Observation => ({
  png: Buffer.from(o.pngBase64, 'base64'),
  width: o.width,
  height: o.height,
});

export class RemoteEnv implements GuiEnv {
  readonly kind = 'remote';
  private envId: string | null = null;
  private dead = false;

  constructor(
    readonly id: string,
    private readonly opts: RemoteEnvOptions
  ) {}

  get broken(): boolean {
    return this.dead;
  }

  private async call<T>(
    method: string,
    path: string,
    body: unknown,
    schema: z.ZodType<T>,
    timeoutMs: number,
    idempotent: boolean
  ): Promise<T> {
    const attempts = idempotent ? (this.opts.retries ?? 3) + 1 : 1;
    let last: Error = new EnvUnavailableError(`${this.id}: no attempt made`);
    for (let a = 0; a < attempts; a++) {
      if (a > 0) await new Promise((r) => setTimeout(r, (this.opts.retryBaseMs ?? 200) * 2 ** (a - 1)));
      let res: Response;
      try {
        res = await fetch(new URL(path, this.opts.baseUrl), {
          method,
          headers: {
            'content-type': 'application/json',
            ...(this.opts.token ? { authorization: `Bearer ${this.opts.token}` } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (err) {
        const e = err as Error;
        last =
          e.name === 'TimeoutError'
            ? new EnvTimeoutError(`${this.id}: ${method} ${path} timed out after ${timeoutMs} ms`, this.id)
            : new EnvUnavailableError(
                `${this.id}: ${method} ${path}: ${e.message}${e.cause ? ` (${String((e.cause as Error).message ?? e.cause)})` : ''}`,
                this.id
              );
        if (last instanceof EnvTimeoutError && !idempotent) throw last;
        continue;
      }
      let json: unknown;
      try {
        json = await res.json();
      } catch {
        last = new EnvProtocolError(`${this.id}: ${method} ${path}: HTTP ${res.status} with a non-JSON body`, this.id);
        if (res.status >= 500) continue;
        throw last;
      }
      if (res.ok) {
        const parsed = schema.safeParse(json);
        if (!parsed.success)
          throw new EnvProtocolError(
            `${this.id}: ${method} ${path}: unexpected response (${parsed.error.issues[0]?.message ?? ''})`,
            this.id
          );
        return parsed.data;
      }
      last = this.toError(json, res.status, `${method} ${path}`);
      const retryableStatus = res.status === 503 || res.status === 502 || res.status === 504;
      if (!(retryableStatus && idempotent)) throw last;
    }
    throw last;
  }

  private toError(json: unknown, status: number, what: string): Error {
    const e = ErrorResponseSchema.safeParse(json);
    const msg = `${this.id}: ${what}: ${e.success ? e.data.error.message : `HTTP ${status}`}`;
    switch (e.success ? e.data.error.type : 'Internal') {
      case 'TaskConfigError':
        return new TaskConfigError(msg);
      case 'EnvCrashedError':
        return new EnvCrashedError(msg, this.id);
      case 'EnvTimeoutError':
        return new EnvTimeoutError(msg, this.id);
      case 'NoCapacity':
      case 'EnvUnavailableError':
      case 'Unauthorized':
        return new EnvUnavailableError(msg, this.id);
      case 'NotFound':
        // Our lease is gone (server restarted or reaped it): the env must be re-created.
        return new EnvCrashedError(msg, this.id);
      default:
        return new EnvProtocolError(msg, this.id);
    }
  }

  private t(k: keyof NonNullable<RemoteEnvOptions['timeouts']>, dflt: number): number {
    return this.opts.timeouts?.[k] ?? dflt;
  }

  /** Runs a call on our lease; any env error marks this env dead so the pool replaces it. */
  private async onLease<T>(fn: (id: string) => Promise<T>): Promise<T> {
    try {
      if (!this.envId) {
        const created = await this.call(
          'POST',
          '/v1/envs',
          { waitMs: 0 },
          CreateEnvResponseSchema,
          this.t('createMs', 30_000),
          true
        );
        this.envId = created.envId;
      }
      return await fn(this.envId);
    } catch (err) {
      if (err instanceof EnvError && !(err instanceof EnvUnavailableError)) this.dead = true;
      throw err;
    }
  }

  async reset(task: TaskSpec, seed: number): Promise<ResetResult> {
    return this.onLease(async (id) => {
      const r = await this.call(
        'POST',
        `/v1/envs/${id}/reset`,
        { task, seed },
        ResetResponseSchema,
        this.t('resetMs', 300_000),
        true
      );
      return { instruction: r.instruction, fields: r.fields, observation: wireObs(r.observation) };
    });
  }

  async observe(): Promise<Observation> {
    return this.onLease(async (id) =>
      wireObs(
        await this.call(
          'GET',
          `/v1/envs/${id}/observation`,
          undefined,
          ObservationWireSchema,
          this.t('observeMs', 30_000),
          true
        )
      )
    );
  }

  async step(action: CanonicalAction): Promise<StepResult> {
    return this.onLease(async (id) => {
      const r = await this.call(
        'POST',
        `/v1/envs/${id}/step`,
        { action },
        StepResponseSchema,
        this.t('stepMs', 60_000),
        false
      );
      return { done: r.done, actionOk: r.actionOk, ...(r.error !== undefined ? { error: r.error } : {}) };
    });
  }

  async evaluate(): Promise<EvalResult> {
    return this.onLease(async (id) => {
      const r = await this.call(
        'POST',
        `/v1/envs/${id}/evaluate`,
        {},
        EvaluateResponseSchema,
        this.t('resetMs', 300_000),
        true
      );
      return { reward: r.reward, done: r.done, ...(r.reason !== undefined ? { reason: r.reason } : {}) };
    });
  }

  async oracle(): Promise<CanonicalAction | null> {
    return this.onLease(
      async (id) =>
        (await this.call('POST', `/v1/envs/${id}/oracle`, {}, OracleResponseSchema, this.t('stepMs', 60_000), true))
          .action
    );
  }

  async close(): Promise<void> {
    const id = this.envId;
    this.envId = null;
    if (!id) return;
    const q = this.dead ? '?broken=1' : '';
    await this.call('DELETE', `/v1/envs/${id}${q}`, undefined, ReleaseResponseSchema, 10_000, true).catch(
      () => undefined
    );
  }
}

export interface RemotePoolOptions extends RemoteEnvOptions {
  slots: number;
}

export class RemoteEnvPool extends SlotPool<RemoteEnv> {
  constructor(opts: RemotePoolOptions) {
    super(
      'remote',
      opts.slots,
      (id) => new RemoteEnv(id, opts),
      (e) => e.broken
    );
  }
}
