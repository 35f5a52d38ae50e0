#!/usr/bin/env bash
# Ensures the Debian packages brigade builds against are present, Open MPI included (`deps.sh
# fuzz`: also those of make fuzz and make test-clang). Installs them with apt-get
# when run as root; otherwise prints the exact command to run and fails.
#
# Another apt or dpkg run (unattended upgrades, a second terminal) holds the package manager's
# lock: apt-get waits for it up to BRIGADE_APT_LOCK_WAIT seconds (default 300), saying so, instead
# of failing at once; a failed install prints apt-get's own last lines and fails.
set -euo pipefail

packages=(build-essential cmake pkg-config libcjson-dev libopenblas-dev libutf8proc-dev libpcre2-dev libpng-dev
  libjpeg62-turbo-dev)
# Open MPI, for `mpirun -np N brigade train ...` (the build finds it by pkg-config and works
# without it; BRIGADE_NO_MPI=1 leaves it out here too).
[ -z "${BRIGADE_NO_MPI:-}" ] && packages+=(openmpi-bin libopenmpi-dev)
# iproute2 (ip netns), for tests/cli_mpi_hosts.sh's hosts: network namespaces joined by veth pairs.
packages+=(iproute2)
# `deps.sh fuzz`: also clang and its libFuzzer/sanitizer runtime, for make fuzz and make test-clang.
[ "${1:-}" = fuzz ] && packages+=(clang libclang-rt-14-dev)

# Optional: Chromium, only for the report's browser test (tests/cli_report_browser.sh, which
# skips without it). Where it cannot be installed the build goes on; BRIGADE_NO_CHROMIUM=1
# leaves it out.
optional=()
[ -z "${BRIGADE_NO_CHROMIUM:-}" ] && optional+=(chromium)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=() missing_optional=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done
[ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if [ ${#missing[@]} -eq 0 ]; then
    echo "brigade: optional, for the report's browser test: sudo apt-get install -y ${missing_optional[*]}" >&2
    exit 0
  fi
  echo "brigade: missing packages: ${missing[*]}" >&2
  echo "brigade: run: sudo apt-get install -y ${missing[*]} ${missing_optional[*]}" >&2
  exit 1
fi

wait_s=${BRIGADE_APT_LOCK_WAIT:-300}
# apt and dpkg lock with fcntl, which no shell tool can probe without taking the lock; a running
# apt/dpkg process is the sign that apt-get will have to wait.
if pgrep -x 'apt|apt-get|aptitude|dpkg|unattended-upgr' >/dev/null 2>&1; then
  echo "brigade: another package manager run is active; apt-get will wait up to ${wait_s}s for its lock"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt_get() { apt-get -o DPkg::Lock::Timeout="$wait_s" "$@"; }

echo "brigade: installing missing packages: ${missing[*]} ${missing_optional[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt_get update -qq >"$log" 2>&1; then
  # A stale or unreachable mirror need not stop an install from the lists already there.
  echo "brigade: warning: apt-get update failed (trying the install anyway):" >&2
  tail -n 3 "$log" >&2
fi
if [ ${#missing[@]} -gt 0 ] && ! apt_get install -y -qq "${missing[@]}" >"$log" 2>&1; then
  echo "brigade: apt-get install ${missing[*]} failed:" >&2
  tail -n 5 "$log" >&2
  exit 1
fi
if [ ${#missing_optional[@]} -gt 0 ] && ! apt_get install -y -qq "${missing_optional[@]}" >"$log" 2>&1; then
  echo "brigade: warning: optional ${missing_optional[*]} not installed (the report's browser test will skip):" >&2
  tail -n 3 "$log" >&2
fi
