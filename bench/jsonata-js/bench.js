// Throughput of jsonata-js 2.2.2 on three representative transform expressions (envelope, order summary, redaction), the
// same workloads as `cargo run --release -p queuebox-jsonata --example bench`:
// compiled once; per evaluation the payload's JSON text is parsed, bindings are
// built, the expression is evaluated (awaited: evaluate returns a promise in
// 2.x) and the result is serialised back to JSON text. Single-threaded.
//
//   node bench.js [iterations] [rounds]     (defaults 200000 and 3)
'use strict';
const jsonata = require('jsonata');

// Keep in step with jsonata/examples/bench.rs.
const WORKLOADS = [
  ['envelope', '{ "id": $messageId, "type": $topic, "data": $ }', '{"orderId":"1001"}'],
  [
    'order-summary',
    '{ "orderId": id, "customer": customer.name, "total": items.(price * quantity) ~> $sum() }',
    '{"id":"1001","customer":{"name":"Ada"},"items":[{"price":10,"quantity":2},{"price":5,"quantity":3}]}',
  ],
  [
    'redact',
    "$ ~> |$|{}, ['password', 'secret', 'token']|",
    '{"user":"ada","email":"ada@example.com","password":"hunter2","secret":"s3cr3t","token":"abc123","profile":{"plan":"pro","seats":5}}',
  ],
];

const ids = [];
for (let i = 0; i < 1024; i++) ids.push('6b1f0c1e-9a7d-4f0e-8a1c-' + i.toString(16).padStart(12, '0'));

async function runOnce(expr, text, id) {
  const payload = JSON.parse(text);
  const bindings = { messageId: id, topic: 'order.created' };
  const out = await expr.evaluate(payload, bindings);
  return JSON.stringify(out === undefined ? null : out);
}

async function main() {
  const n = parseInt(process.argv[2] || '200000', 10);
  const rounds = Math.max(1, parseInt(process.argv[3] || '3', 10));
  const pkg = require('jsonata/package.json');
  console.log(`jsonata-js ${pkg.version} on node ${process.version}, ${n} evaluations per round, ${rounds} rounds, JSON text in and out`);
  for (const [name, src, text] of WORKLOADS) {
    const expr = jsonata(src);
    console.log(`${name}: ${await runOnce(expr, text, ids[0])}`);
    let sink = 0;
    for (let i = 0; i < n / 10; i++) sink += (await runOnce(expr, text, ids[i % ids.length])).length;
    const rates = [];
    for (let r = 0; r < rounds; r++) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) sink += (await runOnce(expr, text, ids[i % ids.length])).length;
      const secs = Number(process.hrtime.bigint() - start) / 1e9;
      rates.push(n / secs);
    }
    const shown = rates.map((r) => r.toFixed(0)).join(', ');
    rates.sort((a, b) => a - b);
    console.log(`${name}: median ${rates[Math.floor(rates.length / 2)].toFixed(0)} evals/s (rounds: ${shown})${sink < 0 ? '!' : ''}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
