// A local chain for the join-rule tests: ganache in-process on the loopback port given as the
// first argument (0 or none: a free one), chain id 1337, the deterministic wallet. Compiles with
// solc, at run time, the contracts of tests/node/contracts: a batch reader with the interface of
// Multicall3 (aggregate3, getEthBalance, getBlockNumber) and three tokens built on
// OpenZeppelin 5 (ERC-20, ERC-721, ERC-1155) whose owner mints, burns and moves anyone's
// holdings. Deploys them and prints one JSON line:
//   {"rpc","port","chainId","multicall","erc20","erc721","erc1155","funder"}
// then answers commands on stdin, one JSON line each, in order ({"error":…} when one fails):
//   {"cmd":"mint","token":"erc20"|"erc721"|"erc1155","to","amount"?,"tokenId"?} -> {"block"}
//   {"cmd":"burn","token","from"?,"amount"?,"tokenId"?}                         -> {"block"}
//   {"cmd":"transfer","token","from","to","amount"?,"tokenId"?}                  -> {"block"}
//   {"cmd":"send","to","amount"}         native wei from the funder            -> {"block"}
//   {"cmd":"setBalance","address","amount"}  native wei, set outright            -> {"block"}
//   {"cmd":"balance","token"|"native","address","tokenId"?} -> {"balance"} (erc721 with a
//                                                     tokenId: {"owner"}, null when none)
//   {"cmd":"mine"}                                                              -> {"block"}
//   {"cmd":"block"}                                                             -> {"block"}
//   {"cmd":"stop"} (or end of stdin): the chain stops and the process exits.
// Amounts and token ids are decimal strings.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const ganache = require('ganache');
const solc = require('solc');
const { ethers } = require('ethers');

const CHAIN_ID = 1337;
const CONTRACTS = path.join(__dirname, 'contracts');
const NODE_MODULES = path.join(__dirname, 'node_modules');
const FILES = ['JoinMulticall.sol', 'TestERC20.sol', 'TestERC721.sol', 'TestERC1155.sol'];

// OpenZeppelin 5.7 writes mcopy (Cancun) in the inline assembly of a few utilities that ERC-721
// and ERC-1155 import; ganache 7.9 runs at most Shanghai. Such a file is compiled with each
// assembly block that uses mcopy given an equivalent Yul function of the same effect (a byte
// loop, backwards when the regions overlap that way). node_modules itself is never changed.
const MCOPY_SHIM = ' function mcopy_shanghai(mc_d, mc_s, mc_n) { switch gt(mc_d, mc_s) ' +
  'case 0 { for { let mc_i := 0 } lt(mc_i, mc_n) { mc_i := add(mc_i, 1) } ' +
  '{ mstore8(add(mc_d, mc_i), byte(0, mload(add(mc_s, mc_i)))) } } ' +
  'default { for { let mc_i := mc_n } gt(mc_i, 0) { mc_i := sub(mc_i, 1) } ' +
  '{ mstore8(add(mc_d, sub(mc_i, 1)), byte(0, mload(add(mc_s, sub(mc_i, 1))))) } } } ';

function withoutMcopy(text) {
  if (!/\bmcopy\(/.test(text)) return text;
  let out = '';
  let at = 0;
  const re = /assembly\s*(\("memory-safe"\)\s*)?\{/g;
  let m;
  while ((m = re.exec(text))) {
    const open = m.index + m[0].length;
    let depth = 1;
    let i = open;
    while (i < text.length && depth) {
      if (text[i] === '{') depth++;
      else if (text[i] === '}') depth--;
      i++;
    }
    const body = text.slice(open, i - 1);
    if (!/\bmcopy\(/.test(body)) continue;
    out += text.slice(at, open) + MCOPY_SHIM + body.replace(/\bmcopy\(/g, 'mcopy_shanghai(') + '}';
    at = i;
    re.lastIndex = i;
  }
  return out + text.slice(at);
}

function compile() {
  const sources = {};
  for (const f of FILES) sources[f] = { content: fs.readFileSync(path.join(CONTRACTS, f), 'utf8') };
  const input = {
    language: 'Solidity',
    sources,
    settings: {
      // ganache 7.9 runs up to Shanghai.
      evmVersion: 'shanghai',
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
    },
  };
  const findImports = (p) => {
    const file = path.join(NODE_MODULES, p);
    if (!file.startsWith(NODE_MODULES + path.sep)) return { error: 'outside node_modules' };
    try {
      return { contents: withoutMcopy(fs.readFileSync(file, 'utf8')) };
    } catch (e) {
      return { error: 'not found: ' + p };
    }
  };
  const out = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (out.errors || []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const get = (file, name) => {
    const c = out.contracts[file][name];
    return { abi: c.abi, bytecode: '0x' + c.evm.bytecode.object };
  };
  return {
    multicall: get('JoinMulticall.sol', 'JoinMulticall'),
    erc20: get('TestERC20.sol', 'TestERC20'),
    erc721: get('TestERC721.sol', 'TestERC721'),
    erc1155: get('TestERC1155.sol', 'TestERC1155'),
  };
}

async function deploy(signer, art) {
  const f = new ethers.ContractFactory(art.abi, art.bytecode, signer);
  const c = await f.deploy();
  await c.waitForDeployment();
  return c;
}

async function main() {
  const wanted = Number(process.argv[2] || 0);
  const arts = compile();
  const server = ganache.server({
    chain: { chainId: CHAIN_ID, allowUnlimitedContractSize: true },
    wallet: { deterministic: true },
    logging: { quiet: true },
  });
  await new Promise((resolve, reject) =>
    server.listen(wanted, '127.0.0.1', (err) => (err ? reject(err) : resolve())));
  const port = server.address().port;
  const url = `http://127.0.0.1:${port}`;
  const provider = new ethers.JsonRpcProvider(url, CHAIN_ID, { staticNetwork: true });
  const signer = await provider.getSigner(0);
  const c = {};
  for (const k of ['multicall', 'erc20', 'erc721', 'erc1155']) c[k] = await deploy(signer, arts[k]);
  const addr = {};
  for (const k of Object.keys(c)) addr[k] = (await c[k].getAddress()).toLowerCase();
  console.log(JSON.stringify({ rpc: url, port, chainId: CHAIN_ID, ...addr,
    funder: (await signer.getAddress()).toLowerCase() }));

  // eth_blockNumber itself: ethers' getBlockNumber may answer from a cache.
  const blockNumber = async () => Number(await provider.send('eth_blockNumber', []));
  const mined = async (txp) => {
    const receipt = await (await txp).wait();
    return { block: receipt.blockNumber };
  };
  const token = (name) => {
    if (!['erc20', 'erc721', 'erc1155'].includes(name)) throw new Error('unknown token ' + name);
    return c[name];
  };
  const run = async (cmd) => {
    switch (cmd.cmd) {
      case 'mint': {
        const t = token(cmd.token);
        if (cmd.token === 'erc20') return mined(t.mint(cmd.to, BigInt(cmd.amount)));
        if (cmd.token === 'erc721') return mined(t.mint(cmd.to, BigInt(cmd.tokenId)));
        return mined(t.mint(cmd.to, BigInt(cmd.tokenId), BigInt(cmd.amount)));
      }
      case 'burn': {
        const t = token(cmd.token);
        if (cmd.token === 'erc20') return mined(t.burn(cmd.from, BigInt(cmd.amount)));
        if (cmd.token === 'erc721') return mined(t.burn(BigInt(cmd.tokenId)));
        return mined(t.burn(cmd.from, BigInt(cmd.tokenId), BigInt(cmd.amount)));
      }
      case 'transfer': {
        const t = token(cmd.token);
        if (cmd.token === 'erc20') return mined(t.move(cmd.from, cmd.to, BigInt(cmd.amount)));
        if (cmd.token === 'erc721') return mined(t.move(cmd.from, cmd.to, BigInt(cmd.tokenId)));
        return mined(t.move(cmd.from, cmd.to, BigInt(cmd.tokenId), BigInt(cmd.amount)));
      }
      case 'send':
        return mined(signer.sendTransaction({ to: cmd.to, value: BigInt(cmd.amount) }));
      case 'setBalance':
        await provider.send('evm_setAccountBalance', [cmd.address, ethers.toQuantity(BigInt(cmd.amount))]);
        return { block: await blockNumber() };
      case 'balance': {
        if (cmd.token === 'native' || cmd.native)
          return { balance: (await provider.getBalance(cmd.address)).toString() };
        const t = token(cmd.token);
        if (cmd.token === 'erc20') return { balance: (await t.balanceOf(cmd.address)).toString() };
        if (cmd.token === 'erc721') {
          if (cmd.tokenId === undefined)
            return { balance: (await t.balanceOf(cmd.address)).toString() };
          try {
            return { owner: (await t.ownerOf(BigInt(cmd.tokenId))).toLowerCase() };
          } catch (e) {
            return { owner: null };
          }
        }
        return { balance: (await t.balanceOf(cmd.address, BigInt(cmd.tokenId))).toString() };
      }
      case 'mine':
        await provider.send('evm_mine', []);
        return { block: await blockNumber() };
      case 'block':
        return { block: await blockNumber() };
      default:
        throw new Error('unknown command');
    }
  };

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    provider.destroy();
    await server.close();
    process.exit(0);
  };
  // One command at a time, answered in order.
  let queue = Promise.resolve();
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    queue = queue.then(async () => {
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (e) {
        console.log(JSON.stringify({ error: 'bad json' }));
        return;
      }
      if (cmd.cmd === 'stop') return stop();
      try {
        console.log(JSON.stringify(await run(cmd)));
      } catch (e) {
        console.log(JSON.stringify({ error: String((e && e.shortMessage) || (e && e.message) || e) }));
      }
    });
  });
  rl.on('close', () => { queue = queue.then(stop); });
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
