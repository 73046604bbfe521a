#!/usr/bin/env node
// ONNX Runtime's own time per op type (its profiler's kernel times), to set against
// `onnxforge bench --profile` on the same model in the same run (perf/op_times_vs_ort.sh).
//
//   node perf/ort_op_times.js MODEL INPUT_DIR THREADS ITERS
//
// Prints one JSON object: wall median per run, and per op type the node count and kernel ms per
// run (the profiler's *_kernel_time events averaged over warm-up and timed runs). Session options
// as tools/peers/ort.js bench: CPU, sequential, inter-op 1, intra-op THREADS, level all. Inputs are
// the .npy files make_inputs.py writes (ort.js runs its CLI when loaded, so its reader cannot be
// required here; this one reads the little-endian C-order arrays make_inputs.py writes).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'tools', 'peers', 'node_modules', 'onnxruntime-node'));

const TYPES = { '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|b1': ['bool', Uint8Array], '<f2': ['float16', Uint16Array] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header)[1];
  const dims = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (!TYPES[descr]) throw new Error(`${file}: dtype ${descr} not handled here`);
  const [type, Arr] = TYPES[descr];
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Arr(n);
  new Uint8Array(data.buffer).set(buf.subarray(10 + hlen, 10 + hlen + n * Arr.BYTES_PER_ELEMENT));
  return new ort.Tensor(type, data, dims);
}

(async () => {
  const [model, dir, threads, iters] = process.argv.slice(2);
  if (!iters) {
    console.error('usage: node perf/ort_op_times.js MODEL INPUT_DIR THREADS ITERS');
    process.exit(2);
  }
  const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ortprof_')), 'p');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', logSeverityLevel: 3, enableProfiling: true, profileFilePrefix: prefix,
  });
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = readNpy(path.join(dir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'));
  const warmup = 2, runs = Number(iters), times = [];
  for (let i = 0; i < warmup; i++) await session.run(feeds);
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  session.endProfiling();
  const folder = path.dirname(prefix);
  const file = path.join(folder, fs.readdirSync(folder).find((f) => f.endsWith('.json')));
  const ops = {};
  for (const e of JSON.parse(fs.readFileSync(file, 'utf8'))) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const o = (ops[e.args.op_name] = ops[e.args.op_name] || { nodes: 0, us: 0 });
    o.us += e.dur;
    o.nodes++;
  }
  fs.rmSync(folder, { recursive: true, force: true });
  const total = warmup + runs;
  const out = {};
  for (const [op, o] of Object.entries(ops).sort((a, b) => b[1].us - a[1].us))
    out[op] = { nodes: o.nodes / total, ms: Math.round(o.us / total) / 1000 };
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({ model, threads: Number(threads), median_ms: times[times.length >> 1], ops: out }));
})().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
