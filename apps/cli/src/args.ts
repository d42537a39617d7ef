/** Argument parsing shared by the commands: node's parseArgs with errors turned into usage messages. */
import { type ParseArgsConfig, parseArgs } from 'node:util';

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;
const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/** The values `parse` returns for an options table: strings, or booleans for boolean options; all optional. */
export type OptionValues<O extends Options> = {
  [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string;
};

export function parse<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options: { ...options, ...HELP_OPTION }, allowPositionals, strict: true });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

export function intOption(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`--${name} must be a non-negative integer, got ${String(value)}`);
  return n;
}
