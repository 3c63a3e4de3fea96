"""rpc_standin: a JSON-RPC stand-in for the join rules' scale benchmark. Answers eth_call of
Multicall3's aggregate3 the way a chain would, decoding every call of the batch with the ABI and
answering each deterministically from what it names, so a benchmark can tell which members pass
without a chain:
  balanceOf(owner) (ERC-20, ERC-721)   the owner's last byte (0..255)
  balanceOf(owner, id) (ERC-1155)      (the owner's last byte + id) % 256
  getEthBalance(addr)                  the address's last byte, in wei
  ownerOf(id)                          the address 0x00…00<id's last byte>; id 0 reverts
  getBlockNumber()                     the count of eth_calls so far (each batch its own block)
  anything else                        a failed call (success false, no data)
It also answers eth_chainId and eth_blockNumber. Every eth_call is counted, and so are the calls
in them: GET /stats -> {"ethCalls","batchedCalls","requests"}. stdlib only, loopback only.

usage: rpc_standin.py [--port N] [--chain-id N] [--latency-ms MS]
Prints one JSON line {"rpc","port"} when listening; stops on SIGTERM or SIGINT.
"""
import argparse
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AGGREGATE3 = bytes.fromhex('82ad56cb')
BALANCE_OF = bytes.fromhex('70a08231')
BALANCE_OF_1155 = bytes.fromhex('00fdd58e')
OWNER_OF = bytes.fromhex('6352211e')
ETH_BALANCE = bytes.fromhex('4d2301cc')
BLOCK_NUMBER = bytes.fromhex('42cbb15c')


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.eth_calls = 0
        self.batched = 0
        self.requests = 0


def word(b, at):
    if at + 32 > len(b):
        raise ValueError('short')
    return int.from_bytes(b[at:at + 32], 'big')


def decode_aggregate3(data):
    """[(target int, callData bytes)] of aggregate3's argument (data after the selector)."""
    base = word(data, 0)
    n = word(data, base)
    head = base + 32
    if n > 1 << 20:
        raise ValueError('too many calls')
    calls = []
    for i in range(n):
        t = head + word(data, head + 32 * i)
        target = word(data, t)
        at = t + word(data, t + 64)
        ln = word(data, at)
        if at + 32 + ln > len(data):
            raise ValueError('short call data')
        calls.append((target, data[at + 32:at + 32 + ln]))
    return calls


def answer_call(target, cd, block):
    """(success, return bytes) of one call, deterministically."""
    sel, args = cd[:4], cd[4:]
    w = lambda k: word(args, 32 * k)  # noqa: E731
    try:
        if sel == BLOCK_NUMBER:
            return True, block.to_bytes(32, 'big')
        if sel == ETH_BALANCE or sel == BALANCE_OF:
            return True, (w(0) & 0xff).to_bytes(32, 'big')
        if sel == BALANCE_OF_1155:
            return True, (((w(0) & 0xff) + w(1)) % 256).to_bytes(32, 'big')
        if sel == OWNER_OF:
            tid = w(0)
            if tid == 0:
                return False, b''
            return True, (tid & 0xff).to_bytes(32, 'big')
    except ValueError:
        pass
    return False, b''


def encode_results(results):
    """aggregate3's return data: (bool success, bytes returnData)[]."""
    n = len(results)
    tuples = []
    for ok, ret in results:
        padded = ret + b'\0' * (-len(ret) % 32)
        tuples.append((1 if ok else 0).to_bytes(32, 'big') + (64).to_bytes(32, 'big') +
                      len(ret).to_bytes(32, 'big') + padded)
    offsets, at = [], 32 * n
    for t in tuples:
        offsets.append(at.to_bytes(32, 'big'))
        at += len(t)
    return ((32).to_bytes(32, 'big') + n.to_bytes(32, 'big') + b''.join(offsets) +
            b''.join(tuples))


def make_handler(counters, chain_id, latency_s):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def _send(self, status, body):
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            if self.path != '/stats':
                return self._send(404, {'error': 'not found'})
            with counters.lock:
                self._send(200, {'ethCalls': counters.eth_calls,
                                 'batchedCalls': counters.batched,
                                 'requests': counters.requests})

        def do_POST(self):
            n = int(self.headers.get('Content-Length') or 0)
            try:
                req = json.loads(self.rfile.read(n))
            except ValueError:
                return self._send(400, {'error': 'bad json'})
            if latency_s:
                time.sleep(latency_s)
            with counters.lock:
                counters.requests += 1
            if isinstance(req, list):
                return self._send(200, [self.one(r) for r in req])
            return self._send(200, self.one(req))

        def one(self, req):
            rid, method = req.get('id'), req.get('method')
            if method == 'eth_chainId':
                return {'jsonrpc': '2.0', 'id': rid, 'result': hex(chain_id)}
            if method == 'eth_blockNumber':
                with counters.lock:
                    return {'jsonrpc': '2.0', 'id': rid, 'result': hex(counters.eth_calls)}
            if method != 'eth_call':
                return {'jsonrpc': '2.0', 'id': rid,
                        'error': {'code': -32601, 'message': 'method not found'}}
            try:
                data = bytes.fromhex(req['params'][0]['data'][2:])
                if data[:4] != AGGREGATE3:
                    raise ValueError('not aggregate3')
                calls = decode_aggregate3(data[4:])
            except (ValueError, KeyError, IndexError, TypeError):
                return {'jsonrpc': '2.0', 'id': rid,
                        'error': {'code': 3, 'message': 'execution reverted'}}
            with counters.lock:
                counters.eth_calls += 1
                counters.batched += len(calls)
                block = counters.eth_calls
            out = encode_results([answer_call(t, cd, block) for t, cd in calls])
            return {'jsonrpc': '2.0', 'id': rid, 'result': '0x' + out.hex()}

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--chain-id', type=int, default=1)
    ap.add_argument('--latency-ms', type=int, default=0)
    args = ap.parse_args()
    counters = Counters()
    srv = ThreadingHTTPServer(('127.0.0.1', args.port),
                              make_handler(counters, args.chain_id, args.latency_ms / 1000.0))
    srv.daemon_threads = True
    port = srv.server_address[1]
    print(json.dumps({'rpc': 'http://127.0.0.1:%d' % port, 'port': port}), flush=True)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=srv.shutdown).start())
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    srv.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
