#!/usr/bin/env bash
# Render every notebook from HEAD's committed records in a clean worktree (reproduce --no-train --write-back) and
# copy what changed (notebooks with their outputs, figures, summaries) into this tree. Records that a running
# campaign writes meanwhile are not mixed into the render: commit records first, then run this, then commit.
set -euo pipefail
SCALE=${SCALE:-quick}
root=$(git rev-parse --show-toplevel)
wt=$(mktemp -d)/render
git -C "$root" worktree add -q --detach "$wt" HEAD
trap 'git -C "$root" worktree remove --force "$wt"' EXIT
(cd "$wt" && PYTHONPATH="$wt" "$root/.venv/bin/python" -m fedlib.reproduce --scale "$SCALE" --no-train --write-back)
changed=$(git -C "$wt" status --porcelain --untracked-files=all | awk '{print $2}')  # new figures too
[ -z "$changed" ] || (cd "$wt" && tar cf - $changed) | (cd "$root" && tar xf -)
echo "copied from the render of $(git -C "$root" rev-parse --short HEAD): $(echo "$changed" | grep -c . || true) files"
