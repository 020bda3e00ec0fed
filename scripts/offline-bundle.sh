#!/usr/bin/env bash
# An offline bundle for a GPU node without a package index: wheels for a target Python and platform, Fashion-MNIST,
# this repository's source, and a one-line install (docs/campaign.md).
#
#   scripts/offline-bundle.sh                                   # -> bundle/ for CPython 3.11 on manylinux x86_64
#   scripts/offline-bundle.sh --out /tmp/b --python 3.12 --platform manylinux_2_28_aarch64
#   scripts/offline-bundle.sh --requirements reqs.txt           # only these requirements (and the fedlib wheel)
#
# On the node:   bash bundle/install.sh [REPO_DIR]   (then: export FEDLIB_DATA=<bundle>/data, as it prints)
# It unpacks the source into REPO_DIR (default: <bundle>/fedlib) unless it is there, and runs scripts/setup.sh with
# FEDLIB_WHEELS=<bundle>/wheels (pip install --no-index --find-links). `bash bundle/install.sh --venv DIR` installs
# the bundle's requirements.txt into a new virtual environment DIR instead.
#
# The default requirements are fedlib's own with the dev and ray extras (torch with its CUDA libraries: several
# GB). Wheels are downloaded for the target (--only-binary); a requirement published only as a source archive is
# built into a wheel here, which works for pure-Python packages (e.g. adamp) and stops with its name otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=bundle PYV=3.11 REQS="" DATA=1 PLATFORMS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --python) PYV=$2; shift 2 ;;
    --platform) PLATFORMS+=("$2"); shift 2 ;;
    --requirements) REQS=$2; shift 2 ;;
    --no-data) DATA=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "offline-bundle: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#PLATFORMS[@]} -gt 0 ] || PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$OUT/wheels"
OUT=$(cd "$OUT" && pwd)
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
if [ "${1:-}" = "--venv" ]; then
  "$PY" -m venv "$2"
  "$2/bin/python" -m pip install -q --no-index --find-links "$B/wheels" -r "$B/requirements.txt"
  echo "[install] $2: $("$2/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) packages from $B/wheels"
else
  REPO=${1:-$B/fedlib}
  if [ ! -f "$REPO/pyproject.toml" ]; then mkdir -p "$REPO" && tar -xzf "$B/fedlib-src.tar.gz" -C "$REPO"; fi
  (cd "$REPO" && FEDLIB_WHEELS="$B/wheels" FEDLIB_DATA="$B/data" PYTHON="$PY" bash scripts/setup.sh)
  echo "[install] done: cd $REPO, export the variables below, then make campaign SCALE=paper DEVICE=cuda BUDGET=25m"
fi
if [ -d "$B/data" ]; then echo "export FEDLIB_DATA=$B/data"; fi
if [ -f "$B/COMMIT" ]; then echo "export FEDLIB_COMMIT=$(cat "$B/COMMIT")"; fi
EOF
chmod +x "$OUT/install.sh"
echo "[bundle] $OUT: $(ls "$W" | wc -l) wheels ($(du -sh "$W" | cut -f1)) for CPython $PYV on ${PLATFORMS[*]}; install: bash $OUT/install.sh"
