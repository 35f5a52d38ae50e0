#!/usr/bin/env bash
# Ensures the Debian packages brigade builds against are present. Installs them with apt-get
# when run as root; otherwise prints the exact command to run and fails.
set -euo pipefail

packages=(build-essential cmake pkg-config libcjson-dev libopenblas-dev libutf8proc-dev libpcre2-dev)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  echo "brigade: installing missing packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "brigade: missing packages: ${missing[*]}" >&2
  echo "brigade: run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
