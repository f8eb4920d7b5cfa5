#!/usr/bin/env bash
# Plays a match against bots in headless Chromium and saves the page's canvas as a PNG:
# `archers serve` hosts it, the page (with `&autoplay`, a bot plays the browser's seat) sends
# its canvas S seconds into the match, and the run fails unless every player agreed.
#
#   examples/archers-web/screenshot.sh [OUT.png] [SECONDS]   (defaults: docs/archers-web.png, 20)
#
# Installs what it needs if missing: Chromium (Debian's package) and the wasm32-unknown-unknown
# target (rustup). Builds the demo in release; `archers serve` builds the page's module.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-docs/archers-web.png}
after=${2:-20}

if ! command -v chromium >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown

cargo build --release -p archers
scratch=$(mktemp -d)
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$scratch" 2>/dev/null || true
}
trap cleanup EXIT
rm -f "$out"
target/release/archers serve --players 4 --minutes 1 --seed 2 --http 127.0.0.1:0 \
    --screenshot "$out" >"$scratch/serve.out" 2>"$scratch/serve.err" &
serve=$!
for _ in $(seq 600); do
    grep -q '^URL ' "$scratch/serve.out" && break
    sleep 0.5
done
url=$(sed -n 's/^URL //p' "$scratch/serve.out")
[ -n "$url" ] || { cat "$scratch/serve.err"; exit 1; }
chromium --headless --no-sandbox --disable-gpu --no-first-run --window-size=760,800 \
    --user-data-dir="$scratch/profile" "$url&autoplay&shot=$after" >/dev/null 2>&1 &
wait "$serve" || { cat "$scratch/serve.out" "$scratch/serve.err"; exit 1; }
test -s "$out"
head -n 4 "$scratch/serve.out"
echo "saved $out"
