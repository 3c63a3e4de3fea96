"""rpc_standin: a JSON-RPC endpoint that answers the calls join rules make as a chain would, for
scripts/bench-join (stdlib only). It is not a chain: it runs no EVM. It decodes each eth_call of
Multicall3's aggregate3 with the ABI, answers each inner call from the call's own arguments, and
encodes the results as aggregate3 returns them, so that the service's encoder and decoder do
the same work as against a node.

  rpc_standin.py PORT COUNT_FILE

Answers: balanceOf(address) and balanceOf(address,uint256) (ERC-20, ERC-721, ERC-1155) and
getEthBalance(address): 10^18 for every address; ownerOf(uint256): the address whose last 8
bytes are the token id; getBlockNumber(): a block that grows by one a second. eth_chainId and
eth_blockNumber answer too; anything else is a JSON-RPC error. Batches (JSON arrays) are
answered in order. Every eth_call is counted; the count is written to COUNT_FILE after each one
(the bench reads it), as "<eth_calls> <inner calls>".
"""
import http.server
import json
import sys
import threading
import time

AGGREGATE3 = bytes.fromhex("82ad56cb")
BALANCE_OF = bytes.fromhex("70a08231")
BALANCE_OF_1155 = bytes.fromhex("00fdd58e")
OWNER_OF = bytes.fromhex("6352211e")
ETH_BALANCE = bytes.fromhex("4d2301cc")
BLOCK_NUMBER = bytes.fromhex("42cbb15c")
START = time.time()
ONE_ETHER = 10 ** 18


class Counter:
    def __init__(self, path):
        self.path, self.calls, self.inner, self.lock = path, 0, 0, threading.Lock()
        with open(path, "w") as f:
            f.write("0 0\n")

    def add(self, inner):
        with self.lock:
            self.calls += 1
            self.inner += inner
            with open(self.path, "w") as f:
                f.write("%d %d\n" % (self.calls, self.inner))


def word(b, at):
    if at + 32 > len(b):
        raise ValueError("short")
    return int.from_bytes(b[at:at + 32], "big")


def decode_calls(data):
    """aggregate3's argument: (address target, bool allowFailure, bytes callData)[]"""
    if data[:4] != AGGREGATE3:
        raise ValueError("not aggregate3")
    args = data[4:]
    arr = word(args, 0)
    n = word(args, arr)
    if n > 100000:
        raise ValueError("too many calls")
    base = arr + 32
    calls = []
    for i in range(n):
        t = base + word(args, base + 32 * i)
        target = args[t + 12:t + 32]
        off = t + word(args, t + 64)
        ln = word(args, off)
        calls.append((target, args[off + 32:off + 32 + ln]))
    return calls


def answer(target, cd):
    """(success, return data) of one inner call"""
    sel, rest = cd[:4], cd[4:]
    if sel in (BALANCE_OF, ETH_BALANCE) and len(rest) == 32:
        return True, ONE_ETHER.to_bytes(32, "big")
    if sel == BALANCE_OF_1155 and len(rest) == 64:
        return True, ONE_ETHER.to_bytes(32, "big")
    if sel == OWNER_OF and len(rest) == 32:
        return True, bytes(12) + bytes(12) + rest[24:32]
    if sel == BLOCK_NUMBER and not rest:
        return True, (1000 + int(time.time() - START)).to_bytes(32, "big")
    return False, b""


def encode_results(results):
    """(bool success, bytes returnData)[] as aggregate3 returns it"""
    heads, tails, at = [], [], 32 * len(results)
    for ok, ret in results:
        pad = ret + bytes(-len(ret) % 32)
        tail = (1 if ok else 0).to_bytes(32, "big") + (64).to_bytes(32, "big") + \
            len(ret).to_bytes(32, "big") + pad
        heads.append(at.to_bytes(32, "big"))
        tails.append(tail)
        at += len(tail)
    return (32).to_bytes(32, "big") + len(results).to_bytes(32, "big") + b"".join(heads) + \
        b"".join(tails)


def handle(req, counter):
    rid, method, params = req.get("id"), req.get("method"), req.get("params") or []
    try:
        if method == "eth_chainId":
            return {"jsonrpc": "2.0", "id": rid, "result": "0x539"}
        if method == "eth_blockNumber":
            return {"jsonrpc": "2.0", "id": rid, "result": hex(1000 + int(time.time() - START))}
        if method == "eth_call":
            data = bytes.fromhex(params[0]["data"][2:])
            calls = decode_calls(data)
            out = encode_results([answer(t, cd) for t, cd in calls])
            counter.add(len(calls))
            return {"jsonrpc": "2.0", "id": rid, "result": "0x" + out.hex()}
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": str(e)}}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}}


def main():
    port, counter = int(sys.argv[1]), Counter(sys.argv[2])

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                req = json.loads(body)
                out = [handle(r, counter) for r in req] if isinstance(req, list) else \
                    handle(req, counter)
            except ValueError:
                out = {"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32700, "message": "parse error"}}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
