/** Test helpers: play one episode on an env with a policy (no storage), and throwaway buckets. */
import type { EpisodePolicy } from '../../activities/env/policy';
import type { GuiEnv } from '../../envs/types';
import type { TaskSpec } from '../../tasks/schema';
import { loadInfraSettings } from '../../infra/settings';
import { ObjectStore } from '../../storage/object-store';

export interface Played {
  reward: number;
  steps: number;
  instruction: string;
  firstPng: Uint8Array;
}

export async function playEpisode(
  env: GuiEnv,
  task: TaskSpec,
  seed: number,
  makePolicy: (env: GuiEnv) => EpisodePolicy
): Promise<Played> {
  const r = await env.reset(task, seed);
  const policy = makePolicy(env);
  let obs = r.observation;
  let steps = 0;
  for (let step = 0; step < task.maxSteps; step++) {
    const d = await policy.act(
      { ...obs, instruction: r.instruction, fields: r.fields, step },
      { seed: seed * 1000 + step, temperature: 1 }
    );
    steps++;
    const s = d.action ? await env.step(d.action) : { done: false };
    if (s.done) break;
    obs = await env.observe();
  }
  const ev = await env.evaluate();
  return { reward: ev.reward, steps, instruction: r.instruction, firstPng: r.observation.png };
}

export async function throwawayStore(prefix = 'test-env-'): Promise<{ store: ObjectStore; drop(): Promise<void> }> {
  const base = ObjectStore.fromSettings(loadInfraSettings());
  const store = base.withBucket(`${prefix}${Date.now()}-${Math.floor(Math.random() * 1e6)}`);
  await store.ensureBucket();
  return {
    store,
    async drop() {
      await store.removePrefix('');
      await store.client.removeBucket(store.bucket);
    },
  };
}
