#!/usr/bin/env bash
# Renders a run's HTML report to a PNG with headless Chromium, to look at a run without a browser
# or to check that the page renders.
#
#   scripts/render_report.sh RUN_DIR [OUT.png]      writes RUN_DIR/report.html (lockstep report)
#                                                   and OUT.png (default RUN_DIR/report.png)
#   scripts/render_report.sh PAGE.html [OUT.png]    screenshots an existing page
#
# Environment: LOCKSTEP (the lockstep binary, default build/lockstep), CHROMIUM (the browser),
# WINDOW_SIZE (default 1280,2600). Installs Debian's `chromium` with apt when no browser is found.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 RUN_DIR|PAGE.html [OUT.png]" >&2
  exit 2
fi
target=$1
window_size=${WINDOW_SIZE:-1280,2600}

if [[ -d "$target" ]]; then
  lockstep=${LOCKSTEP:-build/lockstep}
  if [[ ! -x "$lockstep" ]]; then
    echo "error: $lockstep not found; build it (ninja -C build lockstep) or set LOCKSTEP" >&2
    exit 1
  fi
  page="$target/report.html"
  "$lockstep" report "$target" --out "$page"
  out=${2:-$target/report.png}
elif [[ -f "$target" ]]; then
  page=$target
  out=${2:-${target%.html}.png}
else
  echo "error: $target is neither a run directory nor a file" >&2
  exit 1
fi

browser=${CHROMIUM:-}
if [[ -z "$browser" ]]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" > /dev/null; then browser=$candidate; break; fi
  done
fi
if [[ -z "$browser" ]]; then
  echo "chromium not found: installing Debian's chromium package" >&2
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get install -y chromium > /dev/null
  browser=chromium
fi

page_url="file://$(realpath "$page")"
mkdir -p "$(dirname "$out")"
out_abs="$(realpath -m "$out")"
# --no-sandbox: Chromium refuses to run as root (containers, CI) with its sandbox on. The page
# is our own static file with no script.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 180 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --hide-scrollbars --user-data-dir="$profile" --window-size="$window_size" \
  --screenshot="$out_abs" "$page_url" > /dev/null 2>&1 || {
    echo "error: $browser could not render $page" >&2
    exit 1
  }
if [[ ! -s "$out_abs" ]]; then
  echo "error: no screenshot written to $out_abs" >&2
  exit 1
fi
echo "wrote $out_abs"
