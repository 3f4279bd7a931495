#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run every test.
# System packages (redis-server and redis-cli, openssl, nginx with nchan, chromium, maven, node,
# jemalloc, a C compiler and the Python headers) come from apt when missing; Python packages go
# into .venv; the JS and Java tests fetch their own dev dependencies. The compiled build is tested
# in a stage of its own (scripts/test_compiled.sh) before the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v openssl >/dev/null || missing+=(openssl)
command -v nginx >/dev/null || missing+=(nginx-light)
[ -e /usr/lib/nginx/modules/ngx_nchan_module.so ] || missing+=(libnginx-mod-nchan)
command -v chromium >/dev/null || missing+=(chromium)
command -v javac >/dev/null || missing+=(default-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v node >/dev/null || missing+=(nodejs npm)
# a C compiler and the Python headers, for the compiled build's stage (scripts/test_compiled.sh)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  missing+=(python3-dev)
# jemalloc, which the server runs on when it is installed (pushserver/reexec.py)
python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("jemalloc"))' ||
  missing+=(libjemalloc2)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip

# The compiled build's wheel, built on one core while the install and the checks below run on
# the other (a minute of compiling that would otherwise add to the command), then tested as it
# installs (scripts/test_compiled.sh); its failure fails the command once every test has run.
built=$(mktemp -d)
./scripts/test_compiled.sh --build-into "$built" &
build=$!
trap 'kill "$build" 2>/dev/null || true; rm -rf "$built"' EXIT

.venv/bin/pip install -q -e '.[test]' -e ./clients/python

# Packages the type checker covers: the whole tree, and the compiled build's hook.
typed=(pushserver pushserver_burnin pushserver_bench pushserver_charts pushserver_measure clients/python/pushclient
  hatch_build.py)

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy "${typed[@]}"
wait "$build" || true
compiled=0
./scripts/test_compiled.sh --wheel-from "$built" || compiled=$?
# Four workers on two cores: the tests wait on servers, Redis failovers and clients more than
# they compute. With two workers the cores sat idle 63 % of the run (vmstat), with four 41 %;
# four took it from 13 min 23 s to 8 min 28 s on this machine.
.venv/bin/python -m pytest -n 4 "$@" || exit
[ "$compiled" = 0 ] || { echo "the compiled stage failed: see its output above" >&2; exit "$compiled"; }
