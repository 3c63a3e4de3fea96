// Reads one JSON object on stdin, {"message": "…", "key": "0x…" (optional)}, and prints one
// JSON line: the fields the siwe library parsed from the message (or {"error": "…"} when it
// refuses it), and with a key, ethers' personal_sign signature of the message.
'use strict';
const { SiweMessage } = require('siwe');
const { ethers } = require('ethers');

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', async () => {
  const req = JSON.parse(input);
  const out = {};
  try {
    const m = new SiweMessage(req.message);
    out.parsed = {
      domain: m.domain, address: m.address, statement: m.statement, uri: m.uri,
      version: m.version, chainId: m.chainId, nonce: m.nonce, issuedAt: m.issuedAt,
      expirationTime: m.expirationTime,
    };
    // The library's own rendering of what it parsed: the same text, byte for byte.
    out.prepared = m.prepareMessage();
  } catch (e) {
    out.error = String(e && e.message ? e.message : e);
  }
  if (req.key) out.signature = await new ethers.Wallet(req.key).signMessage(req.message);
  console.log(JSON.stringify(out));
});
