/**
 * Policy servers announce themselves in MinIO (`registry/policy-servers/<id>.json`: URL, served version,
 * heartbeat time) so campaigns on any machine find them; listPolicyServers skips stale entries.
 */
import { registryKeys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { PolicyServerRegistrationSchema, type PolicyServerRegistration } from './campaign-data';

export async function announcePolicyServer(
  store: ObjectStore,
  reg: Omit<PolicyServerRegistration, 'heartbeatAt'>
): Promise<void> {
  await store.putJson(
    registryKeys.policyServer(reg.serverId),
    { ...reg, heartbeatAt: Date.now() },
    PolicyServerRegistrationSchema
  );
}

/** The registration a server left behind (e.g. before a crash), or undefined when there is none. */
export async function readPolicyServerRegistration(
  store: ObjectStore,
  serverId: string
): Promise<PolicyServerRegistration | undefined> {
  const key = registryKeys.policyServer(serverId);
  if (!(await store.exists(key))) return undefined;
  return store.getJson(key, PolicyServerRegistrationSchema);
}

export async function withdrawPolicyServer(store: ObjectStore, serverId: string): Promise<void> {
  await store.remove(registryKeys.policyServer(serverId)).catch(() => undefined);
}

/** Re-announces every `intervalMs` until stopped; failures (MinIO restarting) are retried next tick. */
export function keepAnnouncing(
  store: ObjectStore,
  current: () => Omit<PolicyServerRegistration, 'heartbeatAt'>,
  intervalMs = 10_000
): () => Promise<void> {
  let stopped = false;
  const tick = () => announcePolicyServer(store, current()).catch(() => undefined);
  void tick();
  const timer = setInterval(() => {
    if (!stopped) void tick();
  }, intervalMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await withdrawPolicyServer(store, current().serverId);
  };
}
