// A Standard Webhooks receiver for the integration tests: verifies every delivery with the
// `standardwebhooks` package and records what it got; what it answers is told per path.
//   node webhook_receiver.cjs [port]     prints {"port": N} once listening on 127.0.0.1
// Control (same server):
//   POST /_ctl {"path": "/a", "secrets": ["whsec_…"], "script": ["500", "ok"], "default": "ok"}
//       answers, in turn: "ok" (204), "<status>" (that status), "<429|503>:<s>" (with
//       Retry-After: s), "stall" (never answers), "reset" (the connection reset)
//   GET /_got?path=/a  every request to /a: {at, id, timestamp, signatures, type, eventId,
//       body, verified: [index of each secret whose signature verified], answer}
'use strict';
const http = require('http');
const { Webhook } = require('standardwebhooks');

const paths = new Map(); // path -> {secrets, script, default, got}
function slot(p) {
  if (!paths.has(p)) paths.set(p, { secrets: [], script: [], default: 'ok', got: [] });
  return paths.get(p);
}

function readBody(req) {
  return new Promise((resolve) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

const stalled = [];
const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const body = await readBody(req);
  if (url.pathname === '/_ctl') {
    const c = JSON.parse(body);
    const s = slot(c.path);
    if (c.secrets) s.secrets = c.secrets;
    if (c.script) s.script = c.script.slice();
    if (c.default) s.default = c.default;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
    return;
  }
  if (url.pathname === '/_got') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(slot(url.searchParams.get('path')).got));
    return;
  }
  const s = slot(url.pathname);
  const h = {
    'webhook-id': req.headers['webhook-id'] || '',
    'webhook-timestamp': req.headers['webhook-timestamp'] || '',
    'webhook-signature': req.headers['webhook-signature'] || '',
  };
  const verified = [];
  s.secrets.forEach((secret, i) => {
    try {
      new Webhook(secret).verify(body, h);
      verified.push(i);
    } catch (e) { /* not signed with this one */ }
  });
  let parsed = {};
  try { parsed = JSON.parse(body); } catch (e) { /* recorded as is */ }
  const answer = s.script.length ? s.script.shift() : s.default;
  s.got.push({
    at: Date.now(), id: h['webhook-id'], timestamp: h['webhook-timestamp'],
    signatures: h['webhook-signature'].split(' ').filter((x) => x), type: parsed.type,
    eventId: parsed.data && parsed.data.eventId, contentType: req.headers['content-type'],
    body, verified, answer,
  });
  if (answer === 'stall') {
    stalled.push(res);
    return;
  }
  if (answer === 'reset') {
    req.socket.resetAndDestroy();
    return;
  }
  if (answer === 'ok') {
    res.writeHead(204);
    res.end();
    return;
  }
  const [status, after] = answer.split(':');
  const headers = { 'content-type': 'text/plain' };
  if (after) headers['retry-after'] = after;
  res.writeHead(Number(status), headers);
  res.end('refused by the test receiver (' + answer + ')');
});
server.keepAliveTimeout = 1000;
server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.on('SIGTERM', () => process.exit(0));
