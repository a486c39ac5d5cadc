/**
 * A dependency-free encoder for the ONNX protobuf messages dartflow needs (ModelProto, GraphProto,
 * NodeProto, TensorProto, ValueInfoProto, AttributeProto). Encode-only: dartflow generates its graphs and
 * never parses foreign ones. Field numbers follow onnx/onnx.proto (IR version 8 era).
 *
 * Why hand-rolled: the protobuf wire format needs ~40 lines (varints, length-delimited fields, fixed32)
 * and the alternatives are an abandoned protobufjs-6 generated package or vendoring onnx.proto.
 */

export const IR_VERSION = 8;
export const OPSET_VERSION = 17;

/** ONNX TensorProto.DataType values used here. */
export const DataType = { FLOAT: 1, INT32: 6, INT64: 7, DOUBLE: 11 } as const;
export type ElemType = 'float32' | 'int64';
const ELEM_CODE: Record<ElemType, number> = { float32: DataType.FLOAT, int64: DataType.INT64 };

/** AttributeProto.AttributeType values. */
const AttrType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7 } as const;

export interface TensorDef {
  name: string;
  dims: number[];
  data: Float32Array | BigInt64Array;
}

export type AttrValue =
  | { kind: 'int'; value: number }
  | { kind: 'ints'; value: number[] }
  | { kind: 'float'; value: number }
  | { kind: 'floats'; value: number[] }
  | { kind: 'string'; value: string }
  | { kind: 'tensor'; value: TensorDef };

export interface NodeDef {
  opType: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  attributes?: Record<string, AttrValue>;
}

/** A dimension is a fixed size or a symbolic name (e.g. 'B' for the batch). */
export interface ValueInfoDef {
  name: string;
  elemType: ElemType;
  shape: Array<number | string>;
}

export interface GraphDef {
  name: string;
  nodes: NodeDef[];
  inputs: ValueInfoDef[];
  outputs: ValueInfoDef[];
  initializers: TensorDef[];
  docString?: string;
}

export interface ModelOptions {
  producerName?: string;
  producerVersion?: string;
  docString?: string;
  opset?: number;
}

/** Accumulates one message's fields; nested messages are encoded first and written as bytes. */
class Writer {
  private readonly chunks: Uint8Array[] = [];
  private size = 0;

  private push(bytes: Uint8Array): void {
    this.chunks.push(bytes);
    this.size += bytes.length;
  }

  /** Base-128 varint of a uint64; negative int64 values become their 10-byte two's complement. */
  private rawVarint(v: number | bigint): void {
    let x = BigInt.asUintN(64, BigInt(v));
    const out: number[] = [];
    while (x >= 0x80n) {
      out.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    out.push(Number(x));
    this.push(Uint8Array.from(out));
  }

  private tag(field: number, wireType: 0 | 2 | 5): void {
    this.rawVarint((field << 3) | wireType);
  }

  varint(field: number, v: number | bigint): this {
    this.tag(field, 0);
    this.rawVarint(v);
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.tag(field, 2);
    this.rawVarint(b.length);
    this.push(b);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  float(field: number, v: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.push(b);
    return this;
  }

  /** Packed repeated int64 (proto2 readers accept packed encoding for scalar repeated fields). */
  packedVarints(field: number, values: ReadonlyArray<number | bigint>): this {
    const inner = new Writer();
    for (const v of values) inner.rawVarint(v);
    return this.bytes(field, inner.finish());
  }

  packedFloats(field: number, values: readonly number[]): this {
    const b = new Uint8Array(values.length * 4);
    const view = new DataView(b.buffer);
    values.forEach((v, i) => view.setFloat32(i * 4, v, true));
    return this.bytes(field, b);
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.size);
    let pos = 0;
    for (const c of this.chunks) {
      out.set(c, pos);
      pos += c.length;
    }
    return out;
  }
}

/** Little-endian raw bytes, as TensorProto.raw_data requires. */
function rawBytes(data: Float32Array | BigInt64Array): Uint8Array {
  const le = new Uint8Array(data.byteLength);
  const view = new DataView(le.buffer);
  if (data instanceof Float32Array) data.forEach((v, i) => view.setFloat32(i * 4, v, true));
  else data.forEach((v, i) => view.setBigInt64(i * 8, v, true));
  return le;
}

export function encodeTensor(t: TensorDef): Uint8Array {
  const n = t.dims.reduce((a, b) => a * b, 1);
  if (n !== t.data.length)
    throw new Error(`tensor ${t.name}: dims [${t.dims.join(',')}] need ${n} values, got ${t.data.length}`);
  const w = new Writer();
  if (t.dims.length) w.packedVarints(1, t.dims); // dims
  w.varint(2, t.data instanceof Float32Array ? DataType.FLOAT : DataType.INT64); // data_type
  w.string(8, t.name); // name
  w.bytes(9, rawBytes(t.data)); // raw_data
  return w.finish();
}

function encodeAttribute(name: string, a: AttrValue): Uint8Array {
  const w = new Writer().string(1, name);
  switch (a.kind) {
    case 'float':
      return w.float(2, a.value).varint(20, AttrType.FLOAT).finish();
    case 'int':
      return w.varint(3, a.value).varint(20, AttrType.INT).finish();
    case 'string':
      return w.string(4, a.value).varint(20, AttrType.STRING).finish();
    case 'tensor':
      return w.bytes(5, encodeTensor(a.value)).varint(20, AttrType.TENSOR).finish();
    case 'floats':
      return w.packedFloats(7, a.value).varint(20, AttrType.FLOATS).finish();
    case 'ints':
      return w.packedVarints(8, a.value).varint(20, AttrType.INTS).finish();
  }
}

export function encodeNode(n: NodeDef): Uint8Array {
  const w = new Writer();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  if (n.name) w.string(3, n.name);
  w.string(4, n.opType);
  for (const [k, v] of Object.entries(n.attributes ?? {})) w.bytes(5, encodeAttribute(k, v));
  return w.finish();
}

export function encodeValueInfo(v: ValueInfoDef): Uint8Array {
  const shape = new Writer();
  for (const d of v.shape) {
    const dim = new Writer();
    if (typeof d === 'number')
      dim.varint(1, d); // dim_value
    else dim.string(2, d); // dim_param
    shape.bytes(1, dim.finish());
  }
  const tensorType = new Writer().varint(1, ELEM_CODE[v.elemType]).bytes(2, shape.finish());
  const type = new Writer().bytes(1, tensorType.finish()); // TypeProto.tensor_type
  return new Writer().string(1, v.name).bytes(2, type.finish()).finish();
}

export function encodeGraph(g: GraphDef): Uint8Array {
  const w = new Writer();
  for (const n of g.nodes) w.bytes(1, encodeNode(n));
  w.string(2, g.name);
  for (const t of g.initializers) w.bytes(5, encodeTensor(t));
  if (g.docString) w.string(10, g.docString);
  for (const i of g.inputs) w.bytes(11, encodeValueInfo(i));
  for (const o of g.outputs) w.bytes(12, encodeValueInfo(o));
  return w.finish();
}

/** A complete ModelProto (IR 8, default-domain opset 17) ready for `InferenceSession.create(bytes)`. */
export function encodeModel(g: GraphDef, opts: ModelOptions = {}): Uint8Array {
  const opset = new Writer().string(1, '').varint(2, opts.opset ?? OPSET_VERSION);
  const w = new Writer().varint(1, IR_VERSION).bytes(8, opset.finish());
  w.string(2, opts.producerName ?? 'dartflow');
  if (opts.producerVersion) w.string(3, opts.producerVersion);
  if (opts.docString) w.string(6, opts.docString);
  return w.bytes(7, encodeGraph(g)).finish();
}
