#!/usr/bin/env bash
# Create a virtual environment with the pinned OpenMMLab stack, mmcv 2.1.0
# with its compiled ops and mmlocat in editable mode.
#
# Idempotent: a stamp keyed by the requirement files, this script, setup.py
# and the mmcv choice lets a second run skip everything. mmcv is compiled once
# and the wheel is cached outside the repository, under
#   ${MMLOCAT_CACHE:-~/.cache/mmlocat}/wheels/torch-<torch>-<cpXY>-<flavour>/
# where <flavour> is 'cpu' or 'cu<torch CUDA>-arch<TORCH_CUDA_ARCH_LIST>'.
#
# Usage: tools/setup_env.sh [VENV_DIR]            (default: <repo>/.venv)
#
# Environment:
#   PYTHON                interpreter that creates the venv (python3.11,
#                         else python3)
#   MMLOCAT_CACHE         wheel cache folder
#   MMLOCAT_MMCV          auto (default): CUDA ops when torch is a CUDA build,
#                           a GPU is visible (or TORCH_CUDA_ARCH_LIST is set)
#                           and nvcc is found on PATH or under CUDA_HOME;
#                           CPU ops otherwise
#                         cpu: CPU ops only; cuda: CUDA ops or an error;
#                         skip: keep the mmcv installed in VENV_DIR
#   TORCH_CUDA_ARCH_LIST  GPU architectures to compile (default: the visible
#                         GPUs' compute capabilities)
#   CUDA_HOME             CUDA toolkit (default: the one of nvcc on PATH)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
# Later steps run from other directories (the mmcv build cds into a temporary
# folder), so a relative VENV must be made absolute here, once.
[[ "$VENV" == /* ]] || VENV="$PWD/$VENV"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
CACHE="${MMLOCAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmlocat}"
MMCV_MODE="${MMLOCAT_MMCV:-auto}"
ARCH_REQUEST="${TORCH_CUDA_ARCH_LIST:-}"
TORCH_VERSION="$(sed -n 's/^torch==//p' "$ROOT/requirements/stack.txt")"
MMCV_VERSION=2.1.0
PIP_HINT="pip could not install (its message is above): without network \
access point pip at a reachable index or a local wheel folder \
(PIP_INDEX_URL, PIP_FIND_LINKS)"

step=""
hint=""
on_error() {
    echo "setup_env: FAILED at step: ${step} (exit $1)" >&2
    [[ -z "$hint" ]] || echo "setup_env: fix: ${hint}" >&2
}
trap 'on_error $?' ERR
# say STEP [FIX]: start a step; FIX is printed if one of its commands fails.
say() {
    step="$1"
    hint="${2:-}"
    echo "[setup_env] $(date +%H:%M:%S) ${step}"
}
# die REASON FIX: fail the current step with a reason and the fix.
die() {
    echo "setup_env: FAILED at step: ${step}: $1" >&2
    echo "setup_env: fix: $2" >&2
    exit 1
}

case "$MMCV_MODE" in
    auto | cpu | cuda | skip) ;;
    *)
        step="read MMLOCAT_MMCV"
        die "MMLOCAT_MMCV='$MMCV_MODE' is not one of auto, cpu, cuda, skip" \
            "unset it (auto) or set one of auto, cpu, cuda, skip"
        ;;
esac

stamp_key() {
    {
        cat "$ROOT"/requirements/*.txt "$ROOT/tools/setup_env.sh" \
            "$ROOT/setup.py"
        echo "mmcv=$MMCV_MODE arch=$ARCH_REQUEST"
    } | sha256sum | cut -c1-16
}
STAMP="$VENV/.mmlocat-stack-$(stamp_key)"
if [[ -f "$STAMP" ]]; then
    echo "[setup_env] $VENV is up to date (stamp $(basename "$STAMP"))"
    exit 0
fi
# An interrupted or failing run must not leave an older stamp behind.
rm -f "$VENV"/.mmlocat-stack-*

say "create virtual environment $VENV with $PYTHON"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

say "install torch $TORCH_VERSION, build tools and the OpenMMLab stack" \
    "$PIP_HINT"
"${PIP[@]}" install -q -r "$ROOT/requirements/stack.txt"

say "choose the mmcv $MMCV_VERSION build (MMLOCAT_MMCV=$MMCV_MODE)"
# One line: Python tag, torch's CUDA version or 'none', the visible GPUs'
# compute capabilities ('9.0;8.0') or 'none'.
TORCH_REPORT="$("$PY" -c '
import sys
import torch
caps = set()
if torch.version.cuda and torch.cuda.is_available():
    caps = {"%d.%d" % torch.cuda.get_device_capability(i)
            for i in range(torch.cuda.device_count())}
print(f"cp{sys.version_info[0]}{sys.version_info[1]}",
      torch.version.cuda or "none", ";".join(sorted(caps)) or "none")
')"
read -r PYTAG TORCH_CUDA GPU_ARCHS <<<"$TORCH_REPORT"
NVCC=""
if [[ -n "${CUDA_HOME:-}" && -x "${CUDA_HOME:-}/bin/nvcc" ]]; then
    NVCC="$CUDA_HOME/bin/nvcc"
elif command -v nvcc >/dev/null 2>&1; then
    NVCC="$(command -v nvcc)"
fi
TOOLKIT_FIX="install the CUDA toolkit $TORCH_CUDA (the CUDA of torch \
$TORCH_VERSION) and put its bin/ on PATH or set CUDA_HOME to it"

FLAVOUR=cpu
case "$MMCV_MODE" in
    skip) FLAVOUR=skip ;;
    cuda)
        [[ "$TORCH_CUDA" != none ]] ||
            die "torch $TORCH_VERSION in $VENV is a CPU-only build" \
                "install a CUDA build of torch $TORCH_VERSION, or use \
MMLOCAT_MMCV=cpu"
        [[ -n "$NVCC" ]] ||
            die "no CUDA compiler: nvcc is neither on PATH nor under \
CUDA_HOME='${CUDA_HOME:-}'" "$TOOLKIT_FIX; or use MMLOCAT_MMCV=cpu"
        FLAVOUR=cuda
        ;;
    auto)
        if [[ "$TORCH_CUDA" == none ]]; then
            echo "[setup_env] torch is a CPU build: mmcv gets CPU ops"
        elif [[ "$GPU_ARCHS" == none && -z "$ARCH_REQUEST" ]]; then
            echo "[setup_env] no GPU visible and TORCH_CUDA_ARCH_LIST unset:" \
                "mmcv gets CPU ops (MMLOCAT_MMCV=cuda to insist)"
        elif [[ -z "$NVCC" ]]; then
            echo "[setup_env] NOTE: torch has CUDA $TORCH_CUDA but no nvcc" \
                "is on PATH or under CUDA_HOME: mmcv gets CPU ops only;" \
                "for CUDA ops, $TOOLKIT_FIX"
        else
            FLAVOUR=cuda
        fi
        ;;
esac

if [[ "$FLAVOUR" == cuda ]]; then
    ARCHS="${ARCH_REQUEST:-$GPU_ARCHS}"
    [[ "$ARCHS" != none ]] ||
        die "no GPU is visible and TORCH_CUDA_ARCH_LIST is unset, so the \
GPU architectures to compile for are unknown" "set TORCH_CUDA_ARCH_LIST, \
e.g. '8.0;9.0' for A100 and H100, or run on a GPU node"
    NVCC_VERSION="$("$NVCC" --version |
        sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')"
    [[ -n "$NVCC_VERSION" ]] ||
        die "cannot read the CUDA version of $NVCC ('$NVCC --version')" \
            "$TOOLKIT_FIX"
    [[ "${NVCC_VERSION%%.*}" == "${TORCH_CUDA%%.*}" ]] ||
        die "$NVCC is CUDA $NVCC_VERSION but torch $TORCH_VERSION is built \
with CUDA $TORCH_CUDA (major versions differ)" "$TOOLKIT_FIX, or install the \
torch $TORCH_VERSION build for CUDA $NVCC_VERSION"
    CUDA_ROOT="$(cd "$(dirname "$NVCC")/.." && pwd)"
    FLAVOUR_KEY="cu$TORCH_CUDA-arch${ARCHS//[; ]/_}"
    OPS="CPU and CUDA (CUDA $NVCC_VERSION, archs $ARCHS)"
else
    FLAVOUR_KEY=cpu
    OPS="CPU"
fi

if [[ "$FLAVOUR" == skip ]]; then
    say "keep the installed mmcv (MMLOCAT_MMCV=skip)"
    KEPT="$("$PY" -c 'import mmcv; print(mmcv.__version__)' 2>/dev/null)" ||
        die "MMLOCAT_MMCV=skip but $VENV has no importable mmcv" \
            "install mmcv $MMCV_VERSION into $VENV first, or use \
MMLOCAT_MMCV=auto to compile it"
    echo "[setup_env] keeping mmcv $KEPT"
else
    WHEEL_DIR="$CACHE/wheels/torch-$TORCH_VERSION-$PYTAG-$FLAVOUR_KEY"
    mkdir -p "$WHEEL_DIR"
    WHEEL_GLOB="mmcv-$MMCV_VERSION-*.whl"
    # Caches written before the CUDA option (torch-<v>-<cpXY>/) hold CPU
    # builds: move them to the new key instead of compiling again.
    LEGACY="$CACHE/wheels/torch-$TORCH_VERSION-$PYTAG"
    if [[ "$FLAVOUR" == cpu ]] && ! compgen -G "$WHEEL_DIR/$WHEEL_GLOB" \
        >/dev/null && compgen -G "$LEGACY/$WHEEL_GLOB" >/dev/null; then
        mv "$LEGACY"/$WHEEL_GLOB "$WHEEL_DIR/"
    fi
    if ! compgen -G "$WHEEL_DIR/$WHEEL_GLOB" >/dev/null; then
        say "compile mmcv $MMCV_VERSION with $OPS ops (first set-up only, \
6-9 min on 2 cores for CPU ops)" "the compiler's message is above; \
MMLOCAT_MMCV=cpu skips the CUDA ops"
        for tool in gcc g++; do
            command -v "$tool" >/dev/null 2>&1 ||
                die "no C/C++ compiler: '$tool' is not on PATH (mmcv's \
ops are compiled from C++)" "install gcc and g++ (Debian/Ubuntu: apt-get \
install g++; conda: conda install gxx_linux-64), or put a cached \
$WHEEL_GLOB into $WHEEL_DIR"
        done
        BUILD="$(mktemp -d)"
        # torch >= 2.10 headers need C++20, but mmcv appends -std=c++17 last
        # to both the C++ and the nvcc command lines: rewrite it in wrappers.
        WRAP_NVCC=""
        [[ "$FLAVOUR" != cuda ]] || WRAP_NVCC="$NVCC"
        for compiler in cxx:g++ nvcc:"$WRAP_NVCC"; do
            [[ -n "${compiler#*:}" ]] || continue
            cat >"$BUILD/${compiler%%:*}" <<EOF
#!/usr/bin/env bash
args=()
for a in "\$@"; do
    [[ "\$a" == -std=c++17 || "\$a" == -std=c++14 ]] && a=-std=c++20
    args+=("\$a")
done
exec "${compiler#*:}" "\${args[@]}"
EOF
            chmod +x "$BUILD/${compiler%%:*}"
        done
        # CFLAGS replaces Python's own flags, so it carries the full set.
        BUILD_ENV=(PATH="$VENV/bin:$PATH" CXX="$BUILD/cxx" CC=gcc
            CFLAGS="-O2 -g0 -DNDEBUG -fwrapv -w" MMCV_WITH_OPS=1
            MAX_JOBS="$(nproc)")
        if [[ "$FLAVOUR" == cuda ]]; then
            # PYTORCH_NVCC: the nvcc torch's ninja build runs.
            BUILD_ENV+=(FORCE_CUDA=1 TORCH_CUDA_ARCH_LIST="$ARCHS"
                CUDA_HOME="$CUDA_ROOT" PYTORCH_NVCC="$BUILD/nvcc")
        else
            BUILD_ENV+=(FORCE_CUDA=0 CUDA_VISIBLE_DEVICES=)
        fi
        (cd "$BUILD" && env "${BUILD_ENV[@]}" \
            "${PIP[@]}" wheel -q --no-build-isolation --no-deps \
            --no-cache-dir -w "$BUILD/out" "mmcv==$MMCV_VERSION")
        BUILT=("$BUILD"/out/$WHEEL_GLOB)
        [[ -f "${BUILT[0]}" ]] ||
            die "pip wheel wrote no $WHEEL_GLOB into $BUILD/out" \
                "the build output is above"
        # Copy then rename, so the cache never holds a partial wheel.
        cp "${BUILT[0]}" "$WHEEL_DIR/.partial"
        mv "$WHEEL_DIR/.partial" "$WHEEL_DIR/$(basename "${BUILT[0]}")"
        rm -rf "$BUILD"
    else
        echo "[setup_env] using cached $(ls "$WHEEL_DIR"/$WHEEL_GLOB)"
    fi

    say "install the compiled mmcv wheel" "$PIP_HINT"
    "${PIP[@]}" install -q --no-deps --force-reinstall \
        "$WHEEL_DIR"/$WHEEL_GLOB
    "${PIP[@]}" install -q addict packaging pyyaml yapf opencv-python-headless
fi

say "install test and lint tools" "$PIP_HINT"
"${PIP[@]}" install -q -r "$ROOT/requirements/tests.txt"

say "install mmlocat in editable mode" "$PIP_HINT"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

CHECK_ARGS=()
[[ "$FLAVOUR" != cuda ]] || CHECK_ARGS=(--expect-cuda)
say "prove the stack (host imports, mmcv.ops.nms and RoIAlign on CPU, \
and on CUDA when a GPU is visible)" "the failing check is named above"
"$PY" "$ROOT/tools/misc/check_stack.py" "${CHECK_ARGS[@]}"

touch "$STAMP"
echo "[setup_env] done: $VENV"
