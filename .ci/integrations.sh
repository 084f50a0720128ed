#!/usr/bin/env bash
# Integration CI (issue 7): each framework's real package, CPU only, in its own virtual environment,
# because the extras conflict (openenv needs mcp<2; verifiers pins mcp==2.0.0 and openai<3).
#   .venv-int-train      mcp 2.x, pyarrow + datasets, TRL + torch (CPU wheel), verl 0.9, skyrl-gym
#   .venv-int-openenv    openenv 0.10 (fastmcp 3, mcp 1.x)
#   .venv-int-verifiers  verifiers 0.4 (mcp 2.0.0; also runs the MCP tests on mcp 2.0)
# The two small environments install in the background while the first one installs and tests.
# Every environment runs all of tests/test_integrations_*.py; tests of absent frameworks skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
export TOKENIZERS_PARALLELISM=false PIP_DISABLE_PIP_VERSION_CHECK=1 RAY_USAGE_STATS_ENABLED=0
PY=${PYTHON:-python3}
LOGS=$(mktemp -d)
start=$SECONDS

venv() {  # venv DIR PIP-ARGS...: a fresh environment with scaleenv and the given packages
  local dir=$1; shift
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  echo '*' > "$dir/.gitignore"
  "$dir/bin/python" -m pip install -q --no-compile --upgrade pip
  "$dir/bin/python" -m pip install -q --no-compile "$@"
}

run_tests() {  # run_tests DIR NAME
  echo "== integrations [$2]: environment ready after $(( SECONDS - start )) s"
  "$1/bin/python" -m pytest -p no:cacheprovider -rs tests/test_integrations_*.py
}

installed() {  # installed NAME PID: wait for a background install, show its log if it failed
  if ! wait "$2"; then
    echo "installing the $1 environment failed:"; grep -v '^WARNING: Location' "$LOGS/$1.log" | tail -30; exit 1
  fi
}

venv .venv-int-openenv -e . "openenv>=0.10,<0.11" pytest anyio > "$LOGS/openenv.log" 2>&1 &
openenv_pid=$!
venv .venv-int-verifiers -e ".[mcp,export]" "verifiers>=0.4,<0.5" pytest > "$LOGS/verifiers.log" 2>&1 &
verifiers_pid=$!

# torch first, pinned to the CPU wheel, so that nothing pulls a CUDA build
(venv .venv-int-train "torch==2.13.0" &&
 .venv-int-train/bin/python -m pip install -q --no-compile -e ".[mcp,export,trl,verl,skyrl]" pytest \
   "torch==2.13.0") > "$LOGS/train.log" 2>&1 &
installed train $!
run_tests .venv-int-train train
installed openenv "$openenv_pid"
run_tests .venv-int-openenv openenv
installed verifiers "$verifiers_pid"
run_tests .venv-int-verifiers verifiers
echo "== integrations: all environments passed in $(( SECONDS - start )) s"
