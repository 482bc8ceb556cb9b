#!/usr/bin/env bash
# Side-by-side benchmark of redis-server and kayvee-server (see bench/README.md).
# Same as `cargo xtask bench`; arguments go to compare.py (e.g. --quick).
set -euo pipefail
exec python3 "$(dirname "$0")/compare.py" "$@"
