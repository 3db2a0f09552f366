#!/usr/bin/env bash
# `tlt` runs with a short OpenMP spin (runtime/torch_env.h): libgomp reads GOMP_SPINCOUNT when it
# is loaded, so tlt re-executes itself with it set; a policy the user set is left alone.
# Usage: openmp_wait.sh TLT_BINARY
set -u
tlt=$1; fail=0
expect() {  # expect WANT ENV... : `tlt version` under ENV reports WANT
  local got
  got=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u TLT_NO_REEXEC "${@:2}" "$tlt" version | grep '^openmp wait ')
  [ "$got" = "openmp wait $1" ] || { echo "FAIL: with ${*:2}: '$got', want 'openmp wait $1'"; fail=1; }
}
expect GOMP_SPINCOUNT=300
expect OMP_WAIT_POLICY=passive OMP_WAIT_POLICY=passive
expect GOMP_SPINCOUNT=20000 GOMP_SPINCOUNT=20000
expect default TLT_NO_REEXEC=1
# After the re-exec the process keeps its name (ps, top, pkill): "tlt", not "exe".
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$tlt" generate --preset tiny --copies 32 --max-tokens 1000 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do  # until the re-executed image runs (its environment has the variable)
  tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -q '^GOMP_SPINCOUNT=' && break
  sleep 0.1
done
comm=$(cat "/proc/$pid/comm" 2>/dev/null)
kill -0 "$pid" 2>/dev/null || { echo "FAIL: the generate run (about 9 s here) ended before it could be checked"; fail=1; }
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
[ "$comm" = tlt ] || { echo "FAIL: the re-executed process is named '$comm', want 'tlt'"; fail=1; }
# The re-executed process is the same command: its exit status and output reach the caller.
"$tlt" run /nonexistent.yaml >/dev/null 2>&1 && { echo "FAIL: a missing manifest ran"; fail=1; }
[ $fail -eq 0 ] && echo "openmp wait: re-exec sets GOMP_SPINCOUNT=300 and keeps a user's policy"
exit $fail
