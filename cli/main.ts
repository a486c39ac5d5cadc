/** `dartflow <command>`: the command-line interface. Grows with the campaign issue (workers, campaign, eval). */
import { infraCommand } from '../infra/cli';

const USAGE = `usage: dartflow <command>
  infra up        install (if missing) nothing; start the local Temporal dev server and MinIO, or check external ones
  infra down      stop the servers dartflow started (by recorded PID)
  infra status    show endpoints and health`;

async function main(argv: string[]): Promise<void> {
  const [cmd, sub] = argv;
  switch (cmd) {
    case 'infra':
      return infraCommand(sub);
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return;
    default:
      throw new Error(`unknown command "${cmd}"\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`dartflow: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
