// sse_read: reads an event stream with the `eventsource` package, as a client would.
// stdin: {"url", "headers": {...} (sent with every connection, Authorization or Last-Event-ID),
//         "count": events to read, "timeoutMs", "reconnect": false}
// stdout: one JSON line per event {"id","type","data"} (a "gap" too), then {"done":true} or
// {"error":...}. Exits when it has read `count` events, or at the deadline.
const { EventSource } = require('eventsource');

let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const req = JSON.parse(input);
  let seen = 0;
  const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
  const headers = req.headers || {};
  const es = new EventSource(req.url, {
    fetch: (url, init) => fetch(url, { ...init, headers: { ...init.headers, ...headers } }),
  });
  const finish = (o) => {
    out(o);
    es.close();
    process.exit(0);
  };
  const timer = setTimeout(() => finish({ error: 'timeout', seen }), req.timeoutMs || 10000);
  es.onopen = () => out({ open: true });
  const types = req.types || [];
  const on = (ev) => {
    out({ id: ev.lastEventId, type: ev.type, data: JSON.parse(ev.data) });
    if (++seen >= req.count) {
      clearTimeout(timer);
      finish({ done: true });
    }
  };
  for (const t of ['message', 'gap', ...types]) es.addEventListener(t, on);
  es.onerror = (e) => {
    if (req.reconnect === false) {
      clearTimeout(timer);
      finish({ error: 'closed', status: e && e.code, seen });
    }
  };
});
