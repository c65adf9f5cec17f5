"""A real SQLite client for the tests of package sqlite (python3's sqlite3).

  driver.py shell DB           run one JSON command per stdin line, answer one JSON line each
  driver.py writer DB MODE ... commit continuously until stdin closes, then print statistics
  driver.py check DB           print integrity_check and the row counts as JSON

Every connection sets a 5 s busy timeout, as agent runtimes typically do.
"""

import json
import os
import random
import sqlite3
import sys
import threading
import time

BUSY_TIMEOUT = 5.0


def connect(path):
    return sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)


def schema(con):
    con.execute("CREATE TABLE IF NOT EXISTS rows(id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    con.execute("CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, n INTEGER NOT NULL)")
    con.execute("INSERT OR IGNORE INTO meta VALUES('rows', 0)")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def shell(path):
    con = connect(path)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.get("op", "sql")
        if op == "crash":
            os._exit(3)  # no rollback, no unlock: as if killed
        start = time.perf_counter()
        try:
            rows = con.execute(cmd["sql"], cmd.get("args", [])).fetchall()
            out({"ok": True, "ms": (time.perf_counter() - start) * 1000, "rows": rows})
        except sqlite3.Error as e:
            out({"ok": False, "ms": (time.perf_counter() - start) * 1000, "err": str(e)})


def writer(path, mode, prefill_mb, cap_mb, seed):
    rnd = random.Random(seed)
    con = connect(path)
    con.execute("PRAGMA journal_mode=" + mode)
    schema(con)
    # Prefill in big transactions (not measured).
    target = prefill_mb << 20
    while page_bytes(con) < target:
        con.execute("BEGIN IMMEDIATE")
        for _ in range(500):
            con.execute("INSERT INTO rows(body) VALUES(?)", (rnd.randbytes(rnd.randint(100, 8000)),))
        con.execute("UPDATE meta SET n = n + 500 WHERE k = 'rows'")
        con.execute("COMMIT")
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    out({"ready": True, "bytes": page_bytes(con)})

    lat, errors, txns, rows = [], [], 0, 0
    cap = cap_mb << 20
    while not stop.is_set():
        k = rnd.randint(1, 8)
        bodies = [rnd.randbytes(rnd.randint(100, 8000)) for _ in range(k)]
        wall = time.time()
        start = time.perf_counter()
        try:
            con.execute("BEGIN IMMEDIATE")
            for b in bodies:
                con.execute("INSERT INTO rows(body) VALUES(?)", (b,))
            con.execute("UPDATE meta SET n = n + ? WHERE k = 'rows'", (k,))
            if txns % 50 == 0 and page_bytes(con) > cap:
                # Stay near the cap: drop the oldest rows in the same transaction.
                cur = con.execute("DELETE FROM rows WHERE id IN (SELECT id FROM rows ORDER BY id LIMIT 400)")
                con.execute("UPDATE meta SET n = n - ? WHERE k = 'rows'", (cur.rowcount,))
            con.execute("COMMIT")
            txns += 1
            rows += k
        except sqlite3.Error as e:
            errors.append(str(e))
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        lat.append((wall, (time.perf_counter() - start) * 1000))
        if rnd.random() < 0.03:  # bursts, with short idle gaps between them
            time.sleep(rnd.uniform(0.001, 0.03))
    out({"txns": txns, "rows": rows, "errors": len(errors), "first_errors": errors[:5],
         "bytes": page_bytes(con), "lat": [[round(w, 6), round(ms, 3)] for w, ms in lat]})


def page_bytes(con):
    return con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]


def check(path):
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    res = {"integrity": "; ".join(r[0] for r in con.execute("PRAGMA integrity_check").fetchall())}
    res["journal_mode"] = con.execute("PRAGMA journal_mode").fetchone()[0]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "rows" in tables:
        res["rows"] = con.execute("SELECT count(*) FROM rows").fetchone()[0]
    if "meta" in tables:
        res["n"] = con.execute("SELECT n FROM meta WHERE k = 'rows'").fetchone()[0]
    out(res)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "shell":
        shell(sys.argv[2])
    elif cmd == "writer":
        writer(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "check":
        check(sys.argv[2])
    else:
        sys.exit("unknown command " + cmd)
