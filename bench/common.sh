# shellcheck shell=bash disable=SC2034  # (the W_*, E_*, REDIS_* globals are for the callers)
# bench/common.sh: shared by scripts/bench, scripts/bench-auth and scripts/bench-compare.
# Sourced, not run.
# Every process started here is recorded and stopped by its PID at exit; every wait is bounded;
# everything listens on 127.0.0.1 only; temp files live in one directory removed at exit
# (BENCH_KEEP=1 keeps it, for the logs).

. scripts/lib.sh

BENCH_PIDS=()
BENCH_TMP=""
BENCH_EXTRA_DIRS=()
BENCH_WARMUP=${BENCH_WARMUP:-2}     # seconds of wrk before each measured run
BENCH_DURATION=${BENCH_DURATION:-10} # seconds of each measured wrk run
BENCH_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn}
BIN=build-release

bench_log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# bench_alive PID WHAT: exit 1, saying how PID ended, unless it still runs.
bench_alive() {
  kill -0 "$1" 2>/dev/null && return 0
  local rc=0
  wait "$1" 2>/dev/null || rc=$?
  bench_log "$2 (pid $1) is gone: exit status $rc$([ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))")"
  return 1
}

bench_stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    bench_log "pid $pid did not stop on SIGTERM within 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# bench_forget PID: stop it now and drop it from the exit list.
bench_forget() {
  local pid=$1 keep=() p
  bench_stop_pid "$pid"
  for p in "${BENCH_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  BENCH_PIDS=("${keep[@]}")
}

bench_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do
    bench_stop_pid "${BENCH_PIDS[$i]}"
  done
  if [ -n "$BENCH_TMP" ]; then
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
      bench_log "logs kept in $BENCH_TMP ${BENCH_EXTRA_DIRS[*]}"
    else
      rm -rf "$BENCH_TMP" "${BENCH_EXTRA_DIRS[@]}"
    fi
  fi
  exit "$rc"
}

bench_init() {
  BENCH_TMP=$(mktemp -d /tmp/entityd-bench.XXXXXX)
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

# bench_packages PKG...: ensure_packages, waiting (bounded) for another apt's lock, and
# stopping a system nginx that installing the package may have started.
bench_packages() {
  local had_nginx=1
  dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q 'install ok installed' || had_nginx=0
  local conf
  conf=$(mktemp)
  echo 'DPkg::Lock::Timeout "600";' >"$conf"
  APT_CONFIG=$conf ensure_packages "$@"
  rm -f "$conf"
  if [ "$had_nginx" = 0 ] && dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q 'install ok installed'; then
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
      bench_log "installing nginx started the system nginx: stopping it (systemctl stop nginx)"
      systemctl stop nginx || true
    elif [ -s /run/nginx.pid ]; then
      local spid
      spid=$(cat /run/nginx.pid)
      if [ "$(cat /proc/"$spid"/comm 2>/dev/null)" = nginx ]; then
        bench_log "installing nginx started the system nginx (pid $spid): stopping it"
        kill -TERM "$spid" 2>/dev/null || true
      fi
    fi
  fi
}

# bench_build: the release build (build_dir); if the whole tree does not build (say, a test
# that does not compile yet), the three binaries the benchmarks run are enough.
bench_build() {
  build_dir "$BIN" --buildtype=release && return 0
  bench_log "the full release build failed; building only what the benchmarks run"
  ninja -C "$BIN" service/entityd service/tools/entityd-sign tests/bench/entityd-bench-recover >&2
}

# bench_start NAME CMD...: CMD in the background, output in $BENCH_TMP/NAME.log; sets LAST_PID.
bench_start() {
  local name=$1; shift
  "$@" >"$BENCH_TMP/$name.log" 2>&1 &
  LAST_PID=$!
  BENCH_PIDS+=("$LAST_PID")
}

# bench_nginx PATH: the two ceilings, one private nginx (bench/nginx.conf.in, one worker) on
# free loopback ports answering any path with the body entityd at $MAIN answers to GET PATH,
# byte for byte (checked through each port with the same PATH): from memory (`return 200
# '<body>'`, the headline ceiling, NGX_PORT) and from a file (`root` + `try_files`, the ceiling of
# the older runs, kept for history, NGX_FILE_PORT). Sets NGX_PORT, NGX_FILE_PORT, NGX_PID,
# NGX_WORKER (its worker's PID, for BENCH_SCHED; empty if /proc does not tell) and ENTITY_BYTES;
# the headers of entityd's and the in-memory nginx's answers go to
# $BENCH_TMP/entity-headers.txt and $BENCH_TMP/nginx-headers.txt.
bench_nginx() {
  local path=$1 ngx port
  ngx=$(mktemp -d /tmp/entityd-bench-nginx.XXXXXX)
  BENCH_EXTRA_DIRS+=("$ngx")
  chmod 755 "$ngx"
  mkdir -p "$ngx/www" "$ngx/tmp"
  python3 bench/httpc.py get "$MAIN$path" "$ngx/www/entity.json" 2>"$BENCH_TMP/entity-headers.txt"
  chmod 644 "$ngx/www/entity.json"
  ENTITY_BYTES=$(stat -c %s "$ngx/www/entity.json")
  NGX_PORT=$(free_port)
  NGX_FILE_PORT=$(free_port)
  [ "$NGX_FILE_PORT" != "$NGX_PORT" ] || NGX_FILE_PORT=$(free_port)
  # The body inside a single-quoted nginx string: a backslash and a quote escaped; nginx reads
  # `$` as a variable, so a body with one cannot be served this way.
  python3 - "$ngx" "$NGX_PORT" "$NGX_FILE_PORT" <<'PY' || { bench_log "cannot put the body in nginx.conf"; return 1; }
import sys
d, port, fport = sys.argv[1:4]
body = open(d + "/www/entity.json", "rb").read().decode("utf-8")
if "$" in body:
    sys.exit(1)
quoted = body.replace("\\", "\\\\").replace("'", "\\'")
conf = open("bench/nginx.conf.in").read()
conf = conf.replace("@DIR@", d).replace("@FILE_PORT@", fport).replace("@PORT@", port)
open(d + "/nginx.conf", "w").write(conf.replace("@BODY@", quoted))
PY
  bench_start nginx nginx -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/error.log"
  NGX_PID=$LAST_PID
  for port in "$NGX_PORT" "$NGX_FILE_PORT"; do
    wait_http nginx "$NGX_PID" "http://127.0.0.1:$port/" 10 || return 1
    python3 bench/httpc.py get "http://127.0.0.1:$port$path" "$BENCH_TMP/nginx-body.json" \
      2>"$BENCH_TMP/nginx-headers-$port.txt"
    cmp -s "$ngx/www/entity.json" "$BENCH_TMP/nginx-body.json" \
      || { bench_log "nginx on port $port does not serve the same bytes"; return 1; }
  done
  cp "$BENCH_TMP/nginx-headers-$NGX_PORT.txt" "$BENCH_TMP/nginx-headers.txt"
  # nginx's worker: the master's child (from /proc; procps may be missing).
  NGX_WORKER=$(awk '{print $1}' "/proc/$NGX_PID/task/$NGX_PID/children" 2>/dev/null || true)
}

# bench_ceilings LABEL PATHS: one wrk run against each ceiling (the in-memory one first), with
# the worker's thread shares; sets CM_RPS CM_P50 CM_P99 CM_SCHED (nginx from memory) and CF_RPS
# CF_P50 CF_P99 (nginx from a file), and leaves the W_* of the file run.
bench_ceilings() {
  local label=$1 paths=$2
  BENCH_SCHED="${NGX_WORKER:+nginx=$NGX_WORKER}" bench_wrk "$label-mem" \
    "http://127.0.0.1:$NGX_PORT" bench/wrk/paths.lua "$paths" || return 1
  CM_RPS=$W_RPS CM_P50=$W_P50 CM_P99=$W_P99 CM_SCHED=$W_SCHED CM_ERR=$W_ERR CM_BPA=$W_BPA
  BENCH_SCHED="${NGX_WORKER:+nginx=$NGX_WORKER}" bench_wrk "$label-file" \
    "http://127.0.0.1:$NGX_FILE_PORT" bench/wrk/paths.lua "$paths" || return 1
  CF_RPS=$W_RPS CF_P50=$W_P50 CF_P99=$W_P99
}

rss_kib() {
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status"
}

# rss_tree_kib PID: the resident KiB of PID and its children (a supervisor's workers).
rss_tree_kib() {
  local p sum=0
  for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
    sum=$((sum + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}

# http_ok URL: exit 0 if GET URL answers 200.
http_ok() {
  python3 bench/httpc.py get "$1" /dev/null 2>/dev/null
}

# wait_http NAME PID URL SECONDS: until URL answers 200, PID still alive.
wait_http() {
  local name=$1 pid=$2 url=$3 secs=$4 i
  for i in $(seq 1 $((secs * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      bench_log "$name exited early; its log:"
      tail -20 "$BENCH_TMP/$name.log" >&2
      return 1
    fi
    http_ok "$url" && return 0
    sleep 0.1
  done
  bench_log "$name not ready at $url within $secs s"
  return 1
}

# bench_redis: a private redis-server (loopback, no persistence); sets REDIS_PORT, REDIS_PID.
# BENCH_REDIS_NICE=N renices it (as root): a Redis with a CPU of its own, as it is deployed, on
# a machine whose other CPU time wrk and entityd share. BENCH_REDIS_CPU=N gives it CPU N
# alone: this shell, and so every process it starts after, keeps to the other CPUs (taskset),
# and every thread of redis-server to CPU N; SLOWLOG then times Redis's work, not the
# scheduler's turns between it and wrk or entityd.
bench_redis() {
  REDIS_PORT=$(free_port)
  if [ -n "${BENCH_REDIS_CPU:-}" ]; then
    local others
    others=$(seq 0 $(($(nproc) - 1)) | grep -vx "$BENCH_REDIS_CPU" | paste -sd,)
    taskset -pc "$others" $$ >/dev/null
  fi
  bench_start redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" \
    --appendonly no --daemonize no --dir "$BENCH_TMP" --logfile "" --loglevel warning
  REDIS_PID=$LAST_PID
  if [ -n "${BENCH_REDIS_NICE:-}" ]; then
    renice -n "$BENCH_REDIS_NICE" -p "$REDIS_PID" >/dev/null
  fi
  [ -z "${BENCH_REDIS_CPU:-}" ] || taskset -apc "$BENCH_REDIS_CPU" "$REDIS_PID" >/dev/null
  local i
  for i in $(seq 1 100); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  bench_log "redis-server did not answer on port $REDIS_PORT"
  return 1
}

# The rate limits are off (one bench wallet writes far more than 120 a minute) unless
# VAR=VALUE turns them on, as scripts/bench's (g) does; (e) grows one entity past the default
# MAX_MEMBERS_PER_ENTITY, so that is raised too.
# bench_entityd NAME [VAR=VALUE...]: entityd --dev on a free loopback port with the given
# environment; sets E_PORT and E_PID. BENCH_ENTITYD_PREFIX (e.g. "valgrind --tool=callgrind")
# runs it under a tool; BENCH_READY_SECONDS bounds the wait for /readyz.
bench_entityd() {
  local name=$1; shift
  E_PORT=$(free_port)
  # Host and port as flags: valgrind's vgdb names its files after $HOST.
  # shellcheck disable=SC2086  # the prefix is words
  bench_start "$name" env REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
    LOG_LEVEL="$BENCH_LOG_LEVEL" RATE_WRITES_PER_MINUTE=0 ENTITY_CREATE_PER_DAY=0 \
    CONTRIBUTIONS_PER_MEMBER_PER_MINUTE=0 MAX_MEMBERS_PER_ENTITY=1000000000 "$@" \
    ${BENCH_ENTITYD_PREFIX:-} "$BIN/service/entityd" --dev --host 127.0.0.1 --port "$E_PORT"
  E_PID=$LAST_PID
  wait_http "$name" "$E_PID" "http://127.0.0.1:$E_PORT/readyz" "${BENCH_READY_SECONDS:-15}"
}

# sched_snap NAME=PID...: "pid/tid name on-cpu-ns runqueue-wait-ns" per thread, from schedstat.
sched_snap() {
  local np name pid t
  for np in "$@"; do
    name=${np%%=*} pid=${np#*=}
    for t in /proc/"$pid"/task/*; do
      echo "$pid/${t##*/} $name $(cut -d' ' -f1,2 "$t/schedstat" 2>/dev/null)"
    done
  done | sort
}

# sched_diff BEFORE AFTER SECONDS: per thread, the share of the wall time it ran on a CPU and
# the share it waited, runnable, for one: "entityd 80/5, entityd.2 60/30, redis 40/10" (the
# main thread by the process's name, others numbered). Much waiting means the CPUs were busy
# with something else (other processes, or more runnable threads than CPUs).
sched_diff() {
  join "$1" "$2" | awk -v s="$3" '
    NF == 7 { run = ($6 - $3) / (s * 1e7); wait = ($7 - $4) / (s * 1e7)
              if (run < 1 && wait < 1) next
              split($1, pt, "/"); name = $2
              if (pt[1] != pt[2]) name = name "." (++n[$2] + 1)
              out = out sprintf("%s%s %.0f/%.0f", out ? ", " : "", name, run, wait) }
    END { print out }'
}

# bench_wrk LABEL URL SCRIPT [SCRIPT ARGS...]: a warm-up run (BENCH_WARMUP s), then the
# measured run (BENCH_DURATION s) with -t1 -c64 --latency. Sets W_RPS W_P50 W_P99 (ms),
# W_REQS, W_ERR (status + socket errors); the full wrk output goes to $BENCH_TMP/wrk-LABEL.log.
# BENCH_WRK_D overrides the measured duration (e.g. "60s"). With BENCH_SCHED="name=PID ...",
# W_SCHED tells how each thread of those processes spent the measured run (sched_diff).
# BENCH_WRK_PREFIX runs wrk under a command (e.g. "taskset -c 0": wrk on one core).
bench_wrk() {
  local label=$1 url=$2 script=$3; shift 3
  local log="$BENCH_TMP/wrk-$label.log"
  if [ "$BENCH_WARMUP" != 0 ]; then
    # shellcheck disable=SC2086  # the prefix is words
    timeout $((BENCH_WARMUP + 30)) ${BENCH_WRK_PREFIX:-} wrk -t1 -c64 -d"${BENCH_WARMUP}s" -s "$script" "$url" -- "$@" \
      >"$log.warmup" 2>&1 || { bench_log "wrk warm-up for $label failed"; cat "$log.warmup" >&2; return 1; }
  fi
  local d=${BENCH_WRK_D:-${BENCH_DURATION}s} t0 t1 wpid rc=0
  # wrk stops itself after -d; it is in the exit list meanwhile.
  # shellcheck disable=SC2086  # the prefix is words
  ${BENCH_WRK_PREFIX:-} wrk -t1 -c64 -d"$d" --latency -s "$script" "$url" -- "$@" >"$log" 2>&1 &
  wpid=$!
  BENCH_PIDS+=("$wpid")
  local procs="${BENCH_SCHED:-} wrk=$wpid"
  # The thread shares are taken over the run less its first and last 0.3 s (wrk's threads
  # must exist at the first snapshot and still at the second).
  sleep 0.3
  # shellcheck disable=SC2086
  sched_snap $procs >"$BENCH_TMP/sched0"
  t0=$(date +%s.%N)
  local secs ppid=""
  secs=$(awk -v d="${d%s}" 'BEGIN {print (d > 1.2) ? d - 0.6 : d / 2}')
  if [ -n "${BENCH_PERF_PID:-}" ]; then
    # A CPU profile of that process over the same window (BENCH_PERF=1 in scripts/bench).
    perf record -q -e cpu-clock -F 999 -g -p "$BENCH_PERF_PID" -o "$BENCH_TMP/perf-$label.data" \
      -- sleep "$secs" >/dev/null 2>&1 &
    ppid=$!
    BENCH_PIDS+=("$ppid")
  fi
  sleep "$secs"
  # shellcheck disable=SC2086
  sched_snap $procs >"$BENCH_TMP/sched1"
  t1=$(date +%s.%N)
  wait "$wpid" || rc=$?
  bench_forget "$wpid"
  [ -z "$ppid" ] || bench_forget "$ppid"
  [ "$rc" = 0 ] || { bench_log "wrk for $label failed"; cat "$log" >&2; return 1; }
  W_SCHED=$(sched_diff "$BENCH_TMP/sched0" "$BENCH_TMP/sched1" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")
  local line
  line=$(grep '^WRK_RESULT' "$log" | tail -1)
  [ -n "$line" ] || { bench_log "no WRK_RESULT from wrk for $label"; cat "$log" >&2; return 1; }
  W_REQS=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line")
  W_RPS=$(sed -E 's/.* rps=([0-9.]+).*/\1/' <<<"$line")
  W_P50=$(awk -v v="$(sed -E 's/.*p50_us=([0-9]+).*/\1/' <<<"$line")" 'BEGIN {printf "%.2f", v / 1000}')
  W_P99=$(awk -v v="$(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<<"$line")" 'BEGIN {printf "%.2f", v / 1000}')
  W_ERR=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^errors_/) {split($i, kv, "="); s += kv[2]}} END {print s + 0}' <<<"$line")
  # Bytes per answer, headers included: shows that every answer was the full one.
  W_BPA=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^(bytes|requests)=/) {split($i, kv, "="); v[kv[1]] = kv[2]}}
    END {if (v["requests"] > 0) printf "%.0f", v["bytes"] / v["requests"]; else print "-"}' <<<"$line")
  if [ "$W_ERR" != 0 ]; then
    bench_log "WARNING: $label had $W_ERR failed requests (non-2xx/3xx or socket errors): $line"
  fi
}

# sched_sum W_SCHED NAME: the summed on-CPU % of NAME's threads other than its main thread
# (entityd's signature-check pool).
sched_sum() {
  awk -v name="$2" 'BEGIN {RS = ", "} index($1, name ".") == 1 {split($2, rw, "/"); s += rw[1]}
    END {print s + 0}' <<<"$1"
}

# sched_cpu_us W_SCHED NAME RPS: the CPU µs per request NAME's threads (all of them) ran, from
# a run's thread shares: on a loaded machine it moves much less than requests/s do.
sched_cpu_us() {
  awk -v name="$2" -v r="$3" 'BEGIN {RS = ", "}
    $1 == name || index($1, name ".") == 1 {split($2, rw, "/"); s += rw[1]}
    END {if (r > 0 && s > 0) printf "%.2f", s * 1e4 / r; else print "-"}' <<<"$1"
}

# raw_recover SECONDS: runs entityd-bench-recover; sets RAW (recoveries per wall second, one
# thread) and RAW_CPU (per second of its CPU time: the rate with a CPU to itself, which a
# busy machine does not change much).
raw_recover() {
  local out tm
  tm=$(mktemp)
  out=$( { TIMEFORMAT='%R %U %S'; time "$BIN/tests/bench/entityd-bench-recover" "$1"; } 2>"$tm")
  RAW=$(sed -E 's/.*recover_per_sec=([0-9]+).*/\1/' <<<"$out")
  RAW_CPU=$(awk -v r="$RAW" '{printf "%.0f", r * $1 / ($2 + $3)}' "$tm")
  rm -f "$tm"
}

# ratio A B: A/B with two decimals ("-" if B is empty or zero).
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

# steal_s: the CPU time the host has taken from this machine since boot (/proc/stat), seconds.
steal_s() { awk '/^cpu / {printf "%.2f", $9 / 100; exit}' /proc/stat; }

machine_line() {
  local cpu
  cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  echo "$(nproc) CPUs, ${cpu:-unknown CPU}, $(awk '/^MemTotal/ {printf "%.1f GiB RAM", $2 / 1048576}' /proc/meminfo), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
}
