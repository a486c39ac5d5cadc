/**
 * A small graph builder over the proto encoder: unique value names, int64/float constants as
 * initializers, and one-line helpers for the ops the policy graphs use. Constants are never listed in
 * graph.input, so onnxruntime treats them as fixed (ORT-node ignores "overridable" initializers anyway).
 */
import {
  encodeModel,
  type AttrValue,
  type ElemType,
  type GraphDef,
  type ModelOptions,
  type NodeDef,
  type TensorDef,
  type ValueInfoDef,
} from './proto';

export const attr = {
  int: (value: number): AttrValue => ({ kind: 'int', value }),
  ints: (value: number[]): AttrValue => ({ kind: 'ints', value }),
  float: (value: number): AttrValue => ({ kind: 'float', value }),
};

export class GraphBuilder {
  readonly nodes: NodeDef[] = [];
  readonly inputs: ValueInfoDef[] = [];
  readonly outputs: ValueInfoDef[] = [];
  readonly initializers: TensorDef[] = [];
  private counter = 0;
  private readonly constCache = new Map<string, string>();

  constructor(readonly name: string) {}

  input(name: string, elemType: ElemType, shape: Array<number | string>): string {
    this.inputs.push({ name, elemType, shape });
    return name;
  }

  /** Declares `value` as a graph output, renaming it through Identity when the names differ. */
  output(value: string, name: string, elemType: ElemType, shape: Array<number | string>): void {
    if (value !== name) this.nodes.push({ opType: 'Identity', inputs: [value], outputs: [name] });
    this.outputs.push({ name, elemType, shape });
  }

  initializer(name: string, dims: number[], data: Float32Array | BigInt64Array): string {
    this.initializers.push({ name, dims, data });
    return name;
  }

  /** A 1-D int64 constant (axes, shapes, slice bounds); identical constants are shared. */
  ints(values: number[]): string {
    const key = `i:${values.join(',')}`;
    let name = this.constCache.get(key);
    if (!name) {
      name = this.initializer(
        `const_${this.constCache.size}`,
        [values.length],
        BigInt64Array.from(values.map((v) => BigInt(v)))
      );
      this.constCache.set(key, name);
    }
    return name;
  }

  /** A float32 scalar constant (rank 0, broadcasts against anything). */
  scalar(value: number): string {
    const key = `f:${value}`;
    let name = this.constCache.get(key);
    if (!name) {
      name = this.initializer(`const_${this.constCache.size}`, [], Float32Array.of(value));
      this.constCache.set(key, name);
    }
    return name;
  }

  /** Adds a node with one output and returns the output's (fresh) name. */
  op(opType: string, inputs: string[], attributes?: Record<string, AttrValue>, outName?: string): string {
    const out = outName ?? `${opType.toLowerCase()}_${this.counter++}`;
    this.nodes.push({ opType, inputs, outputs: [out], name: `n${this.nodes.length}_${opType}`, attributes });
    return out;
  }

  // Shorthands for frequent ops (opset 17 signatures: axes are inputs for ReduceSum/Unsqueeze/Slice).
  add(a: string, b: string): string {
    return this.op('Add', [a, b]);
  }
  sub(a: string, b: string): string {
    return this.op('Sub', [a, b]);
  }
  mul(a: string, b: string): string {
    return this.op('Mul', [a, b]);
  }
  neg(a: string): string {
    return this.op('Neg', [a]);
  }
  transpose(a: string, perm: number[]): string {
    return this.op('Transpose', [a], { perm: attr.ints(perm) });
  }
  reduceSum(a: string, axes: number[], keepdims: boolean): string {
    return this.op('ReduceSum', [a, this.ints(axes)], { keepdims: attr.int(keepdims ? 1 : 0) });
  }
  unsqueeze(a: string, axes: number[]): string {
    return this.op('Unsqueeze', [a, this.ints(axes)]);
  }
  reshape(a: string, shape: number[]): string {
    return this.op('Reshape', [a, this.ints(shape)]);
  }
  slice(a: string, axis: number, start: number, end: number): string {
    return this.op('Slice', [a, this.ints([start]), this.ints([end]), this.ints([axis])]);
  }
  /** Gemm A·B(ᵀ) (+C); weights are stored [out, in] as in PyTorch, hence transB by default. */
  gemm(a: string, b: string, c?: string, opts: { transA?: boolean; transB?: boolean } = {}): string {
    const attributes: Record<string, AttrValue> = {};
    if (opts.transA) attributes.transA = attr.int(1);
    if (opts.transB ?? true) attributes.transB = attr.int(1);
    return this.op('Gemm', c ? [a, b, c] : [a, b], attributes);
  }

  graph(docString?: string): GraphDef {
    return {
      name: this.name,
      nodes: this.nodes,
      inputs: this.inputs,
      outputs: this.outputs,
      initializers: this.initializers,
      docString,
    };
  }

  encode(opts?: ModelOptions): Uint8Array {
    return encodeModel(this.graph(opts?.docString), opts);
  }
}
