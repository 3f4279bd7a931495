#!/usr/bin/env bash
# The compiled build's stage of the test command (scripts/test.sh runs it; it runs alone too, on
# .venv as scripts/test.sh installs it): build the compiled wheel once (PUSHSERVER_COMPILE=1,
# hatch_build.py), unpack it into a folder of its own with the tests beside it, and run there the
# tests that exercise the compiled modules, against exactly the files the wheel installs: that
# folder comes first on the path of pytest and of every server the tests start (PYTHONPATH), and
# tests/e2e/transports/test_build_reported.py checks those servers run compiled.
# The tests: tests/unit and tests/e2e/transports, less the slow ones (lossy links, the other
# languages' decoders and Chromium's compression), which would triple the tests' time and need the
# JS client and a browser. A failed build fails the stage.
#   scripts/test_compiled.sh [--wheel-from DIR] [PYTEST ARGS...]
#   scripts/test_compiled.sh --build-into DIR
# --build-into DIR only builds: the wheel into DIR, the build's output in DIR/build.log and its
# exit status in DIR/build.rc (scripts/test.sh runs it beside its install and checks, so the
# compile does not add its minute to the command); --wheel-from DIR then tests what it built.
# Without either, build here and test.
set -euo pipefail
cd "$(dirname "$0")/.."
python="$PWD/.venv/bin/python"

build_into() {
  local dir=$1 start=$SECONDS rc=0
  mkdir -p "$dir"
  PUSHSERVER_COMPILE=1 "$python" -m pip wheel -q --no-deps -w "$dir" . >"$dir/build.log" 2>&1 ||
    rc=$?
  echo "compiled stage: built in $((SECONDS - start)) s (exit $rc)" >>"$dir/build.log"
  echo "$rc" >"$dir/build.rc"
}

if [ "${1:-}" = --build-into ]; then
  build_into "$2"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = --wheel-from ]; then
  built=$2
  shift 2
else
  built="$work/wheel"
  build_into "$built"
fi
tail -n 1 "$built/build.log"
[ "$(cat "$built/build.rc")" = 0 ] ||
  { cat "$built/build.log" >&2; echo "compiled stage: the build failed" >&2; exit 1; }
wheels=("$built"/pushserver-*.whl)
"$python" -m zipfile -e "${wheels[0]}" "$work/tree"
echo "compiled stage: testing ${wheels[0]##*/}"
# what the tests read besides the packages: themselves, their configuration, scripts and docs
cp -r tests scripts docs pyproject.toml "$work/tree/"

cd "$work/tree"
export PYTHONPATH="$PWD"
"$python" -c 'import sys; from pushserver.monitor.compiled import compiled; sys.exit(not compiled())' ||
  { echo "compiled stage: the wheel's hub is not an extension module" >&2; exit 1; }
"$python" -m pytest -n 2 -p no:cacheprovider -m "not slow" tests/unit tests/e2e/transports "$@"
