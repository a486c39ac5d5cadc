/**
 * The tfevents writer (lib/tensorboard.ts): CRC32C against the RFC 3720 test vectors, the TFRecord framing
 * byte by byte, a file written by TensorBoardWriter read back record by record (both CRCs checked, every
 * value decoded), damaged and half-written files, and the run layout of the trainer / orchestrator
 * scalars (metrics/tensorboard.ts). When the project's Python venv has protobuf, the same file is also
 * decoded by Google's protobuf runtime against TensorFlow's Event schema, CRCs recomputed in Python.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import {
  crc32c,
  decodeEvent,
  encodeEvent,
  maskedCrc32c,
  readEventFile,
  readTfRecords,
  TensorBoardWriter,
  TfRecordError,
  tfRecord,
} from '../../lib/tensorboard';
import { evalScalars, TensorBoardScalars, tensorboardFromEnv, trainStepScalars } from '../../metrics/tensorboard';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-tb-'));

test('CRC32C matches the RFC 3720 test vectors, and the mask is the rotate-and-add of TFRecord', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(Buffer.alloc(32, 0)), 0x8a9136aa);
  assert.equal(crc32c(Buffer.alloc(32, 0xff)), 0x62a8ab43);
  assert.equal(crc32c(Buffer.from(Array.from({ length: 32 }, (_, i) => i))), 0x46dd794e);
  assert.equal(crc32c(Buffer.from(Array.from({ length: 32 }, (_, i) => 31 - i))), 0x113fdb5c);
  assert.equal(crc32c(Buffer.alloc(0)), 0);
  // ((0xe3069283 >>> 15) | (0xe3069283 << 17)) mod 2^32 = 0x2507c60d; + 0xa282ead8 mod 2^32 = 0xc78ab0e5.
  assert.equal(maskedCrc32c(Buffer.from('123456789')), 0xc78ab0e5);
});

test('a TFRecord is length, masked CRC of the length, data, masked CRC of the data', () => {
  const data = Buffer.from('hello tfevents');
  const rec = tfRecord(data);
  assert.equal(rec.length, 8 + 4 + data.length + 4);
  assert.equal(rec.readBigUInt64LE(0), BigInt(data.length));
  assert.equal(rec.readUInt32LE(8), maskedCrc32c(rec.subarray(0, 8)));
  assert.deepEqual(rec.subarray(12, 12 + data.length), data);
  assert.equal(rec.readUInt32LE(12 + data.length), maskedCrc32c(data));
  assert.deepEqual(readTfRecords(Buffer.concat([rec, tfRecord(Buffer.alloc(0))])), [data, Buffer.alloc(0)]);
});

test('an Event encodes as TensorFlow protobuf: wall_time double, step varint, file_version, summary simple_value', () => {
  // Hand-assembled from event.proto / summary.proto field numbers and wire types.
  const e = encodeEvent({ wallTime: 1.5, step: 300, scalars: { a: 2 } });
  const expected = Buffer.concat([
    Buffer.from([0x09]), // field 1, wire type 1 (64-bit): wall_time
    Buffer.from(new Float64Array([1.5]).buffer),
    Buffer.from([0x10, 0xac, 0x02]), // field 2, varint: step 300
    Buffer.from([0x2a, 0x0a]), // field 5, length-delimited (10 bytes): summary
    Buffer.from([0x0a, 0x08]), // Summary.value (field 1), 8 bytes
    Buffer.from([0x0a, 0x01, 0x61]), // Value.tag (field 1) "a"
    Buffer.from([0x15]), // Value.simple_value (field 2, wire type 5: 32-bit float)
    Buffer.from(new Float32Array([2]).buffer),
  ]);
  assert.deepEqual(e, expected);
  assert.deepEqual(decodeEvent(e), { wallTime: 1.5, step: 300, scalars: { a: 2 } });
  const v = encodeEvent({ wallTime: 2, fileVersion: 'brain.Event:2' });
  assert.deepEqual(decodeEvent(v), { wallTime: 2, step: 0, fileVersion: 'brain.Event:2', scalars: {} });
  // A negative step is int64 two's complement (10 varint bytes) and decodes back.
  assert.equal(decodeEvent(encodeEvent({ wallTime: 0, step: -3 })).step, -3);
});

test('a file written by TensorBoardWriter reads back record by record with both CRCs and every value', () => {
  const dir = path.join(tmp(), 'run');
  let now = 1_764_000_000_000;
  const w = new TensorBoardWriter(dir, { now: () => now });
  assert.match(path.basename(w.file), /^events\.out\.tfevents\.1764000000\..+\.\d+\.\d+$/);
  w.scalars(1, { 'train/loss': -0.125, 'train/kl': 0.00213, 'tis/weight_min': 0.6 });
  now += 2500;
  w.scalars(2, { 'train/loss': 0.5, 'train/entropy': Number.NaN, 'train/clip_fraction': 0.07 });
  w.scalars(3, { 'train/entropy': Number.POSITIVE_INFINITY }); // nothing finite: no event
  w.close();
  assert.throws(() => w.scalars(4, { x: 1 }), /closed/);

  const bytes = fs.readFileSync(w.file);
  // Walk the records by hand: each one's framing and CRCs.
  let at = 0;
  let records = 0;
  while (at < bytes.length) {
    const len = Number(bytes.readBigUInt64LE(at));
    assert.equal(
      bytes.readUInt32LE(at + 8),
      maskedCrc32c(bytes.subarray(at, at + 8)),
      `length CRC of record ${records}`
    );
    const data = bytes.subarray(at + 12, at + 12 + len);
    assert.equal(bytes.readUInt32LE(at + 12 + len), maskedCrc32c(data), `data CRC of record ${records}`);
    at += 16 + len;
    records++;
  }
  assert.equal(at, bytes.length, 'the file ends at a record boundary');
  assert.equal(records, 3, 'file_version + two scalar events');

  const events = readEventFile(w.file);
  assert.deepEqual(events[0], { wallTime: 1_764_000_000, step: 0, fileVersion: 'brain.Event:2', scalars: {} });
  assert.deepEqual(events[1], {
    wallTime: 1_764_000_000,
    step: 1,
    scalars: { 'train/loss': -0.125, 'train/kl': Math.fround(0.00213), 'tis/weight_min': Math.fround(0.6) },
  });
  assert.deepEqual(events[2], {
    wallTime: 1_764_000_002.5,
    step: 2,
    scalars: { 'train/loss': 0.5, 'train/clip_fraction': Math.fround(0.07) },
  });
});

test('a damaged record is an error naming its offset; a half-written last record is left out', () => {
  const dir = tmp();
  const w = new TensorBoardWriter(dir, { now: () => 1000 });
  w.scalars(1, { a: 1 });
  w.scalars(2, { a: 2 });
  w.close();
  const good = fs.readFileSync(w.file);
  const firstLen = 16 + Number(good.readBigUInt64LE(0));

  const flipped = Buffer.from(good);
  flipped[firstLen + 14] = flipped[firstLen + 14]! ^ 0x01; // a data byte of the second record
  assert.throws(
    () => readTfRecords(flipped),
    (err: unknown) => err instanceof TfRecordError && err.offset === firstLen && /data CRC/.test(err.message)
  );
  const badLength = Buffer.from(good);
  badLength[firstLen] = badLength[firstLen]! ^ 0x40;
  assert.throws(() => readTfRecords(badLength), /length CRC mismatch/);

  const partial = good.subarray(0, good.length - 3);
  const events = readTfRecords(partial).map(decodeEvent);
  assert.deepEqual(
    events.map((e) => e.scalars),
    [{}, { a: 1 }],
    'the torn last event is not read'
  );
});

test('train-step and evaluation scalars go to <dir>/<campaign>/train and /eval, one file per campaign', () => {
  const root = tmp();
  assert.equal(tensorboardFromEnv('train', {}), undefined, 'off unless DARTFLOW_TENSORBOARD_DIR is set');
  const train = tensorboardFromEnv('train', { DARTFLOW_TENSORBOARD_DIR: root })!;
  assert.equal(train.root, root);
  const scalars = trainStepScalars(
    {
      metrics: {
        loss: -0.02,
        kl: 0.001,
        entropyMean: 1.7,
        clipFraction: 0.1,
        isWeightMean: 0.97,
        isWeightMin: 0.5,
        isWeightTruncatedFraction: 0.25,
        selectedFraction: 0.8,
        optimizerSteps: 3, // not a TensorBoard scalar
      },
    },
    [{ trajectories: [{ reward: 1 }, { reward: 0 }, { reward: 0 }] }, { trajectories: [{ reward: 1 }] }] as never
  );
  assert.deepEqual(scalars, {
    'train/loss': -0.02,
    'train/kl': 0.001,
    'train/entropy': 1.7,
    'train/clip_fraction': 0.1,
    'train/selected_fraction': 0.8,
    'tis/weight_mean': 0.97,
    'tis/weight_min': 0.5,
    'tis/truncated_fraction': 0.25,
    'train/batch_success': 0.5,
    'train/batch_reward_mean': 0.5,
  });
  train.write('exp-1', 7, scalars);
  train.write('exp-1', 8, { 'train/loss': 0.25 });
  train.write('exp/../2', 1, { 'train/loss': 1 });
  train.close();
  const file = fs.readdirSync(path.join(root, 'exp-1', 'train'));
  assert.equal(file.length, 1);
  const events = readEventFile(path.join(root, 'exp-1', 'train', file[0]!));
  assert.deepEqual(
    events.slice(1).map((e) => [e.step, e.scalars['train/loss']]),
    [
      [7, Math.fround(-0.02)],
      [8, 0.25],
    ]
  );
  assert.equal(events[1]!.scalars['train/batch_success'], 0.5);
  assert.ok(fs.existsSync(path.join(root, 'exp_.._2', 'train')), 'a campaign id is one directory, never a path');

  const ev = new TensorBoardScalars(root, 'eval');
  ev.write(
    'exp-1',
    8,
    evalScalars({
      version: 8,
      successRate: 0.75,
      episodes: 64,
      atEpisodes: 900,
      atMs: 60_000,
      perFamily: { 'click-target': 1, 'click-colour': 0.5 },
      sampledSuccessRate: 0.5,
    })
  );
  ev.close();
  const evalFile = fs.readdirSync(path.join(root, 'exp-1', 'eval'))[0]!;
  assert.deepEqual(readEventFile(path.join(root, 'exp-1', 'eval', evalFile))[1], {
    wallTime: readEventFile(path.join(root, 'exp-1', 'eval', evalFile))[1]!.wallTime,
    step: 8,
    scalars: {
      'eval/success': 0.75,
      'eval/episodes': 64,
      'eval/sampled_success': 0.5,
      'eval/success/click-target': 1,
      'eval/success/click-colour': 0.5,
    },
  });
});

test('a write that fails is logged once and does not throw', () => {
  const root = tmp();
  fs.writeFileSync(path.join(root, 'blocked'), 'a file where a directory should be');
  const lines: string[] = [];
  const s = new TensorBoardScalars(path.join(root, 'blocked'), 'train', (l) => lines.push(l));
  s.write('c', 1, { a: 1 });
  s.write('c', 2, { a: 2 });
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /cannot write scalars/);
});

const VENV_PYTHON = path.join(PROJECT_ROOT, '.tools/vlm-venv/bin/python');

/** TensorFlow's Event / Summary messages, built as a descriptor at run time, decoded by protobuf. */
const PY_READER = String.raw`
import json, struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="event_min.proto", package="tensorflow", syntax="proto3")
value = fd.message_type.add(name="SummaryValue")
value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
summary = fd.message_type.add(name="Summary")
summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.SummaryValue", label=F.LABEL_REPEATED)
event = fd.message_type.add(name="Event")
event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tensorflow.Summary", label=F.LABEL_OPTIONAL)
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
Event = message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Event"))

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

buf = open(sys.argv[1], "rb").read()
out, at = [], 0
while at < len(buf):
    (n,) = struct.unpack_from("<Q", buf, at)
    assert struct.unpack_from("<I", buf, at + 8)[0] == masked(buf[at:at + 8]), "length crc"
    data = buf[at + 12:at + 12 + n]
    assert struct.unpack_from("<I", buf, at + 12 + n)[0] == masked(data), "data crc"
    e = Event()
    e.ParseFromString(data)
    out.append({"wall_time": e.wall_time, "step": e.step, "file_version": e.file_version,
                "scalars": {v.tag: v.simple_value for v in e.summary.value}})
    at += 16 + n
print(json.dumps(out))
`;

test("Google's protobuf runtime decodes the file as TensorFlow Events (the project's Python venv)", (t) => {
  const probe = fs.existsSync(VENV_PYTHON)
    ? spawnSync(VENV_PYTHON, ['-c', 'import google.protobuf'], { encoding: 'utf8' })
    : undefined;
  if (!probe || probe.status !== 0) {
    t.skip('.tools/vlm-venv has no Python with protobuf (bash infra/install-vlm.sh installs it)');
    return;
  }
  const dir = tmp();
  const w = new TensorBoardWriter(dir, { now: () => 1_700_000_000_250 });
  w.scalars(41, { 'train/loss': -1.5, 'tis/weight_mean': 0.25 });
  w.scalars(42, { 'eval/success': 0.75 });
  w.close();
  const r = spawnSync(VENV_PYTHON, ['-c', PY_READER, w.file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [
    { wall_time: 1_700_000_000.25, step: 0, file_version: 'brain.Event:2', scalars: {} },
    {
      wall_time: 1_700_000_000.25,
      step: 41,
      file_version: '',
      scalars: { 'train/loss': -1.5, 'tis/weight_mean': 0.25 },
    },
    { wall_time: 1_700_000_000.25, step: 42, file_version: '', scalars: { 'eval/success': 0.75 } },
  ]);
});
