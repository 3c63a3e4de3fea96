// A local chain for the EIP-1271 tests: ganache on a free loopback port, a Safe 1.4.1
// (singleton, proxy factory, compatibility fallback handler) deployed from the build artifacts,
// a 1-of-1 and a 2-of-3 Safe. Prints one JSON line with the RPC URL, the Safes and their
// owners' keys, then answers commands on stdin, one JSON line each:
//   {"cmd":"sign","safe":"0x…","hash":"0x…","keys":["0x…",…]}  -> {"signature":"0x…"}
//     the owners' EIP-712 SafeMessage signatures of hash, sorted by owner, concatenated
//   {"cmd":"stop"} (or end of stdin) -> the chain stops and the process exits.
'use strict';
const path = require('path');
const readline = require('readline');
const ganache = require('ganache');
const { ethers } = require('ethers');

const CHAIN_ID = 1337;
const ART = path.join(path.dirname(require.resolve('@safe-global/safe-contracts/package.json')),
  'build', 'artifacts', 'contracts');
const artifact = (rel) => require(path.join(ART, rel));

// Fixed owner keys, so a failing run can be replayed.
const OWNER_KEYS = [1, 2, 3, 4].map((i) => ethers.zeroPadValue(ethers.toBeHex(0x5afe00 + i), 32));

async function deploy(signer, rel, args = []) {
  const a = artifact(rel);
  const f = new ethers.ContractFactory(a.abi, a.bytecode, signer);
  const c = await f.deploy(...args);
  await c.waitForDeployment();
  return c;
}

async function createSafe(factory, singleton, handler, owners, threshold, nonce) {
  const setup = singleton.interface.encodeFunctionData('setup', [
    owners, threshold, ethers.ZeroAddress, '0x', await handler.getAddress(), ethers.ZeroAddress,
    0, ethers.ZeroAddress]);
  const tx = await factory.createProxyWithNonce(await singleton.getAddress(), setup, nonce);
  const receipt = await tx.wait();
  for (const log of receipt.logs) {
    try {
      const ev = factory.interface.parseLog(log);
      if (ev && ev.name === 'ProxyCreation') return ev.args.proxy;
    } catch (e) { /* another contract's log */ }
  }
  throw new Error('no ProxyCreation event');
}

function safeSign(safe, hash, keys) {
  const domain = { chainId: CHAIN_ID, verifyingContract: safe };
  const types = { SafeMessage: [{ name: 'message', type: 'bytes' }] };
  const message = { message: ethers.AbiCoder.defaultAbiCoder().encode(['bytes32'], [hash]) };
  const sigs = keys.map((k) => {
    const w = new ethers.Wallet(k);
    const digest = ethers.TypedDataEncoder.hash(domain, types, message);
    const s = w.signingKey.sign(digest);
    return { owner: w.address.toLowerCase(), sig: ethers.concat([s.r, s.s, ethers.toBeHex(s.v, 1)]) };
  });
  sigs.sort((a, b) => (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0));
  return ethers.concat(sigs.map((s) => s.sig));
}

async function main() {
  const server = ganache.server({
    chain: { chainId: CHAIN_ID, allowUnlimitedContractSize: true },
    wallet: { deterministic: true },
    logging: { quiet: true },
  });
  await new Promise((resolve, reject) =>
    server.listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve())));
  const port = server.address().port;
  const url = `http://127.0.0.1:${port}`;
  const provider = new ethers.JsonRpcProvider(url, CHAIN_ID, { staticNetwork: true });
  const signer = await provider.getSigner(0);
  const singleton = await deploy(signer, 'Safe.sol/Safe.json');
  const factory = await deploy(signer, 'proxies/SafeProxyFactory.sol/SafeProxyFactory.json');
  const handler = await deploy(signer,
    'handler/CompatibilityFallbackHandler.sol/CompatibilityFallbackHandler.json');
  const owners = OWNER_KEYS.map((k) => new ethers.Wallet(k).address);
  const one = await createSafe(factory, singleton, handler, [owners[0]], 1, 1);
  const two = await createSafe(factory, singleton, handler, owners.slice(0, 3), 2, 2);
  provider.destroy();
  console.log(JSON.stringify({
    rpc: url, port, chainId: CHAIN_ID,
    safes: { oneOfOne: { address: one, owners: [0] }, twoOfThree: { address: two, owners: [0, 1, 2] } },
    keys: OWNER_KEYS, owners,
  }));

  const rl = readline.createInterface({ input: process.stdin });
  const stop = async () => { await server.close(); process.exit(0); };
  rl.on('line', (line) => {
    let cmd;
    try { cmd = JSON.parse(line); } catch (e) { console.log(JSON.stringify({ error: 'bad json' })); return; }
    if (cmd.cmd === 'stop') { stop(); return; }
    if (cmd.cmd === 'sign') {
      console.log(JSON.stringify({ signature: safeSign(cmd.safe, cmd.hash, cmd.keys) }));
      return;
    }
    console.log(JSON.stringify({ error: 'unknown command' }));
  });
  rl.on('close', stop);
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
