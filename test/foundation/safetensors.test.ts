import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  asFloat32,
  checkTensorSpec,
  decodeSafetensors,
  encodeSafetensors,
  f32Tensor,
  SafetensorsError,
} from '../../storage/safetensors';

const sample = () => ({
  'conv1.weight': f32Tensor([2, 3], new Float32Array([1, 2, 3, 4, 5, 6])),
  'conv1.bias': f32Tensor([2], new Float32Array([-1, 0.5])),
});

test('safetensors round-trips tensors and metadata, with an 8-byte aligned data section', () => {
  const buf = encodeSafetensors(sample(), { format: 'pt', version: '3' });
  const headerLen = Number(buf.readBigUInt64LE(0));
  assert.equal((8 + headerLen) % 8, 0);
  const { tensors, metadata, sha256 } = decodeSafetensors(buf);
  assert.deepEqual(Array.from(asFloat32(tensors['conv1.weight']!)), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(asFloat32(tensors['conv1.bias']!)), [-1, 0.5]);
  assert.deepEqual(metadata, { format: 'pt', version: '3' });
  assert.match(sha256, /^[0-9a-f]{64}$/);
});

test('truncated and corrupt safetensors are refused, naming where', () => {
  const buf = encodeSafetensors(sample());
  assert.throws(
    () => decodeSafetensors(buf.subarray(0, buf.length - 4), 'ckpt/v1.safetensors'),
    (err: unknown) => {
      assert.ok(err instanceof SafetensorsError);
      assert.match(err.message, /^ckpt\/v1\.safetensors: .*(truncated|trailing|gap)/);
      return true;
    }
  );
  assert.throws(() => decodeSafetensors(buf.subarray(0, 5), 'k'), /truncated/);
  const badHeader = Buffer.from(buf);
  badHeader.write('#', 9); // break the JSON
  assert.throws(() => decodeSafetensors(badHeader, 'k'), /corrupt header JSON/);
  const hugeLen = Buffer.from(buf);
  hugeLen.writeBigUInt64LE(BigInt(buf.length * 10), 0);
  assert.throws(() => decodeSafetensors(hugeLen, 'k'), /does not fit/);
});

test('dtype and shape are checked against the expected spec', () => {
  const { tensors } = decodeSafetensors(encodeSafetensors(sample()));
  checkTensorSpec(tensors, {
    'conv1.weight': { dtype: 'F32', shape: [2, 3] },
    'conv1.bias': { dtype: 'F32', shape: [2] },
  });
  assert.throws(
    () =>
      checkTensorSpec(
        tensors,
        { 'conv1.weight': { dtype: 'F32', shape: [3, 2] }, 'conv1.bias': { dtype: 'F32', shape: [2] } },
        'k'
      ),
    /k: mismatch: tensor conv1.weight has shape \[2,3\], expected \[3,2\]/
  );
  assert.throws(
    () => checkTensorSpec(tensors, { 'conv1.weight': { dtype: 'F32', shape: [2, 3] } }),
    /unexpected tensor conv1.bias/
  );
  assert.throws(
    () =>
      checkTensorSpec(tensors, {
        ...{ 'conv1.weight': { dtype: 'I32', shape: [2, 3] } },
        'conv1.bias': { dtype: 'F32', shape: [2] },
      }),
    /dtype F32, expected I32/
  );
  assert.throws(() => f32Tensor([4], new Float32Array(3)), /needs 4 values/);
});
