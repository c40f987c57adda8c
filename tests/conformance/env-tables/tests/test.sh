#!/bin/bash
# What the oracle saw: the environment table and the solution table, not the verifier table.
expected=$'main=from-environment\nhint=from-solution\nverify=unset'
ok=1
[ "$(cat /app/env.txt 2>/dev/null)" = "$expected" ] || ok=0
# What the tests see: the environment table, the verifier table (template resolved), not the solution table.
[ "${CONF_ENV_MAIN:-}" = from-environment ] || ok=0
[ "${CONF_VERIFY_LITERAL:-}" = from-verifier ] || ok=0
[ "${CONF_VERIFY_TEMPLATE:-}" = template-default ] || ok=0
[ -z "${CONF_SOLUTION_HINT:-}" ] || ok=0
# The environment table is part of the container's own environment (PID 1), not only of each exec.
tr '\0' '\n' < /proc/1/environ | grep -qx 'CONF_ENV_MAIN=from-environment' || ok=0
echo "$ok" > /logs/verifier/reward.txt
