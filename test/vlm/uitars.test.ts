/**
 * The UI-TARS adapter against a local OpenAI-compatible test server: request shape (prompt, last 5
 * screenshots, logprobs), parsing into canonical actions, logprob/entropy summaries, malformed outputs
 * as failed actions, retries after HTTP 500 and after a timeout, and typed failure when nothing works.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { PolicyContext, PolicyObservation } from '../../activities/env/policy';
import { PolicyUnavailableError } from '../../activities/env/policy';
import {
  addBoxTokens,
  buildMessages,
  computerUsePrompt,
  createUiTarsPolicy,
  smartResizePng,
  UiTarsOptionsError,
  type UiTarsDecision,
  summarizeLogprobs,
  tokenEntropy,
  uiTarsPolicyFactory,
  versionFromModelName,
  type ChatContentPart,
  type ChatMessage,
  type UiTarsPolicyOptions,
} from '../../vlm';
import { PNG } from 'pngjs';
import { makePng } from '../rollout/helpers';
import { startFakeOpenAI, tokenize, type FakeServer } from './fake-openai';

const obs = (i: number): PolicyObservation => ({
  png: makePng(i),
  width: 160,
  height: 160,
  instruction: 'Click the red box',
  fields: [],
  step: i,
});
const images = (messages: ChatMessage[]): string[] =>
  messages.flatMap((m) =>
    Array.isArray(m.content)
      ? m.content
          .filter((p): p is Extract<ChatContentPart, { type: 'image_url' }> => p.type === 'image_url')
          .map((p) => p.image_url.url)
      : []
  );

describe('UI-TARS adapter against a fake OpenAI-compatible server', () => {
  let fake: FakeServer;
  let opts: UiTarsPolicyOptions;

  before(async () => {
    fake = await startFakeOpenAI();
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
    fake.script.length = 0;
    opts = {
      baseUrls: [fake.url],
      model: 'ui-tars-1.5-7b',
      topLogprobs: 3,
      timeoutMs: 2_000,
      maxRetries: 3,
      backoff: { baseMs: 1, capMs: 5 },
    };
  });

  it('sends the UI-TARS prompt with logprobs and parses the answer into a canonical action', async () => {
    // A 160×160 screen is smart-resized to 280×280 for UI-TARS-1.5, so (140,140) is the centre.
    const text = "Thought: The red box is in the middle. Click it.\nAction: click(start_box='(140,140)')";
    fake.script.push({ kind: 'completion', text, tokenLogprob: -0.2, model: 'ckpt/global_step_7' });
    const policy = createUiTarsPolicy(opts);
    const d = await policy.act(obs(1), { seed: 5, temperature: 0.7 });
    assert.deepEqual(d.action, { type: 'click', x: 0.5, y: 0.5 });
    assert.equal(d.parseError, undefined);
    assert.equal(d.actionText, text);
    const n = tokenize(text).length;
    assert.equal(d.tokenLogProbs?.length, n);
    assert.ok(Math.abs(d.logProb - -0.2 * n) < 1e-9, 'behaviour log-prob = sum of token logprobs');
    assert.ok(d.entropy > 0);
    assert.equal(d.policyVersion, 7, 'version from the served model name');
    assert.equal(d.policyServer, fake.url);

    const req = fake.requests[0]!;
    assert.equal(req.model, 'ui-tars-1.5-7b');
    assert.equal(req.logprobs, true);
    assert.equal(req.top_logprobs, 3);
    assert.equal(req.temperature, 0.7);
    assert.equal(req.seed, 5);
    const messages = req.messages as ChatMessage[];
    assert.equal(messages[0]?.role, 'system');
    const first = messages[1]!.content as ChatContentPart[];
    assert.equal(first[0]?.type, 'text');
    assert.match((first[0] as { text: string }).text, /## User Instruction\nClick the red box/);
    assert.match((first[0] as { text: string }).text, /Thought: \.\.\.\nAction: \.\.\./);
    assert.match(images(messages)[0] ?? '', /^data:image\/png;base64,iVBOR/);
    const sent = PNG.sync.read(Buffer.from((images(messages)[0] ?? '').split(',')[1] ?? '', 'base64'));
    assert.deepEqual([sent.width, sent.height], [280, 280], 'the screenshot is smart-resized before it is sent');
  });

  it('runs every action of a multi-action response: action is the first, actions lists all in order', async () => {
    const text =
      "Thought: Focus the box, then type.\nAction: click(start_box='(140,70)')\n\ntype(content='It's done\\n')";
    fake.script.push({ kind: 'completion', text });
    const d = (await createUiTarsPolicy(opts).act(obs(1), { seed: 1, temperature: 1 })) as UiTarsDecision;
    assert.deepEqual(d.action, { type: 'click', x: 0.5, y: 0.25 });
    assert.deepEqual(d.actions, [
      { type: 'click', x: 0.5, y: 0.25 },
      { type: 'type', text: "It's done\n" },
    ]);
    assert.equal(d.actionText, text);
  });

  it('a finished whose content is cut off still ends the episode', async () => {
    fake.script.push({ kind: 'completion', text: "Thought: All done.\nAction: finished(content='I've saved it" });
    const d = await createUiTarsPolicy(opts).act(obs(1), { seed: 1, temperature: 1 });
    assert.deepEqual(d.action, { type: 'finished', content: "I've saved it" });
  });

  it('the 0–1000 convention and custom smart-resize bounds change how points map back', async () => {
    fake.fallback = { kind: 'completion', text: "Thought: x\nAction: click(start_box='(250,750)')" };
    const rel = await createUiTarsPolicy({ ...opts, coordModel: 'ui-tars' }).act(obs(1), { seed: 1, temperature: 1 });
    assert.deepEqual(rel.action, { type: 'click', x: 0.25, y: 0.75 });
    // A tiny server (max 50,176 px): 640×400 → 280×168, so (250,750) is off the image; (140,84) is the centre.
    const small = { ...opts, resize: { minPixels: 3136, maxPixels: 50176 } };
    fake.fallback = { kind: 'completion', text: "Thought: x\nAction: click(start_box='(140,84)')" };
    const wide = { ...obs(1), png: makePng(1, 640, 400), width: 640, height: 400 };
    const d = await createUiTarsPolicy(small).act(wide, { seed: 1, temperature: 1 });
    assert.deepEqual(d.action, { type: 'click', x: 0.5, y: 0.5 });
    const last = fake.requests[fake.requests.length - 1]!.messages as ChatMessage[];
    const sent = PNG.sync.read(Buffer.from((images(last)[0] ?? '').split(',')[1] ?? '', 'base64'));
    assert.deepEqual([sent.width, sent.height], [280, 168]);
  });

  it('keeps the last 5 screenshots, re-sends its past answers with box tokens, and keeps the instruction', async () => {
    fake.fallback = { kind: 'completion', text: "Thought: try\nAction: click(start_box='(10,20)')" };
    const policy = createUiTarsPolicy(opts);
    for (let i = 0; i < 7; i++) await policy.act(obs(i), { seed: i, temperature: 1 });
    const last = fake.requests[6]!.messages as ChatMessage[];
    const imgs = images(last);
    assert.equal(imgs.length, 5);
    // Screenshots go out smart-resized (160×160 → 280×280), the way UI-TARS sees them.
    const sent = (i: number) => `data:image/png;base64,${smartResizePng(makePng(i)).png.toString('base64')}`;
    assert.equal(imgs[4], sent(6), 'the newest screenshot is last');
    assert.equal(imgs[0], sent(2), 'the two oldest were dropped');
    const assistants = last.filter((m) => m.role === 'assistant');
    assert.equal(assistants.length, 6);
    assert.ok(
      assistants.every((m) => m.content === "Thought: try\nAction: click(start_box='<|box_start|>(10,20)<|box_end|>')")
    );
    const intro = last[1]!.content as ChatContentPart[];
    assert.equal(intro.length, 1, 'the instruction message lost its (old) screenshot but stays');
    assert.equal(intro[0]?.type, 'text');
  });

  it('malformed outputs are failed actions (action null, parseError, raw text kept), never exceptions', async () => {
    const policy = createUiTarsPolicy(opts);
    const bad = [
      'I think I should click somewhere.',
      'Thought: hmm\nAction: fly(start_box=(1,2))',
      "Thought: far away\nAction: click(start_box='(9000,9000)')",
      "Thought: unterminated\nAction: type(content='abc)",
      '',
    ];
    for (const text of bad) fake.script.push({ kind: 'completion', text: text || ' ' });
    for (const text of bad) {
      const d = await policy.act(obs(1), { seed: 1, temperature: 1 });
      assert.equal(d.action, null, text);
      assert.ok(d.parseError && d.parseError.length > 0, text);
      assert.equal(d.actionText, text || ' ');
      assert.ok(Number.isFinite(d.logProb));
    }
  });

  it('retries after an HTTP 500 and succeeds', async () => {
    fake.script.push({ kind: 'status', status: 500 }, { kind: 'completion', text: 'Thought: x\nAction: wait()' });
    const d = await createUiTarsPolicy(opts).act(obs(1), { seed: 1, temperature: 1 });
    assert.deepEqual(d.action, { type: 'wait' });
    assert.equal(fake.requests.length, 2);
  });

  it('retries after a timeout and succeeds', async () => {
    fake.script.push({ kind: 'hang' }, { kind: 'completion', text: "Thought: x\nAction: hotkey(key='ctrl c')" });
    // 2 s, not less: the retried request must be answered within it on a loaded CI machine too.
    const d = await createUiTarsPolicy({ ...opts, timeoutMs: 2000 }).act(obs(1), { seed: 1, temperature: 1 });
    assert.deepEqual(d.action, { type: 'hotkey', keys: ['ctrl', 'c'] });
    assert.equal(fake.requests.length, 2);
  });

  it('retries answers that are not completions or have no logprobs, then raises PolicyUnavailableError', async () => {
    fake.script.push(
      { kind: 'raw', body: '{"choices": []}' },
      { kind: 'raw', body: 'not json' },
      { kind: 'completion', text: 'Thought: x\nAction: wait()', noLogprobs: true }
    );
    fake.script.push({ kind: 'completion', text: 'Thought: x\nAction: wait()', noLogprobs: true });
    await assert.rejects(createUiTarsPolicy(opts).act(obs(1), { seed: 1, temperature: 1 }), (err: unknown) => {
      assert.ok(err instanceof PolicyUnavailableError);
      assert.match(err.message, /all 4 attempts failed.*no token logprobs/);
      return true;
    });
    assert.equal(fake.requests.length, 4);
  });

  it('does not retry a 400 (the request is at fault)', async () => {
    fake.script.push({ kind: 'status', status: 400, body: '{"error":{"message":"context too long"}}' });
    await assert.rejects(
      createUiTarsPolicy(opts).act(obs(1), { seed: 1, temperature: 1 }),
      /HTTP 400.*context too long/
    );
    assert.equal(fake.requests.length, 1);
  });

  it('fails over to a second endpoint', async () => {
    const dead = 'http://127.0.0.1:9/v1';
    fake.script.push({ kind: 'completion', text: 'Thought: x\nAction: finished()' });
    const d = await createUiTarsPolicy({ ...opts, baseUrls: [dead, fake.url] }).act(obs(1), {
      seed: 1,
      temperature: 1,
    });
    assert.deepEqual(d.action, { type: 'finished' });
    assert.equal(d.policyServer, fake.url);
  });

  it('the factory reads model and limits from the episode input', async () => {
    const factory = uiTarsPolicyFactory({ backoff: { baseMs: 1, capMs: 5 } });
    const ctx = {
      endpoints: [fake.url],
      options: { model: 'served-name', topLogprobs: 5 },
      seed: 1,
      versionHint: 4,
    } as unknown as PolicyContext;
    fake.script.push({ kind: 'completion', text: 'Thought: x\nAction: wait()', model: 'ui-tars-1.5-7b' });
    const d = await (await factory(ctx)).act(obs(1), { seed: 1, temperature: 1 });
    assert.equal(fake.requests[0]?.model, 'served-name');
    assert.equal(fake.requests[0]?.top_logprobs, 5);
    assert.equal(d.policyVersion, 4, 'no version in the model name → the version hint');
  });

  it('the factory passes prompt, window and resize options through, and refuses bad ones by name', async () => {
    const factory = uiTarsPolicyFactory({ backoff: { baseMs: 1, capMs: 5 } });
    const ctx = (options: Record<string, unknown>) =>
      ({ endpoints: [fake.url], options: { model: 'm', ...options }, seed: 1 }) as unknown as PolicyContext;
    fake.fallback = { kind: 'completion', text: 'Thought: x\nAction: wait()' };
    const policy = await factory(ctx({ maxImages: 2, callUser: false, password: null, language: 'Chinese' }));
    for (let i = 0; i < 3; i++) await policy.act(obs(i), { seed: i, temperature: 1 });
    const last = fake.requests[fake.requests.length - 1]!.messages as ChatMessage[];
    assert.equal(images(last).length, 2);
    const prompt = ((last[1]!.content as ChatContentPart[])[0] as { text: string }).text;
    assert.doesNotMatch(prompt, /call_user\(\)/);
    assert.doesNotMatch(prompt, /password/);
    assert.match(prompt, /- Use Chinese in `Thought` part\./);

    const refused: [Record<string, unknown>, RegExp][] = [
      [{ coordModel: 'qwen' }, /^policy\.options\.coordModel: got "qwen"; .*"ui-tars-1\.5": absolute pixels/],
      [{ maxImages: 0 }, /^policy\.options\.maxImages: got 0; .*screenshots kept in the context/],
      [{ callUser: 'yes' }, /^policy\.options\.callUser: got "yes"/],
      [{ minPixels: 1000, maxPixels: 10 }, /^policy\.options\.minPixels: got 1000, above maxPixels 10/],
      [{ model: '' }, /^policy\.options\.model: got ""/],
    ];
    for (const [options, message] of refused) {
      assert.throws(
        () => factory(ctx(options)),
        (err: unknown) => err instanceof UiTarsOptionsError && message.test(err.message),
        JSON.stringify(options)
      );
    }
  });
});

describe('VLM helpers', () => {
  it('token entropy from top_logprobs: exact when the top k cover the mass, residual lumped otherwise', () => {
    const ln = Math.log;
    assert.ok(
      Math.abs(
        tokenEntropy({
          token: 'a',
          logprob: ln(0.5),
          top_logprobs: [
            { token: 'a', logprob: ln(0.5) },
            { token: 'b', logprob: ln(0.5) },
          ],
        }) - ln(2)
      ) < 1e-12
    );
    // p = 0.5, 0.25 known; r = 0.25 lumped: H = 0.5 ln2 + 0.25 ln4 + 0.25 ln4.
    const h = tokenEntropy({
      token: 'a',
      logprob: ln(0.5),
      top_logprobs: [
        { token: 'a', logprob: ln(0.5) },
        { token: 'b', logprob: ln(0.25) },
      ],
    });
    assert.ok(Math.abs(h - (0.5 * ln(2) + 0.5 * ln(4))) < 1e-12);
    // A certain token has zero entropy; duplicates do not count twice.
    assert.equal(
      tokenEntropy({
        token: 'a',
        logprob: 0,
        top_logprobs: [
          { token: 'a', logprob: 0 },
          { token: 'a', logprob: 0 },
        ],
      }),
      0
    );
    // Without alternatives the sampled token stands alone.
    assert.ok(Math.abs(tokenEntropy({ token: 'a', logprob: ln(0.5) }) - ln(2)) < 1e-12);
  });

  it('summarizeLogprobs: sum, per-token list, mean entropy; -inf clamped to stay finite', () => {
    const s = summarizeLogprobs([
      { token: 'a', logprob: -1 },
      { token: 'b', logprob: -Infinity },
    ]);
    assert.equal(s.tokenLogProbs.length, 2);
    assert.ok(Number.isFinite(s.logProb) && s.logProb <= -1e4);
    assert.equal(summarizeLogprobs([]).entropy, 0);
  });

  it('versions from model names', () => {
    assert.equal(versionFromModelName('ckpt/global_step_40'), 40);
    assert.equal(versionFromModelName('dart-gui-v12'), 12);
    assert.equal(versionFromModelName('/models/checkpoint-3/'), 3);
    assert.equal(versionFromModelName('ui-tars-1.5-7b', 9), 9);
    assert.equal(versionFromModelName('ui-tars-1.5', 9), 9);
  });

  it("the prompt is DART's UI-TARS computer-use template with call_user() and the password note", () => {
    const p = computerUsePrompt('Install vlc');
    assert.ok(p.startsWith('You are a GUI agent. You are given a task and your action history, with screenshots.'));
    for (const line of [
      "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
      "left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')",
      "right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')",
      "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')",
      "hotkey(key='')",
      'type(content=\'\') #If you want to submit your input, use "\\n" at the end of `content`.',
      "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')",
      'wait() #Sleep for 5s and take a screenshot to check for any changes.',
      "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part to ensure we can parse the content in normal python string format.",
      "call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.",
      '- Use English in `Thought` part.',
      "- My computer's password is 'password', feel free to use it when you need sudo rights.",
    ]) {
      assert.ok(p.split('\n').includes(line), `missing line: ${line}`);
    }
    assert.ok(p.endsWith('## User Instruction\nInstall vlc\n'));
    const plain = computerUsePrompt('x', { callUser: false, password: 'hunter2' });
    assert.doesNotMatch(plain, /call_user/);
    assert.match(plain, /password is 'hunter2'/);
  });

  it('addBoxTokens is idempotent; buildMessages caps assistant turns', () => {
    const t = "Action: drag(start_box='(1,2)', end_box='(3,4)')";
    const once = addBoxTokens(t);
    assert.equal(
      once,
      "Action: drag(start_box='<|box_start|>(1,2)<|box_end|>', end_box='<|box_start|>(3,4)<|box_end|>')"
    );
    assert.equal(addBoxTokens(once), once);
    const turns = Array.from({ length: 6 }, (_, i) => ({
      pngBase64: `p${i}`,
      ...(i < 5 ? { response: `r${i}` } : {}),
    }));
    const m = buildMessages('do it', turns, { maxImages: 2, maxTexts: 3 });
    assert.deepEqual(
      m.filter((x) => x.role === 'assistant').map((x) => x.content),
      ['r2', 'r3', 'r4']
    );
    assert.deepEqual(images(m), ['data:image/png;base64,p4', 'data:image/png;base64,p5']);
  });
});
