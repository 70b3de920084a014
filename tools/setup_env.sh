#!/usr/bin/env bash
# Create .venv with the pinned OpenMMLab stack and mmlocat in editable mode.
#
# Idempotent: a stamp keyed by the requirement files and this script lets a
# second run skip everything. mmcv 2.1.0 is compiled once with its CPU ops and
# the wheel is cached outside the repository, keyed by torch and Python
# version, under ${MMLOCAT_CACHE:-~/.cache/mmlocat}.
#
# Usage: tools/setup_env.sh [VENV_DIR]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
# Later steps run from other directories (the mmcv build cds into a temporary
# folder), so a relative VENV must be made absolute here, once.
[[ "$VENV" == /* ]] || VENV="$PWD/$VENV"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
CACHE="${MMLOCAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmlocat}"
TORCH_VERSION="$(sed -n 's/^torch==//p' "$ROOT/requirements/stack.txt")"
MMCV_VERSION=2.1.0

step=""
trap 'echo "setup_env: FAILED at step: ${step} (exit $?)" >&2' ERR
say() { step="$1"; echo "[setup_env] $(date +%H:%M:%S) ${step}"; }

stamp_key() {
    cat "$ROOT"/requirements/*.txt "$ROOT/tools/setup_env.sh" \
        "$ROOT/setup.py" | sha256sum | cut -c1-16
}
STAMP="$VENV/.mmlocat-stack-$(stamp_key)"
if [[ -f "$STAMP" ]]; then
    echo "[setup_env] $VENV is up to date (stamp $(basename "$STAMP"))"
    exit 0
fi

say "create virtual environment $VENV with $PYTHON"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

say "install torch $TORCH_VERSION, build tools and the OpenMMLab stack"
"${PIP[@]}" install -q -r "$ROOT/requirements/stack.txt"

PYTAG="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
WHEEL_DIR="$CACHE/wheels/torch-$TORCH_VERSION-$PYTAG"
mkdir -p "$WHEEL_DIR"
if ! compgen -G "$WHEEL_DIR/mmcv-$MMCV_VERSION-*.whl" >/dev/null; then
    say "compile mmcv $MMCV_VERSION with CPU ops (first set-up only, ~5 min)"
    BUILD="$(mktemp -d)"
    # torch >= 2.10 headers need C++20, but mmcv appends -std=c++17 last.
    cat >"$BUILD/cxx" <<'EOF'
#!/usr/bin/env bash
args=()
for a in "$@"; do
    [[ "$a" == -std=c++17 || "$a" == -std=c++14 ]] && a=-std=c++20
    args+=("$a")
done
exec g++ "${args[@]}"
EOF
    chmod +x "$BUILD/cxx"
    # CFLAGS replaces Python's own flags, so it carries the full set.
    (cd "$BUILD" && PATH="$VENV/bin:$PATH" CXX="$BUILD/cxx" CC=gcc \
        CFLAGS="-O2 -g0 -DNDEBUG -fwrapv -w" \
        MMCV_WITH_OPS=1 FORCE_CUDA=0 CUDA_VISIBLE_DEVICES= \
        MAX_JOBS="$(nproc)" \
        "${PIP[@]}" wheel -q --no-build-isolation --no-deps --no-cache-dir \
        -w "$BUILD/out" "mmcv==$MMCV_VERSION")
    mv "$BUILD"/out/mmcv-*.whl "$WHEEL_DIR/"
    rm -rf "$BUILD"
else
    echo "[setup_env] using cached $(ls "$WHEEL_DIR"/mmcv-*.whl)"
fi

say "install the compiled mmcv wheel"
"${PIP[@]}" install -q --no-deps --force-reinstall "$WHEEL_DIR"/mmcv-$MMCV_VERSION-*.whl
"${PIP[@]}" install -q addict packaging pyyaml yapf opencv-python-headless

say "install test and lint tools"
"${PIP[@]}" install -q -r "$ROOT/requirements/tests.txt"

say "install mmlocat in editable mode"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

say "prove the stack (host imports, mmcv.ops.nms and RoIAlign on CPU)"
"$PY" "$ROOT/tools/misc/check_stack.py"

rm -f "$VENV"/.mmlocat-stack-*
touch "$STAMP"
echo "[setup_env] done: $VENV"
