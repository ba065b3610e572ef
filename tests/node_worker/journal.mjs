// The checkpoint journal (p1.md JNL-1 to JNL-6) and its task cache (CACHE-1 to CACHE-3), through
// better-sqlite3. Every row is inserted in its own autocommit transaction on a connection with
// synchronous=FULL; the cache is replaced atomically after the row commits.

import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";

import { fsyncDir, randomHex } from "./util.mjs";

export const IDENTITY_FIELDS = [
  "task_id", "attempt", "execution_digest", "job_id", "repository",
  "base_oid", "expected_branch_oid", "target_branch", "generation",
];
export const ROW_FIELDS = [
  "phase", "lease_id", "task", "workspace", "idempotency_key", "result_hash", "result_body",
  "commit_oid", "reused_from", "reason",
];
export const COLUMNS = ["seq", ...IDENTITY_FIELDS, ...ROW_FIELDS];
export const TERMINAL = new Set(["result_submitted", "reconciliation_required"]);
export const RANK = {
  claimed: 1, workspace_prepared: 2, verification_passed: 3, source_capture_done: 4, commit_done: 4,
  result_pending: 5, result_submitted: 6,
};

const SAME_ATTEMPT =
  "(c.task_id, c.attempt, c.execution_digest, c.job_id, c.repository, c.base_oid, " +
  "c.expected_branch_oid, c.target_branch, c.generation) = (NEW.task_id, NEW.attempt, " +
  "NEW.execution_digest, NEW.job_id, NEW.repository, NEW.base_oid, NEW.expected_branch_oid, " +
  "NEW.target_branch, NEW.generation)";
const rank = (col) =>
  `CASE ${col} WHEN 'claimed' THEN 1 WHEN 'workspace_prepared' THEN 2 WHEN 'verification_passed' THEN 3 ` +
  `WHEN 'source_capture_done' THEN 4 WHEN 'commit_done' THEN 4 WHEN 'result_pending' THEN 5 ` +
  `WHEN 'result_submitted' THEN 6 END`;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS checkpoints (
  seq                 INTEGER PRIMARY KEY,
  task_id             TEXT    NOT NULL,
  attempt             INTEGER NOT NULL,
  execution_digest    TEXT    NOT NULL,
  job_id              TEXT    NOT NULL,
  repository          TEXT    NOT NULL,
  base_oid            TEXT    NOT NULL,
  expected_branch_oid TEXT    NOT NULL,
  target_branch       TEXT    NOT NULL,
  generation          INTEGER NOT NULL,
  phase               TEXT    NOT NULL,
  lease_id            TEXT    NOT NULL,
  task                TEXT,
  workspace           TEXT,
  idempotency_key     TEXT,
  result_hash         TEXT,
  result_body         TEXT,
  commit_oid          TEXT,
  reused_from         INTEGER,
  reason              TEXT
);
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_first_row BEFORE INSERT ON checkpoints
WHEN NEW.phase <> 'claimed' AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE ${SAME_ATTEMPT})
BEGIN SELECT RAISE(ABORT, 'an attempt starts with claimed'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_monotonic BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints c WHERE ${SAME_ATTEMPT}
  AND (c.phase IN ('result_submitted', 'reconciliation_required')
       OR (NEW.phase <> 'reconciliation_required' AND ${rank("c.phase")} >= ${rank("NEW.phase")})))
BEGIN SELECT RAISE(ABORT, 'phase not monotonic within the attempt'); END;
CREATE TABLE IF NOT EXISTS recoveries (
  seq      INTEGER PRIMARY KEY,
  task_id  TEXT    NOT NULL,
  attempt  INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS recoveries_no_update BEFORE UPDATE ON recoveries
BEGIN SELECT RAISE(ABORT, 'recoveries are append-only'); END;
CREATE TRIGGER IF NOT EXISTS recoveries_no_delete BEFORE DELETE ON recoveries
BEGIN SELECT RAISE(ABORT, 'recoveries are append-only'); END;
CREATE TABLE IF NOT EXISTS abandonments (
  seq      INTEGER PRIMARY KEY,
  task_id  TEXT    NOT NULL,
  attempt  INTEGER NOT NULL,
  lease_id TEXT    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS abandonments_no_update BEFORE UPDATE ON abandonments
BEGIN SELECT RAISE(ABORT, 'abandonments are append-only'); END;
CREATE TRIGGER IF NOT EXISTS abandonments_no_delete BEFORE DELETE ON abandonments
BEGIN SELECT RAISE(ABORT, 'abandonments are append-only'); END;
`;

export class Journal {
  constructor(stateDir, connectionLog) {
    this.stateDir = stateDir;
    this.tasksDir = path.join(stateDir, "tasks");
    const file = path.join(stateDir, "checkpoints.sqlite3");
    const db = new Database(file);
    // JNL-5 and JNL-6: set, then read back, before the first write.
    db.pragma("busy_timeout = 5000");
    const journalMode = String(db.pragma("journal_mode = WAL", { simple: true })).toLowerCase();
    db.pragma("synchronous = FULL");
    const synchronous = Number(db.pragma("synchronous", { simple: true }));
    const busyTimeoutMs = Number(db.pragma("busy_timeout", { simple: true }));
    const lockingMode = String(db.pragma("locking_mode", { simple: true })).toLowerCase();
    connectionLog.push({ synchronous, journalMode, busyTimeoutMs });
    if (synchronous < 2 || !["delete", "truncate", "persist", "wal"].includes(journalMode) || lockingMode !== "normal") {
      db.close();
      throw new Error(`journal connection settings refused: synchronous=${synchronous} journal_mode=${journalMode}`);
    }
    db.exec(SCHEMA);
    this.db = db;
    this.insertStmt = db.prepare(
      `INSERT INTO checkpoints (${[...IDENTITY_FIELDS, ...ROW_FIELDS].join(", ")}) ` +
        `VALUES (${[...IDENTITY_FIELDS, ...ROW_FIELDS].map((c) => "@" + c).join(", ")})`,
    );
    this.ensureTasksDir();
  }

  close() {
    try {
      this.db.close();
    } catch {
      /* already closed */
    }
  }

  ensureTasksDir() {
    if (!fs.existsSync(this.tasksDir)) {
      fs.mkdirSync(this.tasksDir);
      fsyncDir(this.stateDir); // CACHE-3: the state directory is fsynced when tasks/ is created
    }
  }

  allRows() {
    return this.db.prepare(`SELECT ${COLUMNS.join(", ")} FROM checkpoints ORDER BY seq`).all();
  }

  lastRowOfTask(taskId) {
    return this.db
      .prepare(`SELECT ${COLUMNS.join(", ")} FROM checkpoints WHERE task_id = ? ORDER BY seq DESC LIMIT 1`)
      .get(taskId);
  }

  // One row, in its own transaction (JNL-3); returns the committed row with its seq.
  insert(identity, fields) {
    const values = {};
    for (const c of IDENTITY_FIELDS) values[c] = identity[c];
    for (const c of ROW_FIELDS) values[c] = fields[c] === undefined ? null : fields[c];
    const info = this.insertStmt.run(values);
    return { seq: Number(info.lastInsertRowid), ...values };
  }

  // RESUME-6: recoveries of an attempt that began at the same last checkpoint row.
  recoveriesAt(taskId, attempt, lastSeq) {
    return this.db
      .prepare("SELECT COUNT(*) AS n FROM recoveries WHERE task_id = ? AND attempt = ? AND last_seq = ?")
      .get(taskId, attempt, lastSeq).n;
  }

  addRecovery(taskId, attempt, lastSeq) {
    this.db.prepare("INSERT INTO recoveries (task_id, attempt, last_seq) VALUES (?, ?, ?)").run(taskId, attempt, lastSeq);
  }

  // LEASE-4: an attempt abandoned with a lost lease, in this process or an earlier one.
  isAbandoned(taskId, attempt, leaseId) {
    return (
      this.db
        .prepare("SELECT COUNT(*) AS n FROM abandonments WHERE task_id = ? AND attempt = ? AND lease_id = ?")
        .get(taskId, attempt, leaseId).n > 0
    );
  }

  addAbandonment(taskId, attempt, leaseId) {
    this.db.prepare("INSERT INTO abandonments (task_id, attempt, lease_id) VALUES (?, ?, ?)").run(taskId, attempt, leaseId);
  }

  // CACHE-3: temporary named .<task_id>.<random>.tmp in tasks/, written, fsynced, closed; then
  // `beforeRename` (the before_<p>_cache failpoint), rename over tasks/<task_id>.json, fsync tasks/.
  async writeCache(row, beforeRename) {
    this.ensureTasksDir();
    const doc = { cache_version: 1 };
    for (const c of COLUMNS) doc[c] = row[c] === undefined ? null : row[c];
    const bytes = Buffer.from(JSON.stringify(doc), "utf8");
    const tmp = path.join(this.tasksDir, `.${row.task_id}.${randomHex(6)}.tmp`);
    const fd = fs.openSync(tmp, "wx", 0o644);
    try {
      let off = 0;
      while (off < bytes.length) off += fs.writeSync(fd, bytes, off, bytes.length - off);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (beforeRename) await beforeRename();
    fs.renameSync(tmp, path.join(this.tasksDir, `${row.task_id}.json`));
    fsyncDir(this.tasksDir);
  }

  // CACHE-4: stray temporaries are never read; they are removed at startup.
  removeStrayTemporaries() {
    if (!fs.existsSync(this.tasksDir)) return;
    for (const name of fs.readdirSync(this.tasksDir)) {
      if (name.startsWith(".") && name.endsWith(".tmp")) {
        try {
          fs.unlinkSync(path.join(this.tasksDir, name));
        } catch {
          /* best effort */
        }
      }
    }
  }

  // CACHE-4: by idle every task's cache equals the projection of its journal; rewrite any that
  // does not (torn, garbage, stale, newer, missing).
  async rebuildCaches() {
    const last = new Map();
    for (const row of this.allRows()) last.set(row.task_id, row);
    for (const [taskId, row] of last) {
      const file = path.join(this.tasksDir, `${taskId}.json`);
      let ok = false;
      try {
        const doc = JSON.parse(fs.readFileSync(file, "utf8"));
        ok = doc && doc.cache_version === 1 && COLUMNS.every((c) => doc[c] === row[c]) &&
          Object.keys(doc).length === COLUMNS.length + 1;
      } catch {
        ok = false;
      }
      if (!ok) await this.writeCache(row, null);
    }
  }
}
