"""A SQLite writer for the daemon's tests: an agent that keeps learning.

Usage: sqlite_writer.py DB MODE MAX_SECONDS
MODE is wal or delete (rollback journal). Prints {"ready": true}, then
commits transactions of 1-8 rows of 100-8000 random bytes in bursts, with
a busy timeout of 5 s as agent runtimes use, until its standard input
closes (the test decides when it has seen enough) or MAX_SECONDS pass,
then prints one JSON line with the number of commits and the commit
latencies (the writer's stalls).

Like an agent that learns and forgets, it keeps at most MAX_ROWS rows:
past that, each transaction also deletes its oldest rows, so the database
stays near 10 MiB however long it runs or however fast the machine lets
it write. (It grew without bound before: the cost of every snapshot grew
with the run, and on a loaded machine the test measured the growth.)
The counter table holds the row count, changed in the same transaction.
"""
import json
import os
import random
import sqlite3
import sys
import threading
import time

db, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
con = sqlite3.connect(db, timeout=5.0, isolation_level=None)
con.execute("PRAGMA journal_mode=%s" % ("WAL" if mode == "wal" else "DELETE"))
con.execute("CREATE TABLE IF NOT EXISTS memory (id INTEGER PRIMARY KEY, body BLOB)")
con.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER)")
if con.execute("SELECT COUNT(*) FROM counter").fetchone()[0] == 0:
    con.execute("INSERT INTO counter VALUES (0)")
print(json.dumps({"ready": True}), flush=True)

stop = threading.Event()
def wait_stdin():
    sys.stdin.read()
    stop.set()
threading.Thread(target=wait_stdin, daemon=True).start()

MAX_ROWS = 2000
rows_now = con.execute("SELECT COUNT(*) FROM memory").fetchone()[0]
rng = random.Random(7)
lat = []
end = time.monotonic() + seconds
while not stop.is_set() and time.monotonic() < end:
    t = time.monotonic()
    con.execute("BEGIN IMMEDIATE")
    rows = rng.randint(1, 8)
    for _ in range(rows):
        con.execute("INSERT INTO memory (body) VALUES (?)", (os.urandom(rng.randint(100, 8000)),))
    forget = max(0, rows_now + rows - MAX_ROWS)
    if forget:
        con.execute("DELETE FROM memory WHERE id IN (SELECT id FROM memory ORDER BY id LIMIT ?)", (forget,))
    con.execute("UPDATE counter SET n = n + ?", (rows - forget,))
    con.execute("COMMIT")
    rows_now += rows - forget
    lat.append(time.monotonic() - t)
    # Bursts: mostly back to back, sometimes a short pause.
    if rng.random() < 0.05:
        time.sleep(rng.random() * 0.05)

lat.sort()
def pct(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0
print(json.dumps({"commits": len(lat), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": lat[-1] * 1000 if lat else 0,
                  "bytes": os.path.getsize(db)}), flush=True)
