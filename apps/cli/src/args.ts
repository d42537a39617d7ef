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

/** A value as it may be echoed in a usage message: cut, control characters escaped, empty shown as such. */
export function shownValue(value: unknown): string {
  const text = String(value);
  if (text.length === 0) return 'an empty value';
  const cut = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  return JSON.stringify(cut).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * A non-negative integer flag written in plain decimal digits. Anything else (`--seed=`, `--top-k=abc`, `1e3`,
 * `0x10`, ` 7`) is a usage error, never silently 0 or some other number.
 */
export function intOption(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n))
    throw new UsageError(`--${name} must be a non-negative integer, got ${shownValue(value)}`);
  return n;
}
