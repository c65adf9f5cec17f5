"""Prints, for each database path given, its integrity_check result and its
counter table's sum against its rows: one JSON line per database."""
import json
import sqlite3
import sys

for p in sys.argv[1:]:
    try:
        con = sqlite3.connect("file:%s?mode=ro" % p, uri=True)
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        n = con.execute("SELECT n FROM counter").fetchone()[0]
        rows = con.execute("SELECT COUNT(*) FROM memory").fetchone()[0]
        print(json.dumps({"db": p, "integrity": ok, "counter": n, "rows": rows}))
    except Exception as e:  # report, never hide
        print(json.dumps({"db": p, "integrity": "error: %s" % e}))
