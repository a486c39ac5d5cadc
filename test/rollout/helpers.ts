/** Shared fixtures of the rollout tests: synthetic screenshots, and proxies in front of a policy server. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PNG } from 'pngjs';
import { mulberry32 } from '../../policy/sampling';

/** A deterministic 160×160 (by default) PNG: colored boxes on a light background. */
export function makePng(seed: number, width = 160, height = 160): Buffer {
  const png = new PNG({ width, height });
  const rng = mulberry32(seed);
  png.data.fill(240);
  for (let b = 0; b < 3; b++) {
    const x0 = Math.floor(rng() * (width - 30));
    const y0 = Math.floor(rng() * (height - 30));
    const [r, g, bl] = [rng() * 255, rng() * 255, rng() * 255].map(Math.floor) as [number, number, number];
    for (let y = y0; y < y0 + 24; y++) {
      for (let x = x0; x < x0 + 24; x++) {
        const p = (y * width + x) * 4;
        png.data[p] = r;
        png.data[p + 1] = g;
        png.data[p + 2] = bl;
        png.data[p + 3] = 255;
      }
    }
  }
  for (let i = 3; i < png.data.length; i += 4) png.data[i] = 255;
  return PNG.sync.write(png);
}

export const TEST_TOKEN = 'test-token-0123456789abcdef';

export const observation = (seed: number, instruction = 'click on the red box', fields: string[] = []) => ({
  pngBase64: makePng(seed).toString('base64'),
  instruction,
  fields,
});

/** Forwards one buffered request to `target` (method, auth, content type and body unchanged) and relays the answer. */
export async function forwardRequest(
  target: string,
  req: http.IncomingMessage,
  body: Buffer,
  res: http.ServerResponse
): Promise<void> {
  try {
    const r = await fetch(`${target}${req.url ?? ''}`, {
      method: req.method ?? 'GET',
      headers: {
        authorization: req.headers.authorization ?? '',
        'content-type': req.headers['content-type'] ?? 'application/json',
      },
      ...(req.method === 'POST' ? { body } : {}),
    });
    res.writeHead(r.status, { 'content-type': 'application/json' });
    res.end(await r.text());
  } catch {
    res.destroy();
  }
}

/**
 * A proxy in front of `target` that holds every request until `open()` (so "a call is in flight" is a
 * state, not a timing), counting arrivals and, for JSON act bodies, the requests each call carried.
 */
export async function gateProxy(target: string) {
  let release!: () => void;
  let gate = new Promise<void>((r) => (release = r));
  let arrived = 0;
  const callSizes: number[] = [];
  const server = http.createServer((req, res) => {
    arrived += 1;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && req.headers['content-type'] === 'application/json')
        callSizes.push((JSON.parse(body.toString('utf8')) as { requests: unknown[] }).requests.length);
      void gate.then(() => forwardRequest(target, req, body, res));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals: () => arrived,
    /** Requests per JSON act call, in arrival order. */
    callSizes,
    open: () => release(),
    close: () => {
      release();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
    reset: () => {
      gate = new Promise<void>((r) => (release = r));
    },
  };
}
