#!/usr/bin/env bash
# An offline bundle for a GPU node without a package index: wheels for a target Python and platform, Fashion-MNIST,
# this repository's source, and a one-line install (docs/campaign.md).
#
#   scripts/offline-bundle.sh                                   # -> bundle/ for CPython 3.11, glibc >= 2.28 x86_64
#   scripts/offline-bundle.sh --out /tmp/b --python 3.12 --arch aarch64 --glibc 2.28
#   scripts/offline-bundle.sh --requirements reqs.txt           # only these requirements (and the fedlib wheel)
#
# Target platforms: every manylinux tag a node with glibc --glibc (default 2.28, torch's own tag) runs, i.e.
# manylinux_2_28 down to manylinux_2_5 and the legacy manylinux2014/2010/1 names (torch's CUDA dependencies carry
# manylinux_2_27, _2_25, _2_18, _2_17, _2_12 and _2_5 tags; pip does not widen one --platform to older glibcs);
# --platform TAG (repeatable) replaces the list.
#
# On the node:   bash bundle/install.sh [REPO_DIR]   (then: export FEDLIB_DATA=<bundle>/data, as it prints)
# It unpacks the source into REPO_DIR (default: <bundle>/fedlib) unless it is there, and runs scripts/setup.sh with
# FEDLIB_WHEELS=<bundle>/wheels (pip install --no-index --find-links). `bash bundle/install.sh --venv DIR` installs
# the bundle's requirements.txt into a new virtual environment DIR instead.
#
# The default requirements are fedlib's own with the dev and ray extras (torch with its CUDA libraries: several
# GB). Wheels are downloaded for the target (--only-binary); a requirement published only as a source archive is
# built into a wheel here, which works for pure-Python packages (e.g. adamp) and stops with its name otherwise.
# The bundle is built in <out>.partial and moved to <out> only when complete: a failure leaves no partial bundle.
# It prints its size; install.sh prints how long the install took.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=bundle PYV=3.11 REQS="" DATA=1 PLATFORMS=() ARCH=x86_64 GLIBC=2.28
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --python) PYV=$2; shift 2 ;;
    --platform) PLATFORMS+=("$2"); shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    --glibc) GLIBC=$2; shift 2 ;;
    --requirements) REQS=$2; shift 2 ;;
    --no-data) DATA=0; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "offline-bundle: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ${#PLATFORMS[@]} -eq 0 ]; then
  case "$GLIBC" in 2.[0-9]|2.[0-9][0-9]) ;; *) echo "offline-bundle: --glibc $GLIBC: write e.g. 2.28" >&2; exit 2 ;; esac
  for ((m = ${GLIBC#2.}; m >= 5; m--)); do PLATFORMS+=("manylinux_2_${m}_$ARCH"); done
  [ "${GLIBC#2.}" -ge 17 ] && PLATFORMS+=("manylinux2014_$ARCH")
  [ "${GLIBC#2.}" -ge 12 ] && PLATFORMS+=("manylinux2010_$ARCH")
  PLATFORMS+=("manylinux1_$ARCH")
fi
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
START=$(date +%s)
mkdir -p "$(dirname "$OUT")"
FINAL=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
OUT="$FINAL.partial"
rm -rf "$OUT"
trap 'rc=$?; if [ $rc -ne 0 ]; then rm -rf "$OUT"; echo "[bundle] failed (exit $rc): nothing left in $FINAL.partial; $FINAL is untouched" >&2; fi' EXIT
mkdir -p "$OUT/wheels"
W="$OUT/wheels"

# 1. what to bundle
if [ -n "$REQS" ]; then
  cp "$REQS" "$OUT/requirements.txt"
else
  "$PY" - "$OUT/requirements.txt" <<'EOF'
import sys, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
reqs = p["dependencies"] + sum(p["optional-dependencies"].values(), [])
open(sys.argv[1], "w").write("\n".join(reqs + ["fedlib"]) + "\n")
EOF
fi
# the build backend, for `pip install -e .` on the node (build isolation looks in the bundle too)
printf 'setuptools>=64\nwheel\n' > "$OUT/build-requirements.txt"

# 2. fedlib itself (pure Python)
"$PY" -m pip wheel -q --no-deps -w "$W" .

# 3. wheels for the target; a source-only requirement becomes a wheel built here
plat=(); for p in "${PLATFORMS[@]}"; do plat+=(--platform "$p"); done
target=(--only-binary=:all: --python-version "$PYV" --implementation cp "${plat[@]}")
grep -v '^fedlib$' "$OUT/requirements.txt" > "$OUT/.download.txt" || true
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  if "$PY" -m pip download -q -d "$W" --find-links "$W" "${target[@]}" -r "$OUT/.download.txt" \
       -r "$OUT/build-requirements.txt" 2> "$OUT/.pip.err"; then
    break
  fi
  pkg=$(sed -n 's/.*No matching distribution found for \([^ ;]*\).*/\1/p' "$OUT/.pip.err" | head -1)
  if [ -z "$pkg" ] || [ "$attempt" = 10 ]; then cat "$OUT/.pip.err" >&2; exit 1; fi
  echo "[bundle] $pkg has no wheel for the target: building one from its source archive"
  "$PY" -m pip wheel -q --no-deps -w "$W" "$pkg"
  if ls "$W" | grep -i "^$(echo "${pkg%%[=<>!~]*}" | tr '-' '_')-" | grep -qv 'none-any.whl$'; then
    echo "[bundle] $pkg is not pure Python: build it on the target platform and put the wheel in $W" >&2; exit 1
  fi
done
rm -f "$OUT/.download.txt" "$OUT/.pip.err"

# 4. the data and the source
if [ "$DATA" = 1 ]; then
  "$PY" - "$OUT/data/fashion-mnist" <<'EOF'
import hashlib, shutil, sys
from pathlib import Path
from fedlib.data import data_root
from fedlib.loaders import find_fmnist
found = find_fmnist(data_root())
if found is None:
    sys.exit("[bundle] Fashion-MNIST not found on this machine (README, Data); or pass --no-data")
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
with open(out / "SHA256SUMS", "w") as s:
    for p in found.values():
        shutil.copy2(p, out / p.name)
        s.write(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n")
print(f"[bundle] Fashion-MNIST from {next(iter(found.values())).parent}")
EOF
fi
if git rev-parse --git-dir >/dev/null 2>&1; then
  git archive --format=tar.gz -o "$OUT/fedlib-src.tar.gz" HEAD
  git rev-parse --short=12 HEAD > "$OUT/COMMIT"  # the records' provenance on the node (no .git there)
fi

# 5. the one-line install
cat > "$OUT/install.sh" <<'EOF'
#!/usr/bin/env bash
# bash install.sh [REPO_DIR] | bash install.sh --venv DIR   (no package index needed)
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
T0=$(date +%s)
if [ "${1:-}" = "--venv" ]; then
  "$PY" -m venv "$2"
  "$2/bin/python" -m pip install -q --no-index --find-links "$B/wheels" -r "$B/requirements.txt"
  echo "[install] $2: $("$2/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) packages from $B/wheels in $(( $(date +%s) - T0 )) s"
else
  REPO=${1:-$B/fedlib}
  if [ ! -f "$REPO/pyproject.toml" ]; then mkdir -p "$REPO" && tar -xzf "$B/fedlib-src.tar.gz" -C "$REPO"; fi
  (cd "$REPO" && FEDLIB_WHEELS="$B/wheels" FEDLIB_DATA="$B/data" PYTHON="$PY" bash scripts/setup.sh)
  echo "[install] done in $(( $(date +%s) - T0 )) s: cd $REPO, export the variables below, then make gpu-check and make campaign SCALE=paper DEVICE=cuda BUDGET=25m"
fi
if [ -d "$B/data" ]; then echo "export FEDLIB_DATA=$B/data"; fi
if [ -f "$B/COMMIT" ]; then echo "export FEDLIB_COMMIT=$(cat "$B/COMMIT")"; fi
EOF
chmod +x "$OUT/install.sh"
rm -rf "$FINAL"
mv "$OUT" "$FINAL"
echo "[bundle] $FINAL: $(ls "$FINAL/wheels" | wc -l) wheels, $(du -sh "$FINAL" | cut -f1) in all (wheels $(du -sh \
  "$FINAL/wheels" | cut -f1)), for CPython $PYV on ${PLATFORMS[0]} .. ${PLATFORMS[-1]}; built in $(( $(date +%s) - START )) s"
echo "[bundle] install on the node: bash $FINAL/install.sh [REPO_DIR]   (or --venv DIR)"
