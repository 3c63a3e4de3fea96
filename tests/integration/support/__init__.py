"""The integration tests' support, one job a module: base (paths, environment, deadlines, the
process registry, bounded waits, free ports), resp (a RESP client), web (HTTP clients and raw
connections), procs (redis-server and entityd, stopped by PID), wallets (Keccak, EIP-55, keys
and signing), metrics (/metrics and Redis's counters), faultproxy (the one TCP fault proxy), chain (the
join rules' test chain: ganache with test tokens, behind the fault proxy) and runner (the test base class and the runner). harness.py re-exports them all."""
