#!/usr/bin/env node
// Tries to create an ONNX Runtime (npm onnxruntime-node, CPU) session for every model listed on
// stdin (one path a line) and prints one JSON line per model: {"model", "ok", "error"}. Used by
// ort_op_table.py to find which op versions ORT implements; one process for thousands of tiny
// models (a node start costs 0.3 s).
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const paths = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length > 0);
  for (const p of paths) {
    let line;
    try {
      const s = await ort.InferenceSession.create(p, {executionProviders: ['cpu'], graphOptimizationLevel: 'disabled'});
      if (s.release) await s.release();
      line = {model: p, ok: true};
    } catch (e) {
      line = {model: p, ok: false, error: String(e && e.message ? e.message : e).split('\n')[0]};
    }
    process.stdout.write(JSON.stringify(line) + '\n');
  }
}

main().catch((e) => {
  process.stderr.write(`ort_load.js: ${e}\n`);
  process.exit(1);
});
