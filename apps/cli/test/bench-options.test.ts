/** `qk bench` option parsing that needs no GPU and no run: `--hf-peers`, decode's sampling flags. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/args.js';
import { benchSampling, engineList, hfPeerList } from '../src/commands/bench.js';

describe('--hf-peers', () => {
  it('takes eager, graph or both, in any order, once each', () => {
    expect(hfPeerList(undefined)).toBeUndefined();
    expect(hfPeerList('graph')).toEqual(['graph']);
    expect(hfPeerList('eager')).toEqual(['eager']);
    expect(hfPeerList('graph, eager')).toEqual(['graph', 'eager']);
    expect(hfPeerList('graph,graph')).toEqual(['graph']);
  });

  it('refuses anything else with a UsageError that names the bad value', () => {
    for (const bad of ['', 'static', 'graph,', 'eager,compile']) {
      expect(() => hfPeerList(bad)).toThrow(UsageError);
    }
    expect(() => hfPeerList('eager,compile')).toThrow(/unknown: "compile"/);
  });
});

describe('decode sampling flags', () => {
  it('leave decode greedy when absent, and pass the flags given (over the model defaults) when present', () => {
    expect(benchSampling({}, ['decode'])).toBeUndefined();
    expect(benchSampling({ temperature: '0.7', 'top-k': '5' }, ['decode'])).toEqual({
      temperature: 0.7,
      topK: 5,
    });
    expect(benchSampling({ seed: '3' }, ['decode', 'prefill'])).toEqual({ seed: 3 });
    expect(benchSampling({ 'top-p': '0.9' }, ['rmsnorm', 'decode'])).toEqual({ topP: 0.9 });
  });

  it('refuse what bench would ignore, and bad values, with a UsageError that says what to do', () => {
    expect(() => benchSampling({ 'max-tokens': '64' }, ['decode'])).toThrow(/--tokens N/);
    expect(() => benchSampling({ 'no-think': true }, ['decode'])).toThrow(/qk generate and qk chat/);
    expect(() => benchSampling({ temperature: '0.7' }, ['prefill'])).toThrow(/decode suite only/);
    expect(() => benchSampling({ 'top-k': '5' }, ['patch', 'rope'])).toThrow(
      /--top-k applies to the decode suite/,
    );
    expect(() => benchSampling({ temperature: '-1' }, ['decode'])).toThrow(UsageError);
    expect(() => benchSampling({ 'top-p': '0' }, ['decode'])).toThrow(/--top-p/);
  });
});

describe('engines per suite', () => {
  it('measures every weight format on both GPU engines for decode, unless told otherwise', () => {
    expect(engineList('decode', {}, false)).toEqual(['layered', 'megakernel']);
    for (const weights of ['int8', 'int4']) {
      expect(engineList('decode', { weights }, false)).toEqual(['layered', 'megakernel']);
      expect(engineList('prefill', { weights }, false)).toEqual(['layered']);
      expect(engineList('decode', { weights }, true)).toEqual(['cpu']);
    }
    expect(engineList('decode', { weights: 'bf16' }, false)).toEqual(['layered', 'megakernel']);
    expect(engineList('decode', { weights: 'int8', engines: 'layered,cpu' }, false)).toEqual([
      'layered',
      'cpu',
    ]);
  });
});
