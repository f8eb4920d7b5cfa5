#!/usr/bin/env bash
# Sweeps real-socket matches on loopback: RUNS matches over TRANSPORT (quic or udp), PARALLEL at
# a time, each `archers host` and PLAYERS `archers client` processes for MINUTES of play. A run
# passes when the host and every client exit 0 and every client's JSON says "ended":"finished".
# Usage: bash examples/archers/sweep-match-end.sh TRANSPORT [RUNS=100] [PARALLEL=8] [PLAYERS=2] [MINUTES=0.5]
set -euo pipefail
transport=$1 runs=${2:-100} parallel=${3:-8} players=${4:-2} minutes=${5:-0.5}
cd "$(dirname "$0")/../.."
cargo build --release -q -p archers
bin=$PWD/target/release/archers
one() {
  local dir; dir=$(mktemp -d)
  "$bin" host --transport "$transport" --players "$players" --minutes "$minutes" \
    --bind 127.0.0.1:0 >"$dir/host.out" 2>"$dir/host.err" &
  local host=$!
  for _ in $(seq 100); do grep -q LISTENING "$dir/host.out" && break; sleep 0.1; done
  local addr pin flag=--fingerprint clients=() failed=0
  read -r _ addr pin < <(grep LISTENING "$dir/host.out")
  [ "$transport" = udp ] && flag=--udp-key
  for token in $(awk '/^SEAT/ {print $3}' "$dir/host.out"); do
    "$bin" client --connect "$addr" "$flag" "$pin" --token "$token" --players "$players" \
      --minutes "$minutes" --json >"$dir/$token.out" 2>"$dir/$token.err" &
    clients+=($!)
  done
  for client in "${clients[@]}"; do wait "$client" || failed=1; done
  wait "$host" || failed=1
  local finished; finished=$(cat "$dir"/*.out | grep -c '"ended":"finished"' || true)
  if [ "$failed" = 0 ] && [ "$finished" = "$players" ]; then echo pass; else echo "fail: $dir"; fi
}
export -f one
export bin transport players minutes
results=$(seq "$runs" | xargs -P "$parallel" -I{} bash -c one)
passed=$(grep -c '^pass' <<<"$results" || true)
echo "$transport: $passed of $runs runs passed ($players players, $minutes min)"
grep '^fail' <<<"$results" || true
[ "$passed" = "$runs" ]
