#!/usr/bin/env bash
# npm run stack:up — the docker-compose stack on one Docker host: Caddy on https://127.0.0.1:8443,
# the gateway, Redis and the executor, host networking. Works with docker-compose (v1) or the
# Compose v2 plugin (`docker compose`), with or without a container registry.
#
#   1. creates .env with random secrets on the first run (adds any secret an older .env lacks);
#   2. picks the local stand-in images (local/node, local/redis, local/caddy) for any *_IMAGE
#      variable not set, when they exist, and records them in .env (so plain compose commands use
#      them too); any other missing base image is pulled, unless TOOLGATE_STACK_PULL=0 (a host
#      without a registry: then it stops and names the image);
#   3. builds the service image (layers are reused; an unchanged tree takes seconds) and, for
#      the docker sandbox, the sandbox image when it is missing;
#   4. starts the stack, waits until every service is healthy, writes the CA certificate that
#      clients must trust to .toolgate/ca.crt, checks Caddy -> gateway once, and prints the URL.
#
# Environment: TOOLGATE_STACK_TIMEOUT (seconds to wait for health, default 180);
# TOOLGATE_STACK_CA_FILE (where to write the CA, default .toolgate/ca.crt); any variable of .env
# (the shell's value wins, as with docker-compose itself).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { echo "stack-up: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

if command -v docker-compose >/dev/null; then
  compose() { docker-compose "$@"; }
elif docker compose version >/dev/null 2>&1; then
  compose() { docker compose "$@"; }
else
  fail "neither docker-compose (v1) nor the Compose v2 plugin (docker compose) is installed"
fi
docker info >/dev/null 2>&1 || fail "no Docker engine answers: start dockerd (docs/deployment.md)"

# --- 1. .env: secrets are made once and kept; a value the shell sets wins, as in compose.
random() { node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("base64url"))'; }
env_get() { [ -f .env ] && sed -n "s/^$1=//p" .env | tail -n 1; }
env_add() { # name value: fills an empty or missing entry, keeps a set one
  [ -z "$(env_get "$1")" ] || return 0
  if grep -q "^$1=\$" .env; then
    sed -i "s|^$1=\$|$1=$2|" .env
  else
    printf '%s=%s\n' "$1" "$2" >>.env
  fi
  say "wrote $1 to .env"
}
if [ ! -f .env ]; then
  (umask 077 && printf '# Made by npm run stack:up; see .env.example for every setting. Keep this file private.\n' >.env)
fi
chmod 600 .env
env_add COMPOSE_PROJECT_NAME toolgate
env_add TOOLGATE_JWT_SECRET "$(random)"
env_add TOOLGATE_API_KEY "$(random)"
env_add TOOLGATE_REDIS_PASSWORD "$(random)"
env_add TOOLGATE_DATA_DIR "$root/.toolgate/stack"
setting() { # the shell's value, else .env's, else $2
  local value=${!1:-}
  [ -n "$value" ] || value=$(env_get "$1")
  printf '%s' "${value:-$2}"
}
data_dir=$(setting TOOLGATE_DATA_DIR "")
case $data_dir in /*) ;; *) fail "TOOLGATE_DATA_DIR must be an absolute path (got \"$data_dir\"): sandbox containers mount it by its host path" ;; esac
mkdir -p "$data_dir"
# The executor loop-mounts workspace images under the data directory (the disk quota); the Docker
# daemon sees them only if the data directory is a shared mount (compose binds it rshared).
# systemd hosts share / already; elsewhere (this machine) make the directory its own shared mount.
if [ "$(setting TOOLGATE_WORKSPACE_QUOTA_BYTES 1G)" != 0 ] && ! findmnt -n -o PROPAGATION --target "$data_dir" | grep -q shared; then
  [ "$(id -u)" = 0 ] || fail "$data_dir is not on a shared mount, which the workspace quota needs: run as root, or 'mount --bind $data_dir $data_dir && mount --make-shared $data_dir' as root, or set TOOLGATE_WORKSPACE_QUOTA_BYTES=0"
  if ! findmnt -n --mountpoint "$data_dir" >/dev/null; then
    mount --bind "$data_dir" "$data_dir"
    # stack:down undoes the bind mount this made (and only that one).
    touch "$data_dir/.stack-bind-mount"
  fi
  mount --make-shared "$data_dir"
  say "made $data_dir a shared mount (for the executor's workspace images)"
fi
site=$(setting TOOLGATE_SITE_ADDRESS https://127.0.0.1:8443)
tls=$(setting TOOLGATE_TLS internal)
sandbox=$(setting TOOLGATE_SANDBOX docker)
sandbox_image=$(setting TOOLGATE_SANDBOX_IMAGE toolgate-sandbox:local)
service_image=$(setting TOOLGATE_IMAGE toolgate:local)

# --- 2. Images: the local stand-ins when present; never a pull unless allowed.
for pair in NODE_IMAGE=local/node:24-bookworm-slim NODE_BUILD_IMAGE=local/node:24-bookworm \
  REDIS_IMAGE=local/redis:7 CADDY_IMAGE=local/caddy:2; do
  var=${pair%%=*}
  if [ -z "$(setting "$var" "")" ] && docker image inspect "${pair#*=}" >/dev/null 2>&1; then
    # Recorded in .env, so plain compose commands here (exec, a key rotation) use it too.
    env_add "$var" "${pair#*=}"
  fi
done
declare -A public=([NODE_IMAGE]=node:24-bookworm-slim [NODE_BUILD_IMAGE]=node:24-bookworm [REDIS_IMAGE]=redis:7 [CADDY_IMAGE]=caddy:2)
for var in NODE_IMAGE NODE_BUILD_IMAGE REDIS_IMAGE CADDY_IMAGE; do
  image=$(setting "$var" "${public[$var]}")
  if ! docker image inspect "$image" >/dev/null 2>&1 && [ "${TOOLGATE_STACK_PULL:-1}" = 0 ]; then
    fail "image $image ($var) is not on this machine and TOOLGATE_STACK_PULL=0: load or build it, or set $var to an image you have (docs/deployment.md, \"Without a registry\")"
  fi
  say "$var=$image"
done

# --- 3. Builds. A TLS-intercepting proxy's CA reaches the build through infra/build-ca/.
cafile=$(npm config get cafile 2>/dev/null || true)
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ] && ! cmp -s "$cafile" infra/build-ca/host-npm-cafile.crt; then
  cp "$cafile" infra/build-ca/host-npm-cafile.crt
  say "the host's npm CA bundle ($cafile) is used by the image build (infra/build-ca/)"
fi
mkdir -p .toolgate
build_log=$root/.toolgate/stack-build.log
say "building $service_image (log: $build_log)"
started=$SECONDS
if ! compose build gateway >"$build_log" 2>&1; then
  tail -n 40 "$build_log" >&2
  fail "the image build failed; the whole log is in $build_log"
fi
say "image ready in $((SECONDS - started)) s"
if [ "$sandbox" = docker ]; then
  # The sandbox image is built from the compiled agent in dist/ (npm run build); rebuilt only
  # when its inputs changed. dist/ is left alone when present: rewriting it under running tests
  # would be a race, so after changing the sources run `npm run build` (or npm run sandbox:image).
  if [ -f infra/sandbox/build-image.sh ]; then
    [ -f dist/executor/agent/main.js ] || npm run --silent build >>"$build_log" 2>&1 || fail "npm run build failed; see $build_log"
    TOOLGATE_SANDBOX_IMAGE=$sandbox_image sh infra/sandbox/build-image.sh --if-stale >>"$build_log" 2>&1 || {
      tail -n 40 "$build_log" >&2
      fail "building the sandbox image $sandbox_image failed; see $build_log"
    }
    say "sandbox image $sandbox_image ready"
  elif ! docker image inspect "$sandbox_image" >/dev/null 2>&1; then
    fail "the docker sandbox needs the image $sandbox_image (or set TOOLGATE_SANDBOX=none in .env for a trial)"
  fi
fi

# --- 4. Start, wait for health.
say "starting the stack"
compose up -d --no-build --remove-orphans >>"$build_log" 2>&1 || {
  tail -n 20 "$build_log" >&2
  fail "compose up failed; see $build_log"
}
timeout=${TOOLGATE_STACK_TIMEOUT:-180}
deadline=$((SECONDS + timeout))
services=(redis gateway executor caddy)
while :; do
  waiting=()
  for service in "${services[@]}"; do
    id=$(compose ps -q "$service" 2>/dev/null || true)
    state=$([ -n "$id" ] && docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}} {{.RestartCount}}' "$id" 2>/dev/null || echo "missing")
    case $state in
      "running healthy "*) ;;
      *)
        waiting+=("$service($state)")
        restarts=${state##* }
        if [ "${state%% *}" = exited ] || { [ -n "$restarts" ] && [ "$restarts" -gt 2 ] 2>/dev/null; }; then
          compose logs --tail 30 "$service" >&2 || true
          fail "$service does not stay up ($state); its last log lines are above"
        fi
        ;;
    esac
  done
  [ ${#waiting[@]} -eq 0 ] && break
  if [ $SECONDS -ge $deadline ]; then
    for service in "${services[@]}"; do compose logs --tail 15 "$service" >&2 || true; done
    fail "not healthy after ${timeout}s: ${waiting[*]}"
  fi
  sleep 1
done
say "all services healthy"

# The CA clients trust: Caddy's internal root (it only changes when the caddy-data volume goes).
ca=${TOOLGATE_STACK_CA_FILE:-$root/.toolgate/ca.crt}
if [ "$tls" = internal ]; then
  for _ in $(seq 50); do
    compose exec -T caddy cat /data/caddy/pki/authorities/local/root.crt >"$ca.tmp" 2>/dev/null && [ -s "$ca.tmp" ] && break
    sleep 0.2
  done
  [ -s "$ca.tmp" ] || fail "Caddy's CA certificate did not appear in its data volume"
  mv "$ca.tmp" "$ca"
else
  rm -f "$ca"
fi

# One request through the whole chain: Caddy (TLS, API key) -> gateway, which must answer
# its own 401 for a request without a token.
TOOLGATE_API_KEY=$(setting TOOLGATE_API_KEY "") STACK_URL="$site/" STACK_CA=$([ -f "$ca" ] && echo "$ca" || true) node -e '
  const { Agent } = require("undici");
  const fs = require("fs");
  const ca = process.env.STACK_CA ? fs.readFileSync(process.env.STACK_CA) : undefined;
  const dispatcher = new Agent({ connect: ca ? { ca } : {} });
  require("undici").fetch(process.env.STACK_URL, { dispatcher, method: "POST",
    headers: { "content-type": "application/json", "x-api-key": process.env.TOOLGATE_API_KEY },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }) })
  .then(async (r) => {
    const auth = r.headers.get("www-authenticate") || "";
    if (r.status === 401 && auth.startsWith("Bearer")) process.exit(0);
    console.error(`stack-up: expected the gateway'\''s 401 through Caddy, got ${r.status}: ${await r.text()}`);
    process.exit(1);
  }, (e) => { console.error(`stack-up: ${process.env.STACK_URL}: ${e.cause?.message || e.message}`); process.exit(1); });
' || fail "the stack is up but ${site}/ does not reach the gateway"

say "ready in $((SECONDS - started)) s"
cat <<EOF
toolgate is up: $site/
  CA certificate: $([ -f "$ca" ] && echo "$ca" || echo "(TOOLGATE_TLS=$tls: your own certificate)")
  API key:        TOOLGATE_API_KEY in $root/.env (send it as X-API-Key)
  a token:        TOKEN=\$(docker-compose exec -T gateway toolgate token --id alice | head -1)
  the shim:       TOOLGATE_TOKEN=<token> TOOLGATE_API_KEY=<key> node dist/bin/toolgate.js shim --url $site/$([ -f "$ca" ] && echo " --ca $ca")
  stop:           npm run stack:down
EOF
