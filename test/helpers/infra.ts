/** Shared test helpers: real servers from infra/ (started by scripts/test.ts), throwaway buckets, free ports. */
import { randomBytes } from 'node:crypto';
import { loadInfraSettings, type InfraSettings } from '../../infra/settings';
import { ObjectStore } from '../../storage/object-store';
import { freePort } from '../../infra/ports';

export function testSettings(): InfraSettings {
  return loadInfraSettings();
}

export const uniqueSuffix = (): string => `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;

/** A new, empty bucket on the real MinIO, and a cleanup that empties and removes it. */
export async function freshBucket(label: string): Promise<{ store: ObjectStore; cleanup: () => Promise<void> }> {
  const base = ObjectStore.fromSettings(testSettings());
  const store = base.withBucket(`t-${label}-${uniqueSuffix()}`.toLowerCase().slice(0, 63));
  await store.ensureBucket();
  return {
    store,
    cleanup: async () => {
      await store.removePrefix('');
      await store.client.removeBucket(store.bucket);
    },
  };
}

export { freePort };
