#!/bin/bash
source /tests/helpers.sh   # from the task-level tests/, uploaded first
check() {
  [ "$(cat /app/results/total.txt 2>/dev/null)" = "$EXPECTED_TOTAL" ] &&   # step verifier env
  [ "${BASE_VALUE:-}" = base ] &&                                         # task verifier env, merged
  [ -f /tmp/transform-healthcheck-ran ] &&                                # the step healthcheck ran
  [ ! -e /app/setup.sh ]                                                  # setup.sh ran (and removed itself)
}
reward check
