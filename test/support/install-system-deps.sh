#!/usr/bin/env bash
# Installs the real servers the test suite starts (redis-server, prometheus, chromium)
# and, under CI or with HOOKGATE_IMAGE_TESTS=1, the container tools of the image test
# (buildah, podman, runc: test/image/) from Debian's packages when they are missing.
# Runs before `npm test` (pretest) and in CI. Without root or apt-get it only says
# what is missing: suites that need a missing server then skip loudly, or fail under
# CI=true.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
# The image test is opt-in outside CI: its tools only when it runs.
if [ "${CI:-}" = "true" ] || [ "${HOOKGATE_IMAGE_TESTS:-}" = "1" ]; then
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
fi
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "hookgate tests: missing system packages: ${missing[*]}" >&2
  echo "  install them with: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
echo "hookgate tests: installing ${missing[*]} (Debian packages)" >&2
export DEBIAN_FRONTEND=noninteractive
# Keep apt from starting the services it installs: the tests start their own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
