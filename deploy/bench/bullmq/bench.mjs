// BullMQ, the peer of sluice's drain benchmarks (deploy/bench/drainbench runs
// this script; it is not meant to be run by hand, but it can be).
//
//   node bench.mjs load --queue Q --jobs N
//       adds N jobs ({i}) to queue Q with addBulk in chunks of 1000, with
//       removeOnComplete, so a finished job leaves Redis at once. sluice
//       keeps more per finished job (its state record for
//       keys.JobStateTTL and its done listing, the last keys.DoneMax per
//       tenant within keys.DoneRetention): BullMQ's side does less work
//       per job here (docs/perf.md step 25, L24c).
//   node bench.mjs work --queue Q --concurrency C [--max M --duration MS]
//                       [--sink URL] --out FILE
//       runs one Worker on Q until SIGTERM or SIGINT. With --max/--duration it
//       uses BullMQ's own Redis rate limiter {max, duration} (global to the
//       queue, shared by every worker). With --sink each job is POSTed to URL
//       with node:http over keep-alive connections (headers Sluice-Job-Id,
//       Sluice-Tenant, Sluice-Sent-At), as sluice's drainer does, and a non-2xx answer fails
//       the job; without it the processor only records the time.
//       On stop it closes the worker (active jobs finish) and writes one line
//       "<job id>\t<unix ms, fractional>" per job started to FILE.
//
// Redis: BENCH_REDIS (host:port, default 127.0.0.1:6379), BENCH_REDIS_DB
// (default 1, so BullMQ's keys never meet sluice's in db 0), key prefix
// BENCH_BULLMQ_PREFIX (default bench-bull).
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';

const [host, port] = (process.env.BENCH_REDIS || '127.0.0.1:6379').split(':');
const connection = {
  host,
  port: Number(port || 6379),
  db: Number(process.env.BENCH_REDIS_DB || 1),
  maxRetriesPerRequest: null,
};
const prefix = process.env.BENCH_BULLMQ_PREFIX || 'bench-bull';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    queue: { type: 'string' },
    jobs: { type: 'string' },
    concurrency: { type: 'string', default: '1' },
    max: { type: 'string' },
    duration: { type: 'string' },
    sink: { type: 'string' },
    out: { type: 'string' },
  },
});

function fail(msg) {
  console.error(`bench.mjs: ${msg}`);
  process.exit(2);
}

async function load() {
  const n = Number(values.jobs);
  if (!values.queue || !(n > 0)) fail('load needs --queue and --jobs > 0');
  const q = new Queue(values.queue, { connection, prefix });
  const opts = { removeOnComplete: true, removeOnFail: false };
  for (let start = 0; start < n; start += 1000) {
    const batch = [];
    for (let i = start; i < Math.min(n, start + 1000); i++) {
      batch.push({ name: 'job', data: { i }, opts });
    }
    await q.addBulk(batch);
  }
  await q.close();
}

// agent keeps connections to the sink open (node:http with keep-alive is
// several times faster than fetch here).
const agent = new http.Agent({ keepAlive: true });

// sentAt is now as RFC 3339 in UTC with microseconds, as sluice's drainer
// sends Sluice-Sent-At (Date alone has milliseconds).
function sentAt() {
  const t = performance.timeOrigin + performance.now();
  const ms = Math.floor(t);
  const us = String(Math.floor((t - ms) * 1000)).padStart(3, '0');
  return new Date(ms).toISOString().slice(0, -1) + us + 'Z';
}

// post sends one job to the sink and resolves on a 2xx answer.
function post(url, id, tenant, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent,
      headers: {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        'Sluice-Job-Id': id,
        'Sluice-Tenant': tenant,
        'Sluice-Sent-At': sentAt(),
      },
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode >= 200 && res.statusCode < 300
        ? resolve()
        : reject(new Error(`sink answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function work() {
  if (!values.queue || !values.out) fail('work needs --queue and --out');
  const ids = [];
  const times = [];
  const sink = values.sink;
  const tenant = values.queue;
  const processor = async (job) => {
    ids.push(job.id);
    times.push(performance.timeOrigin + performance.now());
    if (!sink) return;
    await post(sink, job.id, tenant, JSON.stringify(job.data));
  };
  const opts = { connection, prefix, concurrency: Number(values.concurrency), removeOnComplete: { count: 0 } };
  if (values.max) {
    opts.limiter = { max: Number(values.max), duration: Number(values.duration) };
  }
  const w = new Worker(values.queue, processor, opts);
  w.on('error', (err) => console.error(`bench.mjs: worker: ${err.message}`));
  await w.waitUntilReady();
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await w.close();
    let out = '';
    for (let i = 0; i < ids.length; i++) out += `${ids[i]}\t${times[i].toFixed(3)}\n`;
    writeFileSync(values.out, out);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  console.log('ready');
}

switch (positionals[0]) {
  case 'load':
    await load();
    break;
  case 'work':
    await work();
    break;
  default:
    fail('usage: node bench.mjs load|work ...');
}
