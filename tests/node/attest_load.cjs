// Load for test_attest's loop check: `connections` keep-alive connections, each asking the
// paths in turn (one request at a time per connection) until `ms` milliseconds pass.
// usage: node attest_load.cjs <port> <paths.json> <connections> <ms>
// stdout, at the end: {"requests": n, "statuses": {"200": n, ...}}
'use strict';
const fs = require('node:fs');
const http = require('node:http');

const [port, pathsFile, conns, ms] = process.argv.slice(2);
const paths = JSON.parse(fs.readFileSync(pathsFile, 'utf8'));
const deadline = Date.now() + Number(ms);
const statuses = {};
let requests = 0;

function loop(agent, i) {
  if (Date.now() >= deadline) return Promise.resolve();
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port: Number(port), path: paths[i % paths.length], agent },
      (res) => {
        res.resume();
        res.on('end', () => {
          requests++;
          statuses[res.statusCode] = (statuses[res.statusCode] || 0) + 1;
          resolve(loop(agent, i + 1));
        });
      });
    req.on('error', () => {
      statuses.error = (statuses.error || 0) + 1;
      resolve(loop(agent, i + 1));
    });
  });
}

const runs = [];
for (let c = 0; c < Number(conns); c++) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  runs.push(loop(agent, c * 7));
}
// a line once every connection has started: the probe measures from here
process.stdout.write('started\n');
Promise.all(runs).then(() => {
  process.stdout.write(JSON.stringify({ requests, statuses }) + '\n');
});
