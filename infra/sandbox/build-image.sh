#!/bin/sh
# Builds the sandbox image (infra/sandbox/Dockerfile) from the compiled agent in dist/ and the
# agent's runtime packages in node_modules/, copied into a small private build context: the
# daemon gets nothing else of the tree, and the build needs no npm registry (only Debian's
# packages, hence --network host).
#
#   sh infra/sandbox/build-image.sh              build (run `npm run build` first; `npm run sandbox:image` does both)
#   sh infra/sandbox/build-image.sh --if-stale   build only if the image is missing or was built from other inputs
#
# Environment: TOOLGATE_SANDBOX_IMAGE (tag, default toolgate-sandbox:local), NODE_IMAGE and
# NODE_BUILD_IMAGE (base images, default the public node:24-bookworm-slim / node:24-bookworm),
# SANDBOX_PACKAGES (Debian packages for commands; default: the Dockerfile's).
set -eu
cd "$(dirname "$0")/../.."

# One build at a time (test files running in parallel each ask for the image): the second one
# waits, then finds the image up to date.
if [ -z "${TOOLGATE_SANDBOX_IMAGE_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
  export TOOLGATE_SANDBOX_IMAGE_LOCKED=1
  exec flock "${TMPDIR:-/tmp}/toolgate-sandbox-image.lock" sh "$0" "$@"
fi

TAG=${TOOLGATE_SANDBOX_IMAGE:-toolgate-sandbox:local}
# Base images: as given; else a local stand-in when this daemon has one (a machine without a
# registry must never be sent looking for the public name); else the public image.
pick() { # variable value, local stand-in, public name
  if [ -n "$1" ]; then echo "$1"; elif docker image inspect "$2" >/dev/null 2>&1; then echo "$2"; else echo "$3"; fi
}
NODE_IMAGE=$(pick "${NODE_IMAGE:-}" local/node:24-bookworm-slim node:24-bookworm-slim)
NODE_BUILD_IMAGE=$(pick "${NODE_BUILD_IMAGE:-}" local/node:24-bookworm node:24-bookworm)
# The packages the agent loads (and node-addon-api, which node-pty compiles with; undici, which
# commands' Node programs load for fetch through the egress proxy on a Node older than the
# image's). Checked below: each one's own dependencies must be listed too.
PACKAGES="zod picomatch diff node-pty node-addon-api undici"

[ -f dist/executor/agent/main.js ] || { echo "build-image: dist/ has no agent; run npm run build first" >&2; exit 1; }
for p in $PACKAGES; do
  [ -f "node_modules/$p/package.json" ] || { echo "build-image: node_modules/$p is missing; run npm ci first" >&2; exit 1; }
done
node -e '
  const list = process.argv.slice(1);
  for (const p of list) {
    const deps = Object.keys(require(`./node_modules/${p}/package.json`).dependencies || {});
    const missing = deps.filter((d) => !list.includes(d));
    if (missing.length) { console.error(`build-image: ${p} needs ${missing.join(", ")}: add it to PACKAGES`); process.exit(1); }
  }' $PACKAGES

ctx=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-sandbox-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT INT TERM
mkdir -p "$ctx/dist/executor" "$ctx/node_modules"
cp -R dist/shared "$ctx/dist/shared"
cp -R dist/executor/agent "$ctx/dist/executor/agent"
find "$ctx/dist" -name '*.map' -exec rm -f {} +
for p in $PACKAGES; do cp -R "node_modules/$p" "$ctx/node_modules/$p"; done
# node-pty is compiled in the image: never send this host's build, nor the other platforms' prebuilds.
rm -rf "$ctx/node_modules/node-pty/build" "$ctx/node_modules/node-pty/prebuilds" "$ctx/node_modules/node-pty/third_party"
cp infra/sandbox/Dockerfile "$ctx/Dockerfile"

# The inputs' fingerprint, kept as a label: --if-stale rebuilds only when it changed.
source_hash=$( {
  printf '%s\n' "${SANDBOX_PACKAGES-default}"
  tar -C "$ctx" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - .
} | sha256sum | cut -c1-32)

if [ "${1:-}" = "--if-stale" ]; then
  have=$(docker image inspect -f '{{ index .Config.Labels "toolgate.source" }}' "$TAG" 2>/dev/null || true)
  if [ "$have" = "$source_hash" ]; then echo "build-image: $TAG is up to date"; exit 0; fi
fi

set -- --network host -t "$TAG" --label "toolgate.source=$source_hash" \
  --build-arg "NODE_IMAGE=$NODE_IMAGE" --build-arg "NODE_BUILD_IMAGE=$NODE_BUILD_IMAGE"
[ -n "${SANDBOX_PACKAGES+set}" ] && set -- "$@" --build-arg "SANDBOX_PACKAGES=$SANDBOX_PACKAGES"
echo "build-image: building $TAG from $NODE_IMAGE (build stage $NODE_BUILD_IMAGE)"
docker build -q "$@" "$ctx"
