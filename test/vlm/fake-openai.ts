/**
 * A small OpenAI-compatible chat-completions server for the VLM tests (node:http, 127.0.0.1, random
 * port). It answers from a script: canned completions with per-token logprobs, malformed ones, HTTP
 * errors, or a request it never answers (a timeout). Every request body is recorded.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Scripted =
  | { kind: 'completion'; text: string; model?: string; tokenLogprob?: number; topK?: number; noLogprobs?: boolean }
  | { kind: 'status'; status: number; body?: string }
  | { kind: 'raw'; body: string }
  | { kind: 'hang' };

export interface FakeServer {
  url: string;
  requests: Array<Record<string, unknown>>;
  /** Answers for the next requests, in order; when empty, `fallback` answers. */
  script: Scripted[];
  fallback: Scripted;
  close(): Promise<void>;
}

/** Splits text into ~4-character tokens (enough to exercise sums and means). */
export function tokenize(text: string): string[] {
  return text.match(/[\s\S]{1,4}/g) ?? [];
}

export function completionBody(s: Extract<Scripted, { kind: 'completion' }>): unknown {
  const lp = s.tokenLogprob ?? -0.1;
  const k = s.topK ?? 3;
  const content = tokenize(s.text).map((token) => ({
    token,
    logprob: lp,
    bytes: [...Buffer.from(token)],
    // The sampled token first, then alternatives sharing the rest of the mass.
    top_logprobs: [
      { token, logprob: lp },
      ...Array.from({ length: k - 1 }, (_, i) => ({ token: `alt${i}`, logprob: Math.log((1 - Math.exp(lp)) / k) })),
    ],
  }));
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 0,
    model: s.model ?? 'ui-tars-ckpt-v3',
    choices: [
      {
        index: 0,
        finish_reason: 'stop',
        message: { role: 'assistant', content: s.text },
        logprobs: s.noLogprobs ? null : { content },
      },
    ],
  };
}

export async function startFakeOpenAI(): Promise<FakeServer> {
  const hung: http.ServerResponse[] = [];
  const fake: FakeServer = {
    url: '',
    requests: [],
    script: [],
    fallback: { kind: 'completion', text: 'Thought: ok\nAction: wait()' },
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/v1/chat/completions' || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      fake.requests.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      const s = fake.script.shift() ?? fake.fallback;
      if (s.kind === 'hang') {
        hung.push(res);
        return;
      }
      if (s.kind === 'status') {
        res
          .writeHead(s.status, { 'content-type': 'application/json' })
          .end(s.body ?? JSON.stringify({ error: { message: 'scripted failure' } }));
        return;
      }
      const body = s.kind === 'raw' ? s.body : JSON.stringify(completionBody(s));
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () =>
    new Promise<void>((r) => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
