#!/bin/bash
cat > /app/primes.py <<'PY'
def count_primes(n):
    if n < 3:
        return 0
    sieve = bytearray([1]) * n
    sieve[0] = sieve[1] = 0
    for k in range(2, int(n ** 0.5) + 1):
        if sieve[k]:
            sieve[k * k::k] = bytearray(len(range(k * k, n, k)))
    return sum(sieve)
PY
