#!/usr/bin/env node
// ONNX Runtime (CPU execution provider) as a peer: times one model on one raw float32 input.
//
//   node bench/ort_peer.js MODEL.onnx --input X.f32 --threads N --runs R [--warmup W]
//       [--output OUT.f32] [--shape 1,3,224,224] [--profile NODES.json]
//
// The session: graphOptimizationLevel 'all', intraOpNumThreads N, interOpNumThreads 1, sequential
// execution. The input (the model's only input) is raw little-endian float32 of the shape in the
// model's input metadata (a symbolic dim needs --shape). W warm-up runs (default 3), then R timed
// runs, each session.run timed by process.hrtime.bigint. --output writes the first output as raw
// float32. Prints one JSON line: {"median_ms", "min_ms", "max_ms", "runs", "threads", "ort_version",
// "ms": [...]}. --profile then runs R more times in a session with ONNX Runtime's profiler on and
// writes each node's kernel time (median over the runs, ms), op type and the ops fused into it:
// {"nodes": [{"name", "op", "ms"}], "runs"} (bench/compare_groups.py sets them beside hfuse's
// groups). On an error: one line on stderr, exit status 1 (2 for a usage error).
//
// onnxruntime-node comes from bench/package.json: tools/install_deps.sh --peers installs it.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(msg, code = 1) {
  process.stderr.write('ort_peer: ' + String(msg).split('\n')[0] + '\n');
  process.exit(code);
}

function parseArgs(argv) {
  const a = {model: null, input: null, output: null, threads: 1, runs: 10, warmup: 3, shape: null, profile: null};
  const ints = {'--threads': 'threads', '--runs': 'runs', '--warmup': 'warmup'};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fail('usage: ' + k + ' needs a value', 2);
      return argv[++i];
    };
    if (k in ints) {
      const v = next();
      if (!/^\d+$/.test(v)) fail('usage: ' + k + ' takes a non-negative integer, not "' + v + '"', 2);
      a[ints[k]] = parseInt(v, 10);
    } else if (k === '--input') {
      a.input = next();
    } else if (k === '--output') {
      a.output = next();
    } else if (k === '--profile') {
      a.profile = next();
    } else if (k === '--shape') {
      const v = next();
      if (!/^\d+(,\d+)*$/.test(v)) fail('usage: --shape takes comma-separated dims, e.g. 1,3,224,224', 2);
      a.shape = v.split(',').map(Number);
    } else if (k === '-h' || k === '--help') {
      process.stdout.write('usage: node bench/ort_peer.js MODEL.onnx --input X.f32 --threads N --runs R ' +
                           '[--warmup W] [--output OUT.f32] [--shape 1,3,224,224] [--profile NODES.json]\n');
      process.exit(0);
    } else if (k.startsWith('-')) {
      fail('usage: unknown option ' + k, 2);
    } else if (a.model === null) {
      a.model = k;
    } else {
      fail('usage: more than one model given (' + a.model + ', ' + k + ')', 2);
    }
  }
  if (a.model === null) fail('usage: no model given (node bench/ort_peer.js MODEL.onnx --input X.f32 ...)', 2);
  if (a.input === null) fail('usage: --input X.f32 is required', 2);
  if (a.threads < 1) fail('usage: --threads must be at least 1', 2);
  if (a.runs < 1) fail('usage: --runs must be at least 1', 2);
  return a;
}

function loadOrt() {
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail('cannot load onnxruntime-node (run tools/install_deps.sh --peers): ' + e.message);
  }
  // Its version, from its package.json (the directory holding the resolved entry point or above).
  let version = 'unknown';
  let dir = path.dirname(require.resolve('onnxruntime-node'));
  for (let i = 0; i < 5 && dir !== path.dirname(dir); i++, dir = path.dirname(dir)) {
    const p = path.join(dir, 'package.json');
    if (fs.existsSync(p)) {
      const pkg = JSON.parse(fs.readFileSync(p, 'utf8'));
      if (pkg.name === 'onnxruntime-node') {
        version = pkg.version;
        break;
      }
    }
  }
  return {ort, version};
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// Per-node kernel times from ONNX Runtime's profiler, in a session of its own (profiling slows the
// runs the timing above reports).
async function profileNodes(ort, a, options, feeds) {
  const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'ort_profile_'));
  const prefix = path.join(dir, 'profile');
  const session = await ort.InferenceSession.create(a.model, {...options, enableProfiling: true, profileFilePrefix: prefix});
  for (let i = 0; i < a.warmup + a.runs; i++) await session.run(feeds);
  session.endProfiling();
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  if (files.length !== 1) fail('ONNX Runtime wrote ' + files.length + ' profile files in ' + dir);
  const events = JSON.parse(fs.readFileSync(path.join(dir, files[0]), 'utf8'));
  fs.rmSync(dir, {recursive: true});
  const byNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!byNode.has(name)) byNode.set(name, {name, op: (e.args || {}).op_name || '', us: []});
    byNode.get(name).us.push(e.dur);
  }
  const nodes = [];
  for (const n of byNode.values()) {
    // The warm-up runs' events come first: keep the last R of each node.
    nodes.push({name: n.name, op: n.op, ms: median(n.us.slice(-a.runs)) / 1e3});
  }
  fs.writeFileSync(a.profile, JSON.stringify({nodes, runs: a.runs, threads: a.threads}, null, 1) + '\n');
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const {ort, version} = loadOrt();
  if (!fs.existsSync(a.model)) fail('no such model: ' + a.model);
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  const session = await ort.InferenceSession.create(a.model, options);
  if (session.inputNames.length !== 1) {
    fail(a.model + ' has ' + session.inputNames.length + ' inputs (' + session.inputNames.join(', ') +
         '); ort_peer feeds exactly one');
  }
  const name = session.inputNames[0];
  const meta = (session.inputMetadata || [])[0];
  if (meta && meta.isTensor && meta.type !== 'float32') fail('input "' + name + '" is ' + meta.type + ', not float32');
  let shape = a.shape;
  if (shape === null) {
    if (!meta || !meta.isTensor || meta.shape.length === 0) {
      fail('input "' + name + '" has no shape in the model: give --shape, e.g. --shape 1,3,224,224');
    }
    const symbolic = meta.shape.filter((d) => typeof d !== 'number' || d < 0);
    if (symbolic.length) {
      fail('input "' + name + '" has symbolic dims [' + meta.shape.join(',') +
           ']: give its shape with --shape, e.g. --shape 1,3,224,224');
    }
    shape = meta.shape.slice();
  }
  const count = shape.reduce((p, d) => p * d, 1);
  let buf;
  try {
    buf = fs.readFileSync(a.input);
  } catch (e) {
    fail('cannot read input ' + a.input + ': ' + e.message);
  }
  if (buf.length !== count * 4) {
    fail(a.input + ' has ' + buf.length + ' bytes; input "' + name + '" of shape [' + shape.join(',') + '] needs ' +
         count * 4 + ' (raw float32)');
  }
  const data = new Float32Array(count);
  for (let i = 0; i < count; i++) data[i] = buf.readFloatLE(4 * i);
  const feeds = {[name]: new ort.Tensor('float32', data, shape)};

  let result;
  for (let i = 0; i < a.warmup; i++) result = await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.runs; i++) {
    const t0 = process.hrtime.bigint();
    result = await session.run(feeds);
    const t1 = process.hrtime.bigint();
    ms.push(Number(t1 - t0) / 1e6);
  }
  if (a.output) {
    const out = result[session.outputNames[0]];
    if (out.type !== 'float32') fail('output "' + session.outputNames[0] + '" is ' + out.type + ', not float32');
    const o = Buffer.alloc(out.data.length * 4);
    for (let i = 0; i < out.data.length; i++) o.writeFloatLE(out.data[i], 4 * i);
    fs.writeFileSync(a.output, o);
  }
  if (a.profile) await profileNodes(ort, a, options, feeds);
  process.stdout.write(JSON.stringify({
    median_ms: median(ms), min_ms: Math.min(...ms), max_ms: Math.max(...ms), runs: a.runs, threads: a.threads,
    ort_version: version, ms,
  }) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : e));
