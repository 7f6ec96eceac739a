# Sourced by scripts/test and .ci/run: `step NAME COMMAND...` runs one step,
# announces it, and records how long it took; the table of every step's time
# is printed when the script exits, whether it passed or failed.

_steps=()
_steps_started=$SECONDS

step() {
  local name=$1 started=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  _steps+=("$(printf '%6ds  %s%s' $((SECONDS - started)) "$name" "$([ $status -eq 0 ] || echo "  (FAILED, exit $status)")")")
  return $status
}

_print_steps() {
  local status=$?
  echo
  echo "== step times (${_steps_title:-steps})"
  local line
  for line in "${_steps[@]}"; do echo "$line"; done
  printf '%6ds  total\n' $((SECONDS - _steps_started))
  return $status
}
trap _print_steps EXIT
