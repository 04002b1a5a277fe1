#!/usr/bin/env bash
# Installs the Python package (`pip install .`) into a virtual environment of its own, for the
# Python tests: scripts/install-python-package.sh [VENV [BUILD_DIR]] (default build/venv). The
# package is built in BUILD_DIR when given — `make test` passes its own build folder, so only the
# extension module is compiled there — else in build/python (the first run compiles the engine,
# later runs what changed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/build/venv}"
build_dir="${2:-}"
if [ ! -x "$venv/bin/python" ]; then
  echo "install-python-package: creating $venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/python/requirements-dev.txt"
# ccache, when installed, makes a rebuild after a small change quick (CMake reads the variable).
if command -v ccache >/dev/null 2>&1; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
echo "install-python-package: pip install . into $venv"
settings=()
if [ -n "$build_dir" ]; then
  # The folder's own generator and tests stay as they are (make build configured it).
  settings=(-C "build-dir=$build_dir" -C cmake.define.DITTO_TESTS=ON)
  generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
  [ -n "$generator" ] && export CMAKE_GENERATOR="$generator"
fi
(cd "$root" && "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation "${settings[@]}" .)
