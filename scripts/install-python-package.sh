#!/usr/bin/env bash
# Installs the Python package (`pip install .`) into a virtual environment of its own, for the
# Python tests: scripts/install-python-package.sh [VENV] (default build/venv). The first run
# builds the C++ engine (build/python); later runs recompile only what changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/build/venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "install-python-package: creating $venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/python/requirements-dev.txt"
# ccache, when installed, makes a rebuild after a small change quick (CMake reads the variable).
if command -v ccache >/dev/null 2>&1; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
echo "install-python-package: pip install . into $venv"
(cd "$root" && "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation .)
