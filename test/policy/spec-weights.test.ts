import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkTensorSpec,
  decodeSafetensors,
  encodeSafetensors,
  f32Tensor,
  SafetensorsError,
} from '../../storage/safetensors';
import {
  convGeometry,
  clickQueryPolicySpec,
  defaultPolicySpec,
  legacyPolicySpec,
  maxContextPolicySpec,
  wordQueryPolicySpec,
  numActions,
  paramCount,
  paramShapes,
  paramTensorSpec,
  specKey,
  validateSpec,
  widenSpec,
  v2PolicySpec,
} from '../../policy/spec';
import { initWeights, REPEAT_NOOP_PRIOR, weightsFromSafetensors, weightsToSafetensors } from '../../policy/weights';

test('default spec: ≈26k parameters (v1: 24,001; v2 25,635; with the click query 26,147), 272 actions, 16×16 grid', () => {
  const n = paramCount(defaultPolicySpec);
  // v1 24,001 − 2,048 (text 256 → 128 slots) + 544 (prev.embed) + 3,104 (click context) + 34 (prev.bias)
  // = v2 25,635; + 512 (v3: query.weight, 32 channels × 16 embedding) = 26,147, the default.
  assert.equal(n, 26_147);
  assert.equal(paramCount(v2PolicySpec), 25_635);
  assert.equal(paramCount(clickQueryPolicySpec), 26_147);
  assert.equal(paramCount(legacyPolicySpec), 24_001);
  assert.equal(numActions(defaultPolicySpec), 272);
  assert.deepEqual(
    convGeometry(defaultPolicySpec).map((g) => g.outSize),
    [32, 16, 16]
  );
  assert.deepEqual(
    paramShapes(clickQueryPolicySpec).map((p) => `${p.name}:${p.shape.join('x')}`),
    [
      'conv0.weight:16x3x4x4',
      'conv0.bias:16',
      'conv1.weight:32x16x4x4',
      'conv1.bias:32',
      'conv2.weight:32x32x3x3',
      'conv2.bias:32',
      'text.weight:16x128',
      'prev.embed:16x34',
      'film.weight:64x16',
      'film.bias:64',
      'ctx.row:32x32x1x1',
      'ctx.col:32x32x1x1',
      'ctx.global:32x32',
      'ctx.bias:32',
      'click.weight:1x32x1x1',
      'click.bias:1',
      'query.weight:32x16',
      'token.weight:16x32',
      'token.bias:16',
      'prev.bias:2x17',
    ]
  );
});

test('width is one setting: widenSpec(2) is a valid, bigger model', () => {
  const wide = validateSpec(widenSpec(defaultPolicySpec, 2));
  assert.deepEqual(
    wide.convs.map((c) => c.outChannels),
    [32, 64, 64]
  );
  assert.ok(paramCount(wide) > 2.5 * paramCount(defaultPolicySpec));
});

test('specs whose trunk does not end at the grid size are refused', () => {
  assert.throws(() => validateSpec({ ...defaultPolicySpec, gridSize: 8 }), /ends at 16×16/);
  assert.throws(() => validateSpec({ ...defaultPolicySpec, convs: [] }));
  assert.throws(() => validateSpec({ ...defaultPolicySpec, version: 1 }));
  assert.throws(() => validateSpec({ ...defaultPolicySpec, textEncoding: 'words-v9' }));
});

test('initWeights is deterministic per seed, He-scaled, with zero biases', () => {
  const a = initWeights(defaultPolicySpec, 42);
  const b = initWeights(defaultPolicySpec, 42);
  const c = initWeights(defaultPolicySpec, 43);
  assert.deepEqual(a, b);
  assert.notDeepEqual(a['conv0.weight'], c['conv0.weight']);
  assert.ok(a['conv1.bias']!.every((v) => v === 0));
  // prev.bias: 0 for a previous action that changed the screen, the repeat prior for one that did not.
  assert.deepEqual([...a['prev.bias']!], [...new Array(17).fill(0), ...new Array(17).fill(REPEAT_NOOP_PRIOR)]);
  const w = a['conv1.weight']!;
  const std = Math.sqrt(w.reduce((s, v) => s + v * v, 0) / w.length);
  assert.ok(Math.abs(std - Math.sqrt(2 / (16 * 16))) < 0.01, `conv1 std ${std}`);
});

test('weights round-trip through safetensors bit-exactly, with the spec in the metadata', () => {
  const w = initWeights(defaultPolicySpec, 7);
  const buf = weightsToSafetensors(defaultPolicySpec, w, { version: '3' });
  const back = weightsFromSafetensors(defaultPolicySpec, buf, 'ckpt/3');
  assert.deepEqual(back.weights, w);
  assert.equal(back.metadata.version, '3');
  assert.match(back.sha256, /^[0-9a-f]{64}$/);
});

test('corrupt or mismatched checkpoints are refused with a clear error', () => {
  const spec = defaultPolicySpec;
  const buf = weightsToSafetensors(spec, initWeights(spec, 7));
  // Truncated data section.
  assert.throws(
    () => weightsFromSafetensors(spec, buf.subarray(0, buf.length - 10), 'k'),
    (e: Error) => e instanceof SafetensorsError && /truncated/.test(e.message)
  );
  // Garbage header length.
  const bad = Buffer.from(buf);
  bad.writeBigUInt64LE(123456789n, 0);
  assert.throws(() => weightsFromSafetensors(spec, bad), /corrupt or truncated/);
  // Right format, other architecture (the spec metadata does not match).
  const wide = widenSpec(spec, 2);
  assert.throws(
    () => weightsFromSafetensors(spec, weightsToSafetensors(wide, initWeights(wide, 1))),
    /written for spec/
  );
  // No spec metadata, wrong shape: checkTensorSpec catches it.
  const tensors = decodeSafetensors(buf).tensors;
  tensors['token.bias'] = f32Tensor([17], new Float32Array(17));
  assert.throws(() => weightsFromSafetensors(spec, encodeSafetensors(tensors)), /token.bias has shape \[17\]/);
  // Missing tensor.
  delete tensors['token.bias'];
  assert.throws(() => weightsFromSafetensors(spec, encodeSafetensors(tensors)), /missing/);
  // NaN weights are never served or trained on.
  const nan = initWeights(spec, 1);
  nan['film.bias']![3] = NaN;
  const t2 = Object.fromEntries(paramShapes(spec).map((p) => [p.name, f32Tensor(p.shape, nan[p.name]!)]));
  assert.throws(() => weightsFromSafetensors(spec, encodeSafetensors(t2)), /non-finite/);
  assert.throws(() => weightsToSafetensors(spec, nan), /non-finite/);
  // The exported tensor spec is what checkTensorSpec validates against.
  assert.doesNotThrow(() => checkTensorSpec(decodeSafetensors(buf).tensors, paramTensorSpec(spec)));
  assert.throws(() => checkTensorSpec(decodeSafetensors(buf).tensors, paramTensorSpec(wide)), /mismatch/);
});

test('a checkpoint of policy spec v1 is refused with a message naming the version change', () => {
  // Exactly what v1 wrote: its specKey JSON (no textEncoding/clickContext/previousAction) and its tensors.
  const v1Key = JSON.stringify({
    version: 1,
    imageSize: 64,
    vocabSize: 256,
    textEmbed: 16,
    convs: defaultPolicySpec.convs,
    gridSize: 16,
  });
  const w = initWeights(legacyPolicySpec, 3);
  const tensors = Object.fromEntries(
    paramShapes(legacyPolicySpec).map((p) => [p.name, f32Tensor(p.shape, w[p.name]!)])
  );
  const buf = encodeSafetensors(tensors, { format: 'dartflow-policy-weights/1', spec: v1Key });
  assert.throws(
    () => weightsFromSafetensors(defaultPolicySpec, buf, 'checkpoints/v7'),
    (e: Error) =>
      e instanceof SafetensorsError &&
      /policy spec v1 checkpoint: spec v2 changed the text encoding/.test(e.message) &&
      /spec v3 added the instruction query/.test(e.message) &&
      /checkpoints\/v7/.test(e.message)
  );
  // Without the spec metadata the tensors themselves do not fit (text.weight 16×256, no ctx.* / prev.*).
  assert.throws(() => weightsFromSafetensors(defaultPolicySpec, encodeSafetensors(tensors)), /text.weight/);
});

test('a checkpoint of policy spec v2 is refused with a message naming the click-head query', () => {
  // What v2 wrote: its specKey JSON (no clickQuery) and its 19 tensors (no query.weight).
  const v2Net = { ...defaultPolicySpec, clickQuery: false };
  const { clickQuery: _omit, ...v2Fields } = JSON.parse(specKey(v2Net)) as Record<string, unknown>;
  const v2Key = JSON.stringify({ ...v2Fields, version: 2 });
  const w = initWeights(v2Net, 3);
  const tensors = Object.fromEntries(paramShapes(v2Net).map((p) => [p.name, f32Tensor(p.shape, w[p.name]!)]));
  const buf = encodeSafetensors(tensors, { format: 'dartflow-policy-weights/1', spec: v2Key });
  // Refused by the default spec too (its version is 3, whether or not the query is on).
  assert.throws(() => weightsFromSafetensors(defaultPolicySpec, buf, 'checkpoints/v3'), /policy spec v2 checkpoint/);
  assert.throws(
    () => weightsFromSafetensors(clickQueryPolicySpec, buf, 'checkpoints/v3'),
    (e: Error) =>
      e instanceof SafetensorsError &&
      /policy spec v2 checkpoint: spec v3 added the instruction query of the click head/.test(e.message) &&
      !/spec v2 changed/.test(e.message)
  );
  assert.throws(() => weightsFromSafetensors(clickQueryPolicySpec, encodeSafetensors(tensors)), /query.weight/);
});

const C = 32;
const zeroInitOptions = [
  {
    option: 'clickMaxContext',
    what: 'the global max context',
    spec: maxContextPolicySpec,
    tensor: 'ctx.max',
    size: C * C,
    seed: 5,
  },
  {
    option: 'clickWordQuery',
    what: 'per-word click queries',
    spec: wordQueryPolicySpec,
    tensor: 'wquery.weight',
    size: defaultPolicySpec.vocabSize * C,
    seed: 6,
  },
] as const;

for (const { option, what, spec, tensor, size, seed } of zeroInitOptions) {
  test(`${what} (${option}) adds one ${tensor} tensor, starts at 0 and keeps older specs' keys`, () => {
    assert.equal(paramCount(spec), paramCount(defaultPolicySpec) + size);
    // Specs without the field keep their canonical key (checkpoints compare it), the new one differs.
    assert.ok(!specKey(defaultPolicySpec).includes(option));
    assert.equal(specKey({ ...defaultPolicySpec, [option]: false }), specKey(defaultPolicySpec));
    assert.notEqual(specKey(spec), specKey(defaultPolicySpec));
    // Zero-initialised without random draws: every other tensor is the default's for the same seed.
    const on = initWeights(spec, seed);
    const off = initWeights(defaultPolicySpec, seed);
    assert.ok(on[tensor]!.every((v) => v === 0));
    for (const name of Object.keys(off)) assert.deepEqual(on[name], off[name], name);
    // A checkpoint of one cannot load into the other.
    assert.throws(() => weightsFromSafetensors(spec, weightsToSafetensors(defaultPolicySpec, off)), /written for spec/);
  });
}

test('the global max context adds to the click context, so a spec without one is refused', () => {
  assert.throws(
    () => validateSpec({ ...legacyPolicySpec, clickMaxContext: true }),
    /clickMaxContext adds to the click context, so it needs clickContext: true/
  );
});
