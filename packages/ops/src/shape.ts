/** Shape helpers shared by `Tensor` and the ops. Shapes are row-major (C order) and contiguous. */
import { QkShapeError } from './errors.js';

export type Shape = readonly number[];

export function formatShape(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

/** Number of elements of a shape (1 for a scalar shape `[]`). */
export function shapeSize(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Checks that every extent is a non-negative safe integer and returns a frozen copy. */
export function validateShape(shape: unknown, op: string, arg = 'shape'): Shape {
  if (!Array.isArray(shape)) {
    throw new QkShapeError({ op, arg, expected: 'an array of non-negative integers', got: String(shape) });
  }
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw new QkShapeError({
        op,
        arg,
        expected: 'an array of non-negative integers',
        got: `[${shape.map(String).join(', ')}]`,
      });
    }
  }
  return Object.freeze([...(shape as number[])]);
}

/** Product of all extents but the last: the number of rows when a tensor is seen as [rows, lastDim]. */
export function leadingSize(shape: Shape): number {
  return shapeSize(shape.slice(0, -1));
}
