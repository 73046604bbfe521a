#!/usr/bin/env node
// ONNX Runtime (npm onnxruntime-node, CPU) as an independent peer for onnxforge.
//
//   node tools/peers/ort.js run MODEL --inputs DIR --out DIR [--threads N] [--level L]
//   node tools/peers/ort.js bench MODEL --inputs DIR [--threads N] [--warmup W] [--iters N | --min-time S] [--level L]
//   node tools/peers/ort.js optimize MODEL -o OUT --level basic|extended|all [--external-data]
//   node tools/peers/ort.js info MODEL
//
// Every command prints one JSON object on stdout; on failure {"ok": false, "error": ...} and exit
// code 1 (2 for usage errors). Tensors are exchanged as .npy files (format 1.0, little-endian,
// C order) named after the input/output with one escaping rule, shared with make_inputs.py:
// every character outside [A-Za-z0-9._-] becomes "_" ("/enc/x:0" -> "_enc_x_0.npy"). Two names
// that escape to the same file are an error. Sessions use the CPU provider, sequential
// execution, inter-op threads 1 and intra-op threads N (default: all CPUs); --level sets the
// graph optimization level for run/bench (default all: what ORT users get).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

class UsageError extends Error {}

// ------------------------------------------------------------------------------------- npy
const DTYPES = {
  // ORT type: [npy descr, typed array, element bytes]
  float32: ['<f4', Float32Array, 4], float64: ['<f8', Float64Array, 8], float16: ['<f2', Uint16Array, 2],
  int64: ['<i8', BigInt64Array, 8], int32: ['<i4', Int32Array, 4], int16: ['<i2', Int16Array, 2],
  int8: ['|i1', Int8Array, 1], uint64: ['<u8', BigUint64Array, 8], uint32: ['<u4', Uint32Array, 4],
  uint16: ['<u2', Uint16Array, 2], uint8: ['|u1', Uint8Array, 1], bool: ['|b1', Uint8Array, 1],
};
const BY_DESCR = {};
for (const [t, [d]] of Object.entries(DTYPES)) {
  BY_DESCR[d] = t;
  BY_DESCR['=' + d.slice(1)] = t;
  if (d[0] === '|') BY_DESCR['<' + d.slice(1)] = t;
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY')
    throw new Error(`${file}: not a .npy file`);
  const major = buf.readUInt8(6);
  let hlen, hstart;
  if (major === 1) [hlen, hstart] = [buf.readUInt16LE(8), 10];
  else if (major === 2 || major === 3) [hlen, hstart] = [buf.readUInt32LE(8), 12];
  else throw new Error(`${file}: unsupported .npy version ${major}`);
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', hstart, hstart + hlen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: malformed .npy header ${header.trim()}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order arrays are not supported, save C order`);
  const type = BY_DESCR[descr[1]];
  if (!type) throw new Error(`${file}: unsupported dtype '${descr[1]}' (little-endian numeric/bool only)`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const [, Arr, size] = DTYPES[type];
  const count = dims.reduce((a, b) => a * b, 1);
  const start = hstart + hlen;
  if (buf.length - start < count * size)
    throw new Error(`${file}: truncated data (${buf.length - start} bytes for ${count} x ${type})`);
  const data = new Arr(count); // copy: the file buffer need not be aligned
  new Uint8Array(data.buffer).set(buf.subarray(start, start + count * size));
  return new ort.Tensor(type, data, dims);
}

function writeNpy(file, tensor) {
  const spec = DTYPES[tensor.type];
  if (!spec) throw new Error(`output type ${tensor.type} cannot be written as .npy`);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${spec[0]}', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.writeUInt8(0x93, 0);
  pre.write('NUMPY', 1, 'latin1');
  pre.writeUInt8(1, 6);
  pre.writeUInt8(0, 7);
  pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  atomicWrite(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function atomicWrite(file, bytes) {
  const tmp = `${file}.${process.pid}.part`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
}

// The escaping rule (keep in sync with make_inputs.py).
const fileStem = (name) => name.replace(/[^A-Za-z0-9._-]/g, '_');

function fileMap(names, what) {
  const seen = new Map();
  for (const n of names) {
    const f = fileStem(n) + '.npy';
    if (seen.has(f)) throw new Error(`${what} names "${seen.get(f)}" and "${n}" both map to ${f}`);
    seen.set(f, n);
  }
  return new Map([...seen].map(([f, n]) => [n, f]));
}

// ------------------------------------------------------------------------------------- protobuf
// Just enough of onnx.proto to count a model's nodes (ModelProto.graph = 7, GraphProto.node = 1,
// .initializer = 5, NodeProto.op_type = 4, .domain = 7, ModelProto.opset_import = 8).
function* fields(buf, start = 0, end = buf.length) {
  let i = start;
  const varint = () => {
    let v = 0n, s = 0n, b;
    do {
      if (i >= end) throw new Error('truncated protobuf');
      b = buf[i++];
      v |= BigInt(b & 0x7f) << s;
      s += 7n;
    } while (b & 0x80);
    return v;
  };
  while (i < end) {
    const key = Number(varint());
    const [no, wt] = [key >>> 3, key & 7];
    if (wt === 0) yield [no, wt, varint()];
    else if (wt === 1) { yield [no, wt, null]; i += 8; }
    else if (wt === 5) { yield [no, wt, null]; i += 4; }
    else if (wt === 2) {
      const len = Number(varint());
      yield [no, wt, [i, i + len]];
      i += len;
    } else throw new Error(`unsupported protobuf wire type ${wt}`);
  }
}

function graphStats(file) {
  const buf = fs.readFileSync(file);
  const out = { nodes: 0, initializers: 0, opset: {}, producer: '', ops: {} };
  for (const [no, wt, v] of fields(buf)) {
    if (wt !== 2) continue;
    if (no === 2) out.producer = buf.toString('utf8', v[0], v[1]);
    if (no === 8) {
      let dom = '', ver = 0;
      for (const [n2, w2, v2] of fields(buf, v[0], v[1])) {
        if (n2 === 1 && w2 === 2) dom = buf.toString('utf8', v2[0], v2[1]);
        if (n2 === 2 && w2 === 0) ver = Number(v2);
      }
      out.opset[dom || 'ai.onnx'] = ver;
    }
    if (no !== 7) continue;
    for (const [gn, gw, gv] of fields(buf, v[0], v[1])) {
      if (gw !== 2) continue;
      if (gn === 5) out.initializers++;
      if (gn !== 1) continue;
      out.nodes++;
      let op = '', dom = '';
      for (const [nn, nw, nv] of fields(buf, gv[0], gv[1])) {
        if (nw !== 2) continue;
        if (nn === 4) op = buf.toString('utf8', nv[0], nv[1]);
        if (nn === 7) dom = buf.toString('utf8', nv[0], nv[1]);
      }
      const k = dom && dom !== 'ai.onnx' ? `${dom}::${op}` : op;
      out.ops[k] = (out.ops[k] || 0) + 1;
    }
  }
  out.ops = Object.fromEntries(Object.entries(out.ops).sort());
  return out;
}

// ------------------------------------------------------------------------------------- session
function sessionOptions(o, level) {
  const threads = o.threads !== undefined ? intOpt(o, 'threads', 1) : (os.availableParallelism?.() ?? os.cpus().length);
  return {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: level || o.level || 'all', logSeverityLevel: 3,
  };
}

async function open(model, opts) {
  if (!fs.existsSync(model)) throw new Error(`model ${model} does not exist`);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, opts);
  return [session, ms(t0)];
}

function loadInputs(session, dir) {
  if (!dir) throw new UsageError('--inputs DIR is required');
  const files = fileMap(session.inputNames, 'input');
  const feeds = {}, missing = [];
  for (const [name, f] of files) {
    const p = path.join(dir, f);
    if (fs.existsSync(p)) feeds[name] = readNpy(p);
    else missing.push(`${name} (${f})`);
  }
  if (missing.length) throw new Error(`missing input files in ${dir}: ${missing.join(', ')}`);
  const used = new Set(files.values());
  const unused = fs.readdirSync(dir).filter((f) => f.endsWith('.npy') && !used.has(f));
  return [feeds, unused];
}

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const r3 = (x) => Math.round(x * 1000) / 1000;
const describe = (t) => ({ dtype: t.type, shape: t.dims.map(Number) });

// ------------------------------------------------------------------------------------- commands
async function cmdRun(model, o) {
  if (!o.out) throw new UsageError('--out DIR is required');
  const opts = sessionOptions(o);
  const [session, loadMs] = await open(model, opts);
  const [feeds, unused] = loadInputs(session, o.inputs);
  const outFiles = fileMap(session.outputNames, 'output');
  const t0 = process.hrtime.bigint();
  const results = await session.run(feeds);
  const runMs = ms(t0);
  fs.mkdirSync(o.out, { recursive: true });
  const outputs = [];
  for (const name of session.outputNames) {
    const file = path.join(o.out, outFiles.get(name));
    writeNpy(file, results[name]);
    outputs.push({ name, file, ...describe(results[name]) });
  }
  return {
    ok: true, model, threads: opts.intraOpNumThreads, level: opts.graphOptimizationLevel, load_ms: r3(loadMs),
    run_ms: r3(runMs), inputs: Object.entries(feeds).map(([name, t]) => ({ name, ...describe(t) })), outputs,
    unused_inputs: unused,
  };
}

async function cmdBench(model, o) {
  const opts = sessionOptions(o);
  const [session, loadMs] = await open(model, opts);
  const [feeds] = loadInputs(session, o.inputs);
  const warmup = o.warmup !== undefined ? intOpt(o, 'warmup', 0) : 3;
  const iters = o.iters !== undefined ? intOpt(o, 'iters', 1) : null;
  const minTime = o['min-time'] !== undefined ? Number(o['min-time']) : 2.0;
  if (!(minTime >= 0)) throw new UsageError('--min-time must be a number of seconds');
  for (let i = 0; i < warmup; i++) await session.run(feeds);
  const times = [];
  const start = process.hrtime.bigint();
  for (;;) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(ms(t0));
    if (iters !== null ? times.length >= iters : times.length >= 5 && ms(start) >= minTime * 1000) break;
  }
  const s = [...times].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const std = Math.sqrt(s.reduce((a, b) => a + (b - mean) ** 2, 0) / s.length);
  return {
    ok: true, model, threads: opts.intraOpNumThreads, inter_op_threads: 1, execution_mode: 'sequential',
    level: opts.graphOptimizationLevel, load_ms: r3(loadMs), warmup, iters: s.length, median_ms: r3(median),
    min_ms: r3(s[0]), mean_ms: r3(mean), max_ms: r3(s[s.length - 1]), p90_ms: r3(s[Math.floor(0.9 * (s.length - 1))]),
    std_ms: r3(std),
  };
}

async function cmdOptimize(model, o) {
  const out = o.o || o.output;
  if (!out) throw new UsageError('-o OUT is required');
  const level = o.level;
  if (!['disabled', 'basic', 'extended', 'layout', 'all'].includes(level))
    throw new UsageError('--level must be basic, extended or all (or disabled, layout)');
  const dir = path.dirname(path.resolve(out));
  fs.mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(out)}.${process.pid}.part`);
  const opts = { ...sessionOptions(o, level), optimizedModelFilePath: tmp };
  if (o['external-data']) {
    // Models over 2 GB must keep their weights outside the protobuf.
    opts.extra = { session: { optimized_model_external_initializers_file_name: `${path.basename(out)}.data`,
      optimized_model_external_initializers_min_size_in_bytes: '1024' } };
  }
  try {
    const [, ms_] = await open(model, opts);
    if (!fs.existsSync(tmp)) throw new Error('ONNX Runtime did not write the optimized model');
    fs.renameSync(tmp, out);
    return {
      ok: true, model, output: out, level, seconds: r3(ms_ / 1000), bytes: fs.statSync(out).size,
      before: pick(graphStats(model)), after: pick(graphStats(out)),
    };
  } finally {
    if (fs.existsSync(tmp)) fs.unlinkSync(tmp);
  }
}
const pick = (s) => ({ nodes: s.nodes, initializers: s.initializers, ops: s.ops });

async function cmdInfo(model, o) {
  const [session, loadMs] = await open(model, { ...sessionOptions(o), graphOptimizationLevel: o.level || 'disabled' });
  const meta = (list) => (list || []).map((m) => (m.isTensor ? { name: m.name, dtype: m.type, shape: m.shape }
    : { name: m.name, tensor: false }));
  return {
    ok: true, model, ort: ort.env.versions, load_ms: r3(loadMs), bytes: fs.statSync(model).size,
    inputs: session.inputMetadata ? meta(session.inputMetadata) : session.inputNames.map((name) => ({ name })),
    outputs: session.outputMetadata ? meta(session.outputMetadata) : session.outputNames.map((name) => ({ name })),
    graph: graphStats(model),
  };
}

// ------------------------------------------------------------------------------------- cli
function parse(argv) {
  const o = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--external-data') o['external-data'] = true;
    else if (a.startsWith('-') && a.length > 1 && !/^-\d/.test(a)) {
      const [k, v] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, argv[++i]];
      if (v === undefined) throw new UsageError(`${a} needs a value`);
      o[k.replace(/^-+/, '')] = v;
    } else o._.push(a);
  }
  return o;
}

function intOpt(o, k, min) {
  const v = Number(o[k]);
  if (!Number.isInteger(v) || v < min) throw new UsageError(`--${k} must be an integer >= ${min}`);
  return v;
}

const USAGE = `usage: ort.js run MODEL --inputs DIR --out DIR [--threads N] [--level L]
       ort.js bench MODEL --inputs DIR [--threads N] [--warmup W] [--iters N | --min-time S] [--level L]
       ort.js optimize MODEL -o OUT --level basic|extended|all [--threads N] [--external-data]
       ort.js info MODEL`;

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  const commands = { run: cmdRun, bench: cmdBench, optimize: cmdOptimize, info: cmdInfo };
  try {
    if (os.endianness() !== 'LE') throw new Error('big-endian hosts are not supported');
    if (!commands[cmd]) throw new UsageError(cmd && cmd !== '-h' && cmd !== '--help' ? `unknown command ${cmd}` : 'no command');
    const o = parse(rest);
    if (o._.length !== 1) throw new UsageError('exactly one MODEL path is expected');
    const res = await commands[cmd](o._[0], o);
    process.stdout.write(JSON.stringify(res) + '\n');
  } catch (e) {
    const usage = e instanceof UsageError;
    process.stdout.write(JSON.stringify({ ok: false, error: e.message }) + '\n');
    process.stderr.write(`ort.js: ${e.message}\n${usage ? USAGE + '\n' : ''}`);
    process.exitCode = usage ? 2 : 1;
  }
}

main();
