-- The example brain's memory.db, created at set-up by
-- scripts/example-brain.sh with the sqlite3 command line tool (the binary
-- database file is never committed). The schema follows the reference agent
-- runtime's memory.db.
PRAGMA journal_mode = DELETE;
CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT NOT NULL, ts INTEGER NOT NULL);
CREATE TABLE task_log (
  callId TEXT PRIMARY KEY,
  tokenId TEXT NOT NULL,
  subscriber TEXT NOT NULL,
  ts INTEGER NOT NULL,
  summary TEXT NOT NULL
);
CREATE INDEX task_log_token_ts ON task_log (tokenId, ts DESC);
CREATE TABLE messages (callId TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, ts INTEGER NOT NULL);
CREATE INDEX messages_call ON messages (callId);
INSERT INTO facts VALUES
  ('audits.completed', '12', 1700000000),
  ('favourite.bug', 'unchecked return value of low-level call', 1700000100);
INSERT INTO task_log VALUES
  ('call-1', '3', '0x0000000000000000000000000000000000000abc', 1700000000, 'reviewed Vault.sol: one re-entrancy finding');
