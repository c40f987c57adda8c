#!/bin/bash
{
  echo "main=${CONF_ENV_MAIN:-unset}"
  echo "hint=${CONF_SOLUTION_HINT:-unset}"
  echo "verify=${CONF_VERIFY_LITERAL:-unset}"
} > /app/env.txt
