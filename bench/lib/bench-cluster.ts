/**
 * A private dartflow cluster for campaign benchmarks, as the campaign integration test builds it: its own
 * Temporal namespace (on the shared dev server) and MinIO bucket, and every role as a local child process
 * (cli/local-workers.ts). Also reads back what a campaign recorded (trajectory manifests, ledger entries).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startLocalWorkers, type LocalWorkers, type LocalWorkersOptions } from '../../cli/local-workers';
import { DartflowClient } from '../../client/dartflow-client';
import { registerScratchNamespace } from '../../infra/services';
import { loadInfraSettings, type InfraSettings } from '../../infra/settings';
import {
  LedgerEntrySchema,
  TrajectoryManifestSchema,
  type LedgerEntry,
  type TrajectoryManifest,
} from '../../schemas/records';
import { keys } from '../../storage/keys';
import { ObjectStore } from '../../storage/object-store';
import { mapLimit } from '../../lib/concurrency';

export interface BenchCluster {
  settings: InfraSettings;
  namespace: string;
  store: ObjectStore;
  client: DartflowClient;
  workers: LocalWorkers;
  /** Stops the workers (by their PIDs), closes the client and empties + removes the bucket. */
  close(opts?: { keepBucket?: boolean }): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const benchSuffix = (): string => `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;

export async function startBenchCluster(
  label: string,
  workerOpts: Omit<LocalWorkersOptions, 'env' | 'logDir'>
): Promise<BenchCluster> {
  const base = loadInfraSettings();
  const suffix = benchSuffix();
  const namespace = `dartflow-bench-${label}-${suffix}`;
  const store = ObjectStore.fromSettings(base).withBucket(`bench-${label}-${suffix}`.toLowerCase().slice(0, 63));
  await store.ensureBucket();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `dartflow-bench-${label}-`));
  const scratch = await registerScratchNamespace(base, namespace);
  const settings: InfraSettings = { ...scratch, dataDir, s3: { ...base.s3, bucket: store.bucket } };
  const workers = startLocalWorkers(settings, {
    ...workerOpts,
    logDir: path.join(dataDir, 'logs'),
    env: { TEMPORAL_NAMESPACE: namespace, S3_BUCKET: store.bucket, DARTFLOW_DATA_DIR: dataDir },
  });
  const client = await DartflowClient.connect(settings);
  return {
    settings,
    namespace,
    store,
    client,
    workers,
    async close(opts = {}) {
      // The namespace is this cluster's own: whatever still runs in it (a bench that failed mid-campaign,
      // abandoned children) would otherwise keep the shared dev server busy with timeouts and retries.
      await terminateRunning(client, namespace).catch((err: unknown) =>
        console.warn(`[bench] could not terminate the workflows left in ${namespace}: ${String(err)}`)
      );
      await client.close().catch(() => undefined);
      await workers.stop();
      if (!opts.keepBucket) {
        await store.removePrefix('').catch(() => undefined);
        await store.client.removeBucket(store.bucket).catch(() => undefined);
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Terminates every running workflow of a bench cluster's private namespace. */
async function terminateRunning(client: DartflowClient, namespace: string): Promise<void> {
  const ids: string[] = [];
  for await (const wf of client.temporal.workflow.list({ query: 'ExecutionStatus="Running"' })) ids.push(wf.workflowId);
  await mapLimit(ids, 8, (id) =>
    client.temporal.workflow
      .getHandle(id)
      .terminate(`bench cluster ${namespace} closed`)
      .catch(() => undefined)
  );
  if (ids.length > 0) console.log(`[bench] terminated ${ids.length} workflows left running in ${namespace}`);
}

/** Every trajectory manifest a campaign wrote (its rollouts, and `<id>.eval` for evaluations). */
export async function readManifests(store: ObjectStore, campaignId: string): Promise<TrajectoryManifest[]> {
  const keysFound = (await store.list(keys.trajectoryPrefix(campaignId))).filter((k) => k.endsWith('/manifest.json'));
  return mapLimit(keysFound, 16, (k) => store.getJson(k, TrajectoryManifestSchema));
}

export async function readLedger(store: ObjectStore, campaignId: string): Promise<LedgerEntry[]> {
  const found = (await store.list(keys.ledgerPrefix(campaignId))).filter((k) => k.endsWith('.json'));
  const entries = await mapLimit(found, 8, (k) => store.getJson(k, LedgerEntrySchema));
  return entries.sort((a, b) => a.trainStep - b.trainStep);
}

/** Waits for `fn` to return a value (polling), or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}
