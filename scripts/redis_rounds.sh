#!/usr/bin/env bash
# Single Redis, before against after, interleaved: experiment 8 and experiment 9's two-worker
# long-poll rows (the bench's tuned client), or the EXPERIMENTS named, ROUNDS rounds (the order swapped every other round),
# each server run on a flushed Redis. Run it inside a quiet window; it prints `uptime` before each run.
#
#   git worktree add --detach ../before 347af53
#   scripts/redis_rounds.sh ../before 3 > rounds.log
#   scripts/redis_rounds.sh ../before 3 8 > rounds.log    # experiment 8 alone
#
# BEFORE is a checkout of the older tree; both trees run with this checkout's .venv (the older
# one through PYTHONPATH), and experiment 9's client is always this checkout's bench.
set -euo pipefail
before=$(cd "${1:?usage: redis_rounds.sh BEFORE-TREE [ROUNDS [EXPERIMENTS]]}" && pwd)
rounds=${2:-3}
experiments=${3:-8 9}
here=$(cd "$(dirname "$0")/.." && pwd)
py=$here/.venv/bin/python
ulimit -n 20000

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

redis_port=$(free_port)
redis_dir=$(mktemp -d)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$redis_dir" \
    --daemonize yes --pidfile "$redis_dir/redis.pid"
redis_url=redis://127.0.0.1:$redis_port/0
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$redis_dir"
}
trap cleanup EXIT

stamp() { echo "== $1, $(date -u +%T), $(uptime)"; redis-cli -p "$redis_port" flushall >/dev/null; }

exp8() {  # TREE-NAME TREE
    stamp "experiment 8, $1"
    (cd "$2" && PYTHONPATH=$2 "$py" -m pushserver_bench --only 8 --redis "$redis_url") ||
        echo "== experiment 8 exited $? (its table says why)"
}

exp9() {  # TREE-NAME TREE: a --workers 2 server of that tree, this checkout's bench
    stamp "experiment 9, --workers 2, $1"
    local port
    port=$(free_port)
    (cd "$2" && PYTHONPATH=$2 exec "$py" -m pushserver --port "$port" --heartbeat 60 \
        --workers 2 --redis "$redis_url") &
    server_pid=$!
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
        sleep 0.1
    done
    "$here/.venv/bin/pushserver-bench" --only 9 --url "http://127.0.0.1:$port" \
        --transports longpoll --subscribers 20000 --client tuned ||
        echo "== experiment 9 exited $? (its table says why)"
    kill "$server_pid"
    wait "$server_pid" || true
    server_pid=
}

for round in $(seq "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for experiment in $experiments; do
        for which in $order; do
            tree=$here
            [ "$which" = before ] && tree=$before
            "exp$experiment" "$which (round $round)" "$tree"
        done
    done
done
echo "== end, $(date -u +%T), $(uptime)"
