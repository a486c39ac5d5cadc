/**
 * Loopback stand-ins for a GUI-Docker-Env control server, the VMs it starts (OSWorld's in-VM server:
 * /screenshot, /execute, /terminal, /setup/*, /file) and, for adapter tests that need no Python, the
 * sidecar's HTTP API. They follow the documented API (dart-spec.md §2.1 b) and can fail on purpose.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';

export type VmMode = 'ok' | 'hang' | 'not-image';

export const SCREEN_PNG = PNG.sync.write(Object.assign(new PNG({ width: 16, height: 9 }), {}));

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve) => {
    let s = '';
    req
      .setEncoding('utf8')
      .on('data', (d: string) => (s += d))
      .on('end', () => resolve(s));
  });

function reply(res: http.ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const data = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': type, 'content-length': data.length }).end(data);
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

export class FakeVm {
  readonly executed: string[][] = [];
  readonly setupCalls: string[] = [];
  private server: http.Server;
  port = 0;
  /** Closes the VM's server after this many /execute calls (a VM dying mid-episode). */
  dieAfterExecutes = Infinity;

  constructor(
    public mode: VmMode,
    private readonly fileRoot?: string
  ) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(): Promise<void> {
    this.port = await listen(this.server);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (this.mode === 'hang') return; // accepts the connection, never answers
    if (req.method === 'GET' && req.url === '/screenshot') {
      if (this.mode === 'not-image') return reply(res, 200, Buffer.from('<html>502 Bad Gateway</html>'), 'text/html');
      return reply(res, 200, SCREEN_PNG, 'image/png');
    }
    if (req.method === 'GET' && req.url === '/terminal') return reply(res, 200, { output: '' });
    if (req.method === 'POST' && req.url === '/execute') {
      this.executed.push((JSON.parse(body) as { command: string[] }).command);
      reply(res, 200, { status: 'success', output: '', error: '', returncode: 0 });
      if (this.executed.length >= this.dieAfterExecutes) this.kill();
      return;
    }
    if (req.method === 'POST' && req.url?.startsWith('/setup/')) {
      this.setupCalls.push(req.url);
      return reply(res, 200, { status: 'success' });
    }
    if (req.method === 'POST' && req.url === '/file' && this.fileRoot) {
      const file = path.join(this.fileRoot, new URLSearchParams(body).get('file_path') ?? '');
      if (!fs.existsSync(file)) return reply(res, 404, { error: 'File not found' });
      return reply(res, 200, fs.readFileSync(file), 'application/octet-stream');
    }
    reply(res, 404, { error: 'no route' });
  }

  kill(): void {
    this.server.closeAllConnections();
    this.server.close();
  }
}

export interface EnvServerOptions {
  token: string;
  limit: number;
  vmMode?: VmMode;
  /** Answer /start_emulator with this status instead of starting a VM (e.g. 500, or 429 despite /tokens). */
  startStatus?: number;
  fileRoot?: string;
}

/** GUI-Docker-Env's control server: tokens with quotas, start_emulator, DELETE /emulators/{id}. */
export class FakeEnvServer {
  readonly vms = new Map<string, FakeVm>();
  readonly deleted: string[] = [];
  readonly requests: string[] = [];
  current = 0;
  url = '';
  private server: http.Server;
  private next = 0;

  constructor(readonly o: EnvServerOptions) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(): Promise<this> {
    this.url = `http://127.0.0.1:${await listen(this.server)}`;
    return this;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    await readBody(req);
    this.requests.push(`${req.method} ${req.url}`);
    const authorized = req.headers.authorization === `Bearer ${this.o.token}`;
    if (req.method === 'GET' && req.url === '/tokens') {
      return reply(res, 200, {
        [this.o.token]: { current: this.current, limit: this.o.limit, emulator_count: this.current },
      });
    }
    if (req.method === 'POST' && req.url === '/start_emulator') {
      if (!authorized) return reply(res, 401, { message: 'Token required', code: 401 });
      if (this.o.startStatus) return reply(res, this.o.startStatus, { message: 'refused', code: this.o.startStatus });
      if (this.current >= this.o.limit)
        return reply(res, 429, { message: `Token quota exceeded: ${this.current}/${this.o.limit}`, code: 429 });
      const vm = new FakeVm(this.o.vmMode ?? 'ok', this.o.fileRoot);
      await vm.start();
      const id = `emu-${this.next++}`;
      this.vms.set(id, vm);
      this.current++;
      return reply(res, 200, {
        message: 'Emulator started successfully',
        code: 0,
        data: {
          emulator_id: id,
          server_port: vm.port,
          chromium_port: 9222,
          vlc_port: 8080,
          vnc_port: 8006,
          token: this.o.token,
        },
      });
    }
    const del = /^\/emulators\/([^/]+)$/.exec(req.url ?? '');
    if (req.method === 'DELETE' && del?.[1]) {
      const vm = this.vms.get(del[1]);
      if (!vm) return reply(res, 404, { message: 'Emulator not found', code: 404 });
      if (!authorized) return reply(res, 401, { message: 'Token required', code: 401 });
      vm.kill();
      this.vms.delete(del[1]);
      this.deleted.push(del[1]);
      this.current--;
      return reply(res, 200, { message: 'Emulator stopped successfully', code: 0 });
    }
    reply(res, 404, { message: 'no route' });
  }

  close(): void {
    for (const vm of this.vms.values()) vm.kill();
    this.server.closeAllConnections();
    this.server.close();
  }
}

/** The sidecar's API without Python: setup always works; evaluate answers `reward` or a scripted error. */
export class FakeSidecar {
  readonly evaluations: { lastAction: unknown; evaluator: unknown }[] = [];
  evaluateAnswer: { status: number; body: unknown } = { status: 200, body: { reward: 1 } };
  url = '';
  private server = http.createServer((req, res) => void this.handle(req, res));

  async start(): Promise<this> {
    this.url = `http://127.0.0.1:${await listen(this.server)}`;
    return this;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(req)) || '{}') as { lastAction?: unknown; evaluator?: unknown };
    if (req.url === '/v1/setup') return reply(res, 200, { ok: true, steps: 0 });
    if (req.url === '/v1/evaluate') {
      this.evaluations.push({ lastAction: body.lastAction, evaluator: body.evaluator });
      return reply(res, this.evaluateAnswer.status, this.evaluateAnswer.body);
    }
    reply(res, 404, {});
  }

  close(): void {
    this.server.closeAllConnections();
    this.server.close();
  }
}
