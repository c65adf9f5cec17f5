"""A real SQLite writer for the v3 page-edit test.

  sqlite_memory.py create DB MIB   a memory.db of about MIB MiB: one
                                   3,000-byte row per 4 KiB page
  sqlite_memory.py edit DB ID      rewrites row ID through SQL (one page)
  sqlite_memory.py check DB        prints PRAGMA integrity_check
"""
import sqlite3
import sys

cmd, db = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
if cmd == "create":
    rows = int(sys.argv[3]) * 256  # 256 pages of 4 KiB per MiB
    con.execute("PRAGMA page_size=4096")
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("CREATE TABLE memories(id INTEGER PRIMARY KEY, body BLOB)")
    con.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < ?) "
        "INSERT INTO memories SELECT x, randomblob(3000) FROM n",
        (rows,),
    )
    con.commit()
elif cmd == "edit":
    cur = con.execute("UPDATE memories SET body = randomblob(3000) WHERE id = ?", (int(sys.argv[3]),))
    if cur.rowcount != 1:
        sys.exit("no row %s" % sys.argv[3])
    con.commit()
elif cmd == "check":
    print(con.execute("PRAGMA integrity_check").fetchone()[0])
else:
    sys.exit("unknown command %r" % cmd)
con.close()
