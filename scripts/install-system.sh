#!/usr/bin/env bash
# System packages the agents need: bubblewrap sandboxes the workspace agent's shell (mkb_ray/agents/sandbox.py);
# setpriv (util-linux, essential on Debian/Ubuntu) drops the sandbox to an unprivileged uid when we run as root.
# Idempotent: does nothing when both already work.
set -euo pipefail

if bwrap --version >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; then
  echo "install-system: $(bwrap --version) and setpriv already present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-system: need root (or sudo) to apt-get install bubblewrap" >&2; exit 1
  fi
fi

if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update
  $SUDO apt-get install -y bubblewrap util-linux
elif command -v dnf >/dev/null 2>&1; then
  $SUDO dnf install -y bubblewrap util-linux
else
  echo "install-system: no apt-get or dnf; install bubblewrap (bwrap) with your package manager" >&2; exit 1
fi
bwrap --version
