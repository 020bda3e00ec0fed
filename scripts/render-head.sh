#!/usr/bin/env bash
# Render every notebook from HEAD's committed records in a clean worktree (reproduce --no-train --write-back) and
# copy what changed (notebooks with their outputs, figures, summaries) into this tree. Records that a running
# campaign writes meanwhile are not mixed into the render: commit records first, then run this, then commit.
# An uncommitted edit is never overwritten: the script refuses to start while a file it writes differs from HEAD,
# and a file edited while it rendered is copied to .render-backup/<time>/ before the render replaces it.
# Extra arguments go to fedlib.companion.reproduce (e.g. --only 01).
set -euo pipefail
SCALE=${SCALE:-quick}
root=$(git rev-parse --show-toplevel)
writes=(notebooks figures results/summary 'results/summary-*.md' 'results/claims-*.md')
edited=$(git -C "$root" diff --name-only HEAD -- "${writes[@]}")
if [ -n "$edited" ]; then
  echo "render-head: nothing was rendered: uncommitted changes a render would overwrite:" \
       "$(echo "$edited" | tr '\n' ' ')- commit them, or stash them (git stash), then run it again." >&2
  exit 1
fi
wt=$(mktemp -d)/render
git -C "$root" worktree add -q --detach "$wt" HEAD
trap 'git -C "$root" worktree remove --force "$wt"' EXIT
(cd "$wt" && PYTHONPATH="$wt" "$root/.venv/bin/python" -m fedlib.companion.reproduce --scale "$SCALE" --no-train \
  --write-back "$@")
changed=$(git -C "$wt" status --porcelain --untracked-files=all | awk '{print $2}')  # new figures too
backup="$root/.render-backup/$(date +%Y%m%d-%H%M%S)"
kept=0
for f in $changed; do  # edited here while it rendered (differs from HEAD, or untracked and not the render's)
  [ -e "$root/$f" ] || continue
  if git -C "$root" ls-files --error-unmatch -- "$f" >/dev/null 2>&1; then
    git -C "$root" diff --quiet HEAD -- "$f" && continue
  else
    cmp -s "$root/$f" "$wt/$f" && continue
  fi
  mkdir -p "$backup/$(dirname "$f")" && cp -p "$root/$f" "$backup/$f" && kept=$((kept + 1))
done
[ -z "$changed" ] || (cd "$wt" && tar cf - $changed) | (cd "$root" && tar xf -)
echo "copied from the render of $(git -C "$root" rev-parse --short HEAD): $(echo "$changed" | grep -c . || true) files"
if [ "$kept" -gt 0 ]; then
  echo "render-head: $kept file(s) edited during the render were replaced; your copies are in ${backup#$root/}/"
fi
