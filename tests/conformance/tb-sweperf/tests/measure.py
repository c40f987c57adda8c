"""Correctness on small inputs, then a time budget on the large one; prints the SWE-Perf verdict block."""
import multiprocessing
import sys
import time

sys.path.insert(0, "/app")
from primes import count_primes  # noqa: E402


def timed(queue):
    start = time.perf_counter()
    queue.put((count_primes(200000), time.perf_counter() - start))


correct = [count_primes(n) for n in (0, 2, 3, 10, 100, 1000)] == [0, 0, 1, 4, 25, 168]
fast = False
if correct:
    queue = multiprocessing.Queue()
    worker = multiprocessing.Process(target=timed, args=(queue,))
    worker.start()
    worker.join(10)
    if worker.is_alive():
        worker.terminate()
    else:
        result, seconds = queue.get()
        fast = result == 17984 and seconds < 1.0
print("SWE-Perf results starts here")
print("PASSED" if correct and fast else "FAILED")
print("SWE-Perf results ends here")
