#!/usr/bin/env bash
# generate_on_ranks.sh DIR EDDY COMPARE CONFIG LAUNCHER...: writes CONFIG's dataset with one plain
# process and with `LAUNCHER... EDDY generate` (mpiexec -n 2 ...), and passes when COMPARE finds
# the two files equal. The ranks write into a folder not yet made: rank 0 makes it, and the others
# had looked for it before it was there.
set -eu
dir=$1 eddy=$2 compare=$3 config=$4
shift 4
rm -rf "$dir"
mkdir -p "$dir"
"$eddy" generate "$config" output.path="$dir/one_process.h5"
"$@" "$eddy" generate "$config" output.path="$dir/new_folder/ranks.h5"
"$compare" "$dir/one_process.h5" "$dir/new_folder/ranks.h5"
