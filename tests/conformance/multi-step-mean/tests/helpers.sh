# Shared by every step's test: uploaded to /tests before the step's own tests.
reward() {
  mkdir -p /logs/verifier
  if "$@"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
}
