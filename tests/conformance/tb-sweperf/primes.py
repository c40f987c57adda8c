def count_primes(n):
    count = 0
    for k in range(2, n):
        if all(k % d for d in range(2, k)):
            count += 1
    return count
