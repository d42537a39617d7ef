/** `qk bench` option parsing that needs no GPU and no run: `--hf-peers`. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/args.js';
import { hfPeerList } from '../src/commands/bench.js';

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
