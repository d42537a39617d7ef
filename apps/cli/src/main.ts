/**
 * The `qk` command. Subcommands compose the packages; no kernels or math live here.
 */
import * as cudaCore from '@qk/cuda-core';
import { QkError, useCudaBackend } from '@qk/ops';
import { UsageError } from './args.js';
import { benchCommand } from './commands/bench.js';
import { chatCommand } from './commands/chat.js';
import { generateCommand } from './commands/generate.js';
import { infoCommand } from './commands/info.js';
import { modelCommand } from './commands/model.js';
import { pullCommand } from './commands/pull.js';
import { serveCommand } from './commands/serve.js';
import { verifyCommand } from './commands/verify.js';
import { SOAK_CLIENTS_COMMAND, soakClientsCommand } from './serve/soak-clients.js';

const HELP = `qk — Qwen3 on NVIDIA GPUs from Node.js, through qk's own CUDA kernels

Usage: qk <command> [options]

Commands:
  generate      continue a prompt with Qwen3, streaming the text (qk generate --help)
  chat          an interactive chat with Qwen3 (qk chat --help)
  model         make and inspect Qwen3 checkpoints (qk model --help)
  pull          download a model from the Hugging Face hub: qk pull Qwen/Qwen3-0.6B (qk pull --help)
  serve         an OpenAI-compatible HTTP server over one model (qk serve --help)
  verify        check every CUDA kernel against its @qk/ops reference (qk verify --help)
  bench <suite> benchmark against the measured copy ceiling and PyTorch (qk bench --help)
  info          GPU backend status: device, driver, memory

Options:
  -h, --help     this help
  -v, --version  the version

Without --model DIR (a Hugging Face Qwen3 checkpoint directory), generate and chat run a preset with random
weights: the text is meaningless, but every kernel runs.`;

const COMMANDS: Record<string, (argv: string[]) => number | Promise<number>> = {
  generate: generateCommand,
  chat: chatCommand,
  model: modelCommand,
  pull: pullCommand,
  serve: serveCommand,
  verify: verifyCommand,
  bench: benchCommand,
  info: infoCommand,
};

/**
 * A reader that leaves early (`qk generate … | head -c 10`) closes the pipe: that ends the command quietly with exit
 * 0, as it does for other Unix tools, instead of an unhandled EPIPE with a stack.
 */
function quietOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(0);
      throw e;
    });
  }
}

export async function main(argv: string[]): Promise<number> {
  // `qk bench serve`'s clients, in a process of their own (serve/soak-clients.ts); nothing of CUDA is touched.
  if (argv[0] === SOAK_CLIENTS_COMMAND) return soakClientsCommand();
  quietOnClosedPipe();
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
    return await run(rest);
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  },
);
