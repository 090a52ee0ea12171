#!/usr/bin/env bash
# checkpoint_on_ranks.sh PROGRAM DIR MPIEXEC FLAGS...: saves a distributed checkpoint on 4 ranks
# (a [2, 2] mesh) and loads it on 1, 2 and 4 ranks (one mesh axis); the step after loading must
# give the loss the saving job got after saving, to 1e-10.
set -eu
program=$1 dir=$2 mpiexec=$3
shift 3
rm -rf "$dir"
saved=$("$mpiexec" -n 4 "$@" "$program" save "$dir" | awk '/third step loss/ {print $4}')
for ranks in 1 2 4; do
  if [ "$ranks" = 1 ]; then
    loaded=$("$program" load "$dir" | awk '/third step loss/ {print $4}')
  else
    loaded=$("$mpiexec" -n "$ranks" "$@" "$program" load "$dir" | awk '/third step loss/ {print $4}')
  fi
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-10 * abs(a) else 1)" \
    "$saved" "$loaded" || { echo "checkpoint on ranks: saved on 4 ranks: $saved; loaded on $ranks: $loaded"; exit 1; }
  echo "loaded on $ranks ranks: third step loss $loaded"
done
echo "checkpoint on ranks: saved on 4, loaded on 1, 2 and 4 ranks, the same loss ($saved)"
