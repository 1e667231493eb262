#!/usr/bin/env bash
# npm run stack:down — removes the stack's containers (and the sandbox containers its executor
# started). Volumes stay, so Redis's queues and Caddy's CA survive a restart; pass --volumes to
# delete them too (the next stack:up makes a new CA). Workspaces live in TOOLGATE_DATA_DIR on
# the host and are never deleted here.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "stack-down: $*" >&2; }
args=(down --remove-orphans --timeout 20)
for arg in "$@"; do
  case $arg in
    --volumes | -v) args+=(--volumes) ;;
    *) say "unknown option $arg (only --volumes)"; exit 2 ;;
  esac
done
if command -v docker-compose >/dev/null; then
  compose() { docker-compose "$@"; }
elif docker compose version >/dev/null 2>&1; then
  compose() { docker compose "$@"; }
else
  say "neither docker-compose (v1) nor the Compose v2 plugin (docker compose) is installed"
  exit 1
fi
docker info >/dev/null 2>&1 || { say "no Docker engine answers"; exit 1; }
# Compose refuses a file whose required variables are unset, even to take it down: without a
# .env (never brought up here), placeholders let it read the file.
if [ ! -f .env ]; then
  export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-toolgate} TOOLGATE_JWT_SECRET=unset TOOLGATE_API_KEY=unset \
    TOOLGATE_REDIS_PASSWORD=unset TOOLGATE_DATA_DIR=/nonexistent
fi
compose "${args[@]}"
# Sandboxes the executor could not stop itself (it was killed): they carry its id.
executor_id=${TOOLGATE_EXECUTOR_ID:-$( [ -f .env ] && sed -n 's/^TOOLGATE_EXECUTOR_ID=//p' .env | tail -n 1)}
executor_id=${executor_id:-toolgate-compose-executor}
leftovers=$(docker ps -aq --filter label=toolgate.sandbox=1 --filter "label=toolgate.executor=$executor_id")
if [ -n "$leftovers" ]; then
  # shellcheck disable=SC2086
  docker rm -f $leftovers >/dev/null
  say "removed $(echo "$leftovers" | wc -l) sandbox container(s) left by executor $executor_id"
fi
# Workspace images a killed executor left mounted (it unmounts them itself when it stops).
data_dir=${TOOLGATE_DATA_DIR:-$( [ -f .env ] && sed -n 's/^TOOLGATE_DATA_DIR=//p' .env | tail -n 1)}
if [ -n "$data_dir" ] && [ -d "$data_dir/workspaces" ]; then
  for m in $(findmnt -rn -o TARGET | grep "^$data_dir/workspaces/" || true); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
    say "unmounted the workspace image left at $m"
  done
fi
# The shared bind mount stack:up made of the data directory (for the quota's images).
if [ -n "$data_dir" ] && [ -f "$data_dir/.stack-bind-mount" ]; then
  rm -f "$data_dir/.stack-bind-mount"
  umount "$data_dir" 2>/dev/null || umount -l "$data_dir" || true
  say "undid the shared bind mount of $data_dir"
fi
say "stopped"
