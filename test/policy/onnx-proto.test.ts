import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-node';
import { attr, GraphBuilder } from '../../policy/onnx/builder';
import { encodeNode, encodeTensor } from '../../policy/onnx/proto';

test('wire format: tags, strings, packed negative int64 attributes', () => {
  const bytes = encodeNode({ opType: 'Relu', inputs: ['x'], outputs: ['y'] });
  // field 1 "x", field 2 "y", field 4 "Relu"
  assert.deepEqual(Array.from(bytes), [0x0a, 1, 0x78, 0x12, 1, 0x79, 0x22, 4, 0x52, 0x65, 0x6c, 0x75]);
  const withAttr = encodeNode({ opType: 'T', inputs: [], outputs: [], attributes: { a: attr.ints([-1]) } });
  // -1 as a varint is ten bytes: nine 0xff and 0x01.
  assert.ok(Buffer.from(withAttr).includes(Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])));
  assert.throws(() => encodeTensor({ name: 't', dims: [2, 2], data: new Float32Array(3) }), /need 4 values/);
});

test('a hand-built model with float/int/negative attributes and int64/float initializers runs in ORT', async () => {
  const b = new GraphBuilder('proto_test');
  const x = b.input('x', 'float32', ['N', 4]);
  const leaky = b.op('LeakyRelu', [x], { alpha: attr.float(0.25) });
  const sliced = b.slice(leaky, -1, 0, -1); // drop the last column
  const scaled = b.mul(sliced, b.scalar(2));
  const summed = b.reduceSum(scaled, [-1], false);
  b.output(summed, 'y', 'float32', ['N']);
  const session = await ort.InferenceSession.create(b.encode());
  const out = await session.run({
    x: new ort.Tensor('float32', Float32Array.from([1, -4, 2, 100, -1, -1, -1, 7]), [2, 4]),
  });
  assert.deepEqual(Array.from(out.y!.data as Float32Array), [2 * (1 - 1 + 2), 2 * (-0.25 * 3)]);
  await session.release();
});
