#!/usr/bin/env python3
"""bare_floor.py: two RESP streams from one MONITOR capture, for scripts/bench-progress.

usage: bare_floor.py MONITOR_FILE SCRIPT_OUT BARE_OUT [FORWARD_OUT NOOP_OUT]

SCRIPT_OUT is what the clients sent, as they sent it (the EVALSHA calls and anything else,
MULTI blocks whole); BARE_OUT is the same with every script call replaced by the commands the
script ran (the `[db lua]` lines MONITOR shows after it), wrapped in MULTI ... EXEC so that
they stay one atomic write: the award's commands sent bare. Replayed with `redis-cli --pipe`
on two copies of the same data, the two cost Redis what the scripts cost and what their
commands alone cost, through the same transport. Administrative commands (the bench's and the
heartbeat's) are left out of both. Prints one line: key=value counts.

FORWARD_OUT is BARE_OUT with each MULTI ... EXEC that stands for script calls sent instead as
one call of FORWARD, a script with no logic that runs the commands it is given in ARGV
(each command's argument count, then the command): what running those commands costs from
Lua at the least, with nothing computed. NOOP_OUT calls NOOP with the same arguments, a
script that returns at once: what handing them to Lua costs, so that FORWARD less NOOP is what
redis.call alone costs. Both scripts are written beside them (FORWARD_OUT.lua, NOOP_OUT.lua),
to be loaded first (redis-cli -x SCRIPT LOAD <FILE).
"""
import hashlib
import sys

FORWARD = (b'local A, call, tonumber, unpack = ARGV, redis.call, tonumber, unpack\n'
           b'local i, n = 1, #A\n'
           b'while i <= n do\n'
           b'  local c = tonumber(A[i])\n'
           b'  call(unpack(A, i + 1, i + c))\n'
           b'  i = i + c + 1\n'
           b'end\n'
           b'return 0\n')
NOOP = b'return 0\n'

SKIP = {b'ping', b'info', b'client', b'hello', b'config', b'command', b'subscribe',
        b'psubscribe', b'unsubscribe', b'punsubscribe', b'monitor', b'auth', b'select',
        b'script', b'readonly', b'slowlog', b'latency', b'memory', b'debug', b'save',
        b'bgsave', b'dbsize'}
SCRIPTS = {b'eval', b'evalsha', b'eval_ro', b'evalsha_ro', b'fcall', b'fcall_ro'}
ESC = {ord('n'): 10, ord('r'): 13, ord('t'): 9, ord('a'): 7, ord('b'): 8,
       ord('\\'): 92, ord('"'): 34}


def parse_line(line):
    """'<ts> [<db> <client>] "a" "b"' -> (client, [bytes...]); sdscatrepr's escapes undone."""
    lb = line.find(b'[')
    rb = line.find(b']', lb)
    if lb < 0 or rb < 0:
        return None, None
    client = line[lb + 1:rb].split(b' ', 1)[-1]
    args, i, n = [], rb + 1, len(line)
    while i < n:
        if line[i] != 34:  # '"'
            i += 1
            continue
        i += 1
        out = bytearray()
        while i < n and line[i] != 34:
            c = line[i]
            if c == 92 and i + 1 < n:
                e = line[i + 1]
                if e == ord('x') and i + 3 < n:
                    out.append(int(line[i + 2:i + 4], 16))
                    i += 4
                    continue
                out.append(ESC.get(e, e))
                i += 2
                continue
            out.append(c)
            i += 1
        args.append(bytes(out))
        i += 1
    return client, args


def resp(argv):
    parts = [b'*%d\r\n' % len(argv)]
    for a in argv:
        parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(parts)


def units(lines):
    """Yields each unit in the order Redis ran it: a list of [argv, [script argvs]] records,
    one record, or a client's whole MULTI ... EXEC (MONITOR shows its commands at EXEC). A
    unit goes out at the next client's line, once the script lines after it are in."""
    open_multi = {}
    last, ready = None, None
    for line in lines:
        client, argv = parse_line(line.rstrip(b'\n'))
        if not argv:
            continue
        if client == b'lua':
            if last is not None:
                last[1].append(argv)
            continue
        if ready is not None:
            yield ready
            ready = None
        name = argv[0].lower()
        if name in SKIP:
            last = None
            continue
        rec = [argv, []]
        last = rec if name in SCRIPTS else None
        if name == b'multi':
            open_multi[client] = [rec]
        elif client in open_multi:
            open_multi[client].append(rec)
            if name in (b'exec', b'discard'):
                ready = open_multi.pop(client)
        else:
            ready = [rec]
    if ready is not None:
        yield ready


def forwarded(sha, commands):
    """One EVALSHA of sha whose arguments are the commands, each after its argument count."""
    argv = [b'EVALSHA', sha, b'0']
    for c in commands:
        argv.append(b'%d' % len(c))
        argv.extend(c)
    return argv


def main():
    src, script_out, bare_out = sys.argv[1:4]
    fwd_out, noop_out = (sys.argv[4:6] + [None, None])[:2]
    fwd_sha = hashlib.sha1(FORWARD).hexdigest().encode()
    noop_sha = hashlib.sha1(NOOP).hexdigest().encode()
    n = {'units': 0, 'commands': 0, 'scripts': 0, 'script_commands': 0, 'bare_commands': 0,
         'forward_calls': 0}
    fo = open(fwd_out, 'wb') if fwd_out else None
    no = open(noop_out, 'wb') if noop_out else None
    for path, text in ((fwd_out, FORWARD), (noop_out, NOOP)):
        if path:
            with open(path + '.lua', 'wb') as lua:
                lua.write(text)
    with open(src, 'rb') as f, open(script_out, 'wb') as so, open(bare_out, 'wb') as bo:
        for unit in units(f):
            n['units'] += 1
            has_script = any(r[0][0].lower() in SCRIPTS for r in unit)
            bare = []
            for argv, inner in unit:
                so.write(resp(argv))
                n['commands'] += 1
                name = argv[0].lower()
                if name in SCRIPTS:
                    n['scripts'] += 1
                    n['script_commands'] += len(inner)
                    bare.extend(inner)
                elif name not in (b'multi', b'exec', b'discard'):
                    bare.append(argv)
            if fo and has_script and bare:
                fo.write(resp(forwarded(fwd_sha, bare)))
                no.write(resp(forwarded(noop_sha, bare)))
                n['forward_calls'] += 1
            elif fo:
                wrapped = bare
                if unit[0][0][0].lower() == b'multi' and bare:
                    wrapped = [[b'MULTI']] + bare + [[b'EXEC']]
                for argv in wrapped:
                    fo.write(resp(argv))
            if (has_script or unit[0][0][0].lower() == b'multi') and bare:
                bare = [[b'MULTI']] + bare + [[b'EXEC']]
            for argv in bare:
                bo.write(resp(argv))
                n['bare_commands'] += 1
    for out in (fo, no):
        if out:
            out.close()
    print(' '.join('%s=%d' % kv for kv in n.items()))


if __name__ == '__main__':
    main()
