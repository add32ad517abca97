"""`turnkeeper.open()` + close, CPU per open, with the environment snapshot of
`turnkeeper._speedups` or the plain one (`frozenset(os.environ.items())`): the 20% rule's
measurement for that speed-up (bench/results/plain-types.md).

    for i in 1 2 3 4 5 6 7 8; do for side in plain speedup; do
        .venv/bin/python bench/ab_environment.py $side; done; done
"""

import os
import sys
import tempfile
import time

import turnkeeper
from turnkeeper import _speedups

if sys.argv[1] == "plain":
    _speedups.environment_snapshot = lambda: frozenset(os.environ.items())
d = tempfile.mkdtemp()
url = f"sqlite:///{d}/o.db"
with turnkeeper.open(url) as tk:
    tk.create_session(key="k")
for _ in range(200):
    turnkeeper.open(url).close()
best = 1e9
for _round in range(5):
    t = time.process_time()
    for _ in range(1000):
        turnkeeper.open(url).close()
    best = min(best, (time.process_time() - t) / 1000)
print(sys.argv[1], "open CPU %.1f us" % (best * 1e6))
