#!/usr/bin/env bash
# Installs what `npm run image` needs (buildah builds, podman and runc run the image)
# from Debian's packages when missing. dpkg-deb, apt-get and tar come with Debian.
# Without root or apt-get it only says what is missing and fails.
set -euo pipefail
missing=()
for tool in buildah podman runc; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "hookgate image: missing tools: ${missing[*]}" >&2
  echo "  install them with: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "hookgate image: installing ${missing[*]} (Debian packages)" >&2
export DEBIAN_FRONTEND=noninteractive
# Keep apt from starting the services it installs (podman ships a socket unit).
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
