#!/usr/bin/env bash
# The burn-in's channels mode to 40,000 channels, one subscriber each (docs/burnin.md, "40,000
# channels"): for each transport a fresh Redis (nothing saved) and a fresh `pushserver --workers 3`
# on ephemeral ports, the burn-in with 3 Locust workers, and scripts/cpu_per_second.py beside it.
# Run it inside a quiet window (about 6.5 minutes for both); it prints `uptime` around each run.
#
#   scripts/burnin_channels_40k.sh docs/burnin-channels-40k [stream longpoll]
#
# STEP=1000 STEP_SECONDS=5 make the same run small (4 steps of STEP channels), to try it out.
set -euo pipefail
out=${1:?usage: burnin_channels_40k.sh OUT-DIR [TRANSPORT...]}
shift
if [ $# -gt 0 ]; then transports=("$@"); else transports=(stream longpoll); fi
step=${STEP:-10000}
step_seconds=${STEP_SECONDS:-40}
here=$(cd "$(dirname "$0")/.." && pwd)
py=$here/.venv/bin/python
ulimit -n 20000

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

for transport in "${transports[@]}"; do
    redis_port=$(free_port)
    redis_dir=$(mktemp -d)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$redis_dir" \
        --daemonize yes --pidfile "$redis_dir/redis.pid"
    until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.05; done
    "$here/.venv/bin/pushserver" --port 0 --workers 3 --redis "redis://127.0.0.1:$redis_port/0" \
        >"$redis_dir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 300); do grep -q "listening on" "$redis_dir/server.log" && break; sleep 0.1; done
    url=$(grep -o "http://[0-9.:]*" "$redis_dir/server.log" | head -1)
    mkdir -p "$out/$transport"
    PYTHONPATH=$here "$py" "$here/scripts/cpu_per_second.py" "$(cat "$redis_dir/redis.pid")" \
        "$server_pid" "$out/$transport/cpu.log" &
    sampler_pid=$!
    echo "$transport: $url, Redis on $redis_port, $(date -u +%T) $(uptime)"
    label=$([ "$transport" = longpoll ] && echo long-poll || echo "$transport")
    status=0
    "$here/.venv/bin/pushserver-burnin" channels --host "$url" --out "$out/$transport" \
        --transport "$transport" --workers 3 --start "$step" --step "$step" --max $((4 * step)) \
        --spawn-rate 2000 --rate 0.5 --step-seconds "$step_seconds" --ceiling 10 --max-minutes 5 --no-charts \
        --label "channels, $label" || status=$?
    echo "$transport: burn-in exit $status, $(date -u +%T) $(uptime)"
    echo "Redis after the run: $(redis-cli -p "$redis_port" info memory | grep -E '^used_memory(_rss)?:' | tr -d '\r' | tr '\n' ' ')keys $(redis-cli -p "$redis_port" dbsize)"
    kill "$sampler_pid" 2>/dev/null || true
    kill "$server_pid" && wait "$server_pid" || true
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$redis_dir"
done
