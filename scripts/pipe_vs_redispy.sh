#!/usr/bin/env bash
# pipe.py against redis-py on the publish path (docs/performance.md, "One Redis keeps the pipe"):
# the script call alone, then through a server. The redis-py side is a scratch copy of this
# checkout's HEAD with scripts/redispy-variant.diff applied, removed afterwards. Run it inside a
# quiet window:
#
#   scripts/pipe_vs_redispy.sh 3 20000 > pipe.log      # ROUNDS CALLS-AND-MESSAGES
set -euo pipefail
rounds=${1:-3}
count=${2:-20000}
here=$(cd "$(dirname "$0")/.." && pwd)
variant=$(mktemp -d)
trap 'rm -rf "$variant"' EXIT
git -C "$here" archive HEAD | tar -x -C "$variant"
git -C "$variant" apply "$here/scripts/redispy-variant.diff"
date -u
"$here/.venv/bin/python" "$here/scripts/pipe_client_cost.py" "$rounds" "$count"
"$here/.venv/bin/python" "$here/scripts/pipe_publish_path.py" "$variant" "$rounds" "$count"
date -u
