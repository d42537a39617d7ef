/**
 * The verify runner's judgement of a case's outputs, with the rounding slack the SwiGLU cases of fused-linear use:
 * one rounding step of the output dtype on top of atol at each element's magnitude for the listed outputs, plain
 * bounds for the others, NaN never passing.
 */
import { describe, expect, it } from 'vitest';
import { fromFloats } from '../src/io.js';
import type { Tensor } from '../src/tensor.js';
import { roundingStep, toleranceFor } from '../src/testing/tolerances.js';
import { judgeOutputs } from '../src/verify/run.js';

const bf = (values: number[]) => fromFloats(Float64Array.from(values), [values.length], 'bf16');
const tol = toleranceFor('rmsnormLinear', 'bf16');

describe('judgeOutputs with rounding slack', () => {
  it('knows the rounding steps of bf16, f16 and f32', () => {
    expect(roundingStep('bf16', 20)).toBe(0.125);
    expect(roundingStep('bf16', -1.5)).toBe(2 ** -7);
    expect(roundingStep('f16', 1)).toBe(2 ** -10);
    expect(roundingStep('f32', 3)).toBe(2 ** -22);
    expect(roundingStep('bf16', 0)).toBe(0);
  });

  it('passes a one-step flip at |y| ≥ 16 that plain atol refuses, and fails two steps', () => {
    const want = [20, -18, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
    const compare = (actual: Tensor[], expected: Tensor[]) => judgeOutputs(actual, expected, tol, [0]);
    const oneStep = compare([bf(want.map((v, i) => (i === 0 ? v + 0.125 : v)))], [bf(want)]);
    expect(oneStep.maxAbs).toBe(0.125);
    expect(oneStep.maxAbs).toBeGreaterThan(tol.atol);
    expect(oneStep.pass).toBe(true);
    const plain = judgeOutputs([bf(want.map((v, i) => (i === 0 ? v + 0.125 : v)))], [bf(want)], tol);
    expect(plain.pass).toBe(false);
    const twoSteps = compare([bf(want.map((v, i) => (i === 1 ? v - 0.25 : v)))], [bf(want)]);
    expect(twoSteps.pass).toBe(false);
    expect(twoSteps.note).toMatch(/1 elements beyond/);
  });

  it('keeps the plain bounds for the residual output and fails NaN', () => {
    const y = bf([1, 2, 3, 4]);
    const sum = [16, 17, 18, 19];
    const compare = (actual: Tensor[], expected: Tensor[]) => judgeOutputs(actual, expected, tol, [0]);
    expect(compare([y, bf(sum)], [y, bf(sum)]).pass).toBe(true);
    expect(compare([y, bf(sum.map((v, i) => (i === 0 ? v + 0.125 : v)))], [y, bf(sum)]).pass).toBe(false);
    const nan = compare([bf([Number.NaN, 2, 3, 4])], [y]);
    expect(nan.pass).toBe(false);
    expect(nan.note).toMatch(/NaN/);
  });
});
