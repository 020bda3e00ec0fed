#!/usr/bin/env bash
# Idempotent setup: a virtual environment in .venv with fedlib and its pinned dependencies, and Fashion-MNIST.
# Re-running is cheap: the install is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  # torch==2.14.1 / torchvision==0.29.1 wheels are cached locally for Python 3.11; prefer it.
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY=$cand; break; }; done
fi

stamp=.venv/.fedlib-install-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "[setup] creating .venv with $($PY --version) and installing fedlib[dev,ray] (first run: several minutes)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  if [ -n "${FEDLIB_WHEELS:-}" ]; then  # an offline bundle (scripts/offline-bundle.sh): no package index
    .venv/bin/python -m pip install -q --no-index --find-links "$FEDLIB_WHEELS" -e ".[dev,ray]"
  else
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[dev,ray]"
  fi
  rm -f .venv/.fedlib-install-*
  touch "$stamp"
fi

# Fashion-MNIST, the embedded default dataset (Debian package; files land in /usr/share/datasets/fashion-mnist).
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && [ -z "${FEDLIB_DATA:-}" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing Debian's dataset-fashion-mnist"
    (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; }) \
      || echo "[setup] could not install dataset-fashion-mnist; put the four idx .gz files under \$FEDLIB_DATA/fashion-mnist"
  else
    echo "[setup] Fashion-MNIST not found: run 'sudo apt-get install dataset-fashion-mnist' or set FEDLIB_DATA"
  fi
fi
echo "[setup] ok: $(.venv/bin/python -c 'import torch, fedlib; print("fedlib", fedlib.__version__, "torch", torch.__version__)')"
