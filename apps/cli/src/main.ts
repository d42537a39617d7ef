/**
 * The `qk` command. Subcommands compose the packages; no kernels or math live here.
 */
import * as cudaCore from '@qk/cuda-core';
import { QkError, useCudaBackend } from '@qk/ops';
import { UsageError } from './args.js';
import { benchCommand } from './commands/bench.js';
import { infoCommand } from './commands/info.js';
import { verifyCommand } from './commands/verify.js';

const HELP = `qk — Qwen3 on NVIDIA GPUs from Node.js, through qk's own CUDA kernels

Usage: qk <command> [options]

Commands:
  verify        check every CUDA kernel against its @qk/ops reference (qk verify --help)
  bench <suite> benchmark against the measured copy ceiling and PyTorch (qk bench --help)
  info          GPU backend status: device, driver, memory

Options:
  -h, --help     this help
  -v, --version  the version`;

const COMMANDS: Record<string, (argv: string[]) => number> = {
  verify: verifyCommand,
  bench: benchCommand,
  info: infoCommand,
};

export function main(argv: string[]): number {
  // A bundle cannot resolve @qk/cuda-core lazily, so hand it to @qk/ops up front (loading stays lazy).
  useCudaBackend(cudaCore);
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    console.log(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command === '-v' || command === '--version') {
    console.log('qk 0.0.0');
    return 0;
  }
  const run = COMMANDS[command];
  if (run === undefined) {
    console.error(`qk: unknown command "${command}"\n\n${HELP}`);
    return 2;
  }
  try {
    return run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`qk ${command}: ${e.message} (see qk ${command} --help)`);
      return 2;
    }
    if (e instanceof QkError) {
      console.error(`qk ${command}: ${e.message}`);
      return 1;
    }
    throw e;
  }
}

process.exitCode = main(process.argv.slice(2));
