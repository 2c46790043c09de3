#!/usr/bin/env bash
# After a failed ctest run: prints the last lines of each failed test's own output (from CTest's
# LastTest.log), so the end of a CI log says why, not only which tests failed.
#   ci-failed-output.sh [BUILD_DIR] [LINES]
set -uo pipefail
build=${1:-build} lines=${2:-150}
failed=$build/Testing/Temporary/LastTestsFailed.log
log=$build/Testing/Temporary/LastTest.log
[[ -f $failed && -f $log ]] || exit 0
while IFS=: read -r _ name; do
  echo "=================== output of failed test $name (last $lines lines) ==================="
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " && substr($0, index($0, "Testing: ") + 9) == name { on = 1 }
    on { print }
    on && index($0, "\"" name "\" end time") == 1 { on = 0 }
  ' "$log" | tail -n "$lines"
done < "$failed"
