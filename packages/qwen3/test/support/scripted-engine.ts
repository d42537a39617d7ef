/**
 * An engine whose next token is a function of the context so far, for testing generation without a model. It
 * keeps the context the way a KV cache would (positions are absolute) and logs every call.
 */
import { QkContextError } from '../../src/errors.js';
import type { Engine, ModuleKind, PatchSpec, Qwen3Config, SamplingParams } from '../../src/types.js';

export interface EngineCall {
  readonly ids: readonly number[];
  readonly start: number;
  readonly step: number;
}

export interface ScriptedEngine extends Engine {
  readonly calls: EngineCall[];
  readonly disposed: boolean;
}

/** `nextToken(context, step)` picks each token; the context is prompt + tokens fed back so far. */
export function scriptedEngine(
  config: Qwen3Config,
  maxContext: number,
  nextToken: (context: readonly number[], step: number) => number,
  patchable = false,
  scriptedLogits?: (context: readonly number[]) => Float32Array,
): ScriptedEngine {
  const context: number[] = [];
  const calls: EngineCall[] = [];
  let disposed = false;
  const patches: PatchSpec[] = [];
  const engine: ScriptedEngine = {
    name: patchable ? 'layered' : 'cpu',
    config,
    dtype: 'f32',
    maxContext,
    calls,
    get disposed() {
      return disposed;
    },
    logits(ids: readonly number[], start: number): Float32Array {
      if (scriptedLogits === undefined) throw new Error('scripted engine: logits() is not scripted');
      calls.push({ ids: [...ids], start, step: -1 });
      context.length = start;
      context.push(...ids);
      return scriptedLogits(context);
    },
    next(ids: readonly number[], start: number, _sampling: SamplingParams, step: number): number {
      if (disposed) throw new Error('scripted engine: used after dispose');
      if (start > context.length)
        throw new Error(`scripted engine: gap at ${start} (cached ${context.length})`);
      if (start + ids.length > maxContext) throw new QkContextError('scripted engine: context overflow');
      calls.push({ ids: [...ids], start, step });
      context.length = start;
      context.push(...ids);
      return nextToken(context, step);
    },
    dispose() {
      disposed = true;
    },
  };
  if (patchable) {
    const variants = { rmsnorm: ['fused', 'eager'], mlp: ['fused'], rope: ['fused'], attention: ['flash'] };
    Object.assign(engine, {
      variants: (): Readonly<Record<ModuleKind, readonly string[]>> => variants,
      patch: (spec: PatchSpec) => {
        patches.push(spec);
        return () => patches.splice(patches.indexOf(spec), 1);
      },
      patches,
    });
  }
  return engine;
}
