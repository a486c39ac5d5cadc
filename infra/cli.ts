/** `tsx infra/cli.ts up|down|status` — also reached as `dartflow infra ...` and the npm infra:* scripts. */
import { describeEndpoints, infraDown, infraUp, minioHealthy, temporalHealthy } from './services';
import { loadInfraSettings } from './settings';

export async function infraCommand(cmd: string | undefined): Promise<void> {
  const settings = loadInfraSettings();
  switch (cmd) {
    case 'up': {
      const handles = await infraUp(settings);
      for (const h of handles) {
        const how = h.external ? 'external' : h.reused ? 'already running, reused' : `started (pid ${h.pid})`;
        console.log(`[infra] ${h.name}: ${how}`);
      }
      for (const line of describeEndpoints(settings)) console.log(`[infra] ${line}`);
      return;
    }
    case 'down': {
      const stopped = await infraDown(settings);
      console.log(
        stopped.length ? `[infra] stopped: ${stopped.join(', ')}` : '[infra] nothing started by dartflow is running'
      );
      return;
    }
    case 'status': {
      const t = await temporalHealthy(settings.temporal.address);
      const m = await minioHealthy(settings.s3.endpoint);
      console.log(`[infra] temporal ${settings.temporal.address}: ${t ? 'healthy' : 'down'}`);
      console.log(`[infra] minio ${settings.s3.endpoint}: ${m ? 'healthy' : 'down'}`);
      for (const line of describeEndpoints(settings)) console.log(`[infra] ${line}`);
      return;
    }
    default:
      throw new Error(`unknown infra command "${cmd ?? ''}": use up, down or status`);
  }
}

if (require.main === module) {
  infraCommand(process.argv[2]).catch((err: unknown) => {
    console.error(`[infra] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
