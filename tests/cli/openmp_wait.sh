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
# The re-executed process is the same command: its exit status and output reach the caller.
"$tlt" run /nonexistent.yaml >/dev/null 2>&1 && { echo "FAIL: a missing manifest ran"; fail=1; }
[ $fail -eq 0 ] && echo "openmp wait: re-exec sets GOMP_SPINCOUNT=300 and keeps a user's policy"
exit $fail
