/** `@qk/bench`: qk's measurement harness and suites. */
export { type GpuTimingOptions, gpuInfo, measureCopyCeiling, rotationsFor, timeGpu } from './harness.js';
export { gitCommit, hostInfo } from './machine.js';
export { type PeerResult, type PeerRun, peersDir, runTorchPeers, torchStatus } from './peers/torch.js';
export { opsTable } from './report.js';
export { type OpsBenchOptions, type OpsBenchReport, runOpsBench } from './run-ops.js';
export { type Summary, summarize } from './stats.js';
export { type OpCase, type OpRow, opsCases, type PeerSpec, runOpCase } from './suites/ops.js';
