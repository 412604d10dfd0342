#!/usr/bin/env bash
# System packages: bubblewrap sandboxes the workspace agent's shell (mkb_ray/agents/sandbox.py); setpriv
# (util-linux, essential on Debian/Ubuntu) drops the sandbox to an unprivileged uid when we run as root; chromium
# renders `mkb report`'s HTML headless in tests/test_report.py (the report itself needs no browser).
# Idempotent: installs only what is missing.
set -euo pipefail

missing=()
bwrap --version >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
want_chromium=0
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || want_chromium=1
if [ ${#missing[@]} -eq 0 ] && [ $want_chromium -eq 0 ]; then
  echo "install-system: $(bwrap --version), setpriv and chromium already present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-system: need root (or sudo) to install ${missing[*]} chromium" >&2; exit 1
  fi
fi

# chromium is only for the report's browser test: a failed install warns (that test then skips, saying why).
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ $want_chromium -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium \
    || echo "install-system: WARNING: chromium did not install; tests/test_report.py's browser check will skip" >&2
elif command -v dnf >/dev/null 2>&1; then
  [ ${#missing[@]} -eq 0 ] || $SUDO dnf install -y "${missing[@]}"
  [ $want_chromium -eq 0 ] || $SUDO dnf install -y chromium \
    || echo "install-system: WARNING: chromium did not install; tests/test_report.py's browser check will skip" >&2
else
  echo "install-system: no apt-get or dnf; install ${missing[*]} (and chromium) with your package manager" >&2; exit 1
fi
bwrap --version
