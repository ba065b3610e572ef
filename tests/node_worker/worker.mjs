// The P1 worker (docs/spec/p1.md): claims tasks from the control plane, runs them in fresh git
// workspaces, records every phase in the SQLite journal before it acts on it, and converges after a
// kill. It runs inside the adapter process as async code, so the adapter keeps answering while it
// works or blocks at a failpoint.

import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";

import { IDENTITY_FIELDS, Journal, RANK, TERMINAL } from "./journal.mjs";
import { runTool } from "./tools.mjs";
import {
  GitError, TransportError, canonicalJson, git, httpJson, log, randomHex, removeNoFollow, sha256Hex, sleep,
} from "./util.mjs";

class StopRequested extends Error {}

// The attempt cannot go on: its lease is lost (LEASE-4). Handled by the attempt's driver.
class LeaseLost extends Error {}

const HARD_FAILURES = new Set(["result_conflict", "result_rejected", "task_invalid"]);
const WRITE_PATH_RE = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

const identityKey = (obj) => canonicalJson(Object.fromEntries(IDENTITY_FIELDS.map((f) => [f, obj[f]])));

export class Worker {
  constructor(config, { failpoint, marker, connectionLog, tool = null }) {
    this.baseUrl = config.controlPlaneUrl;
    this.workspaceRoot = config.workspaceRoot;
    this.stateDir = config.stateDir;
    this.armed = failpoint ? { name: failpoint.name, hit: failpoint.hit } : null;
    this.marker = marker || null;
    this.connectionLog = connectionLog;
    this.tool = tool; // p1.tools: run in every verified workspace, before the result (ADP-2, WRK-5)
    this.hits = new Map();
    this.totalHits = 0; // every site reached, whatever its name: the hit count of the name "*"
    this.state = "running"; // running | blocked | exited
    this.blockedAt = null;
    this.release = null;
    this.exitCode = null;
    this.stopRequested = false;
    this.claimsStarted = 0;
    this.lastIdleClaim = 0; // index of the last claim answered without a task, with nothing workable
    this.wakeIdle = null;
    this.done = null;
  }

  start() {
    this.done = this.run().then(
      (code) => this.exit(code),
      (err) => {
        if (err instanceof StopRequested) return this.exit(0);
        log(`fatal: ${err && err.stack ? err.stack : err}`);
        return this.exit(1);
      },
    );
  }

  exit(code) {
    if (this.journal) this.journal.close();
    // ADP-2: the marker is written on every orderly exit of the worker, and never on a kill.
    if (this.marker) {
      try {
        fs.writeFileSync(this.marker, `exit ${code}\n`);
      } catch (err) {
        log(`cannot write the marker: ${err.message}`);
      }
    }
    this.exitCode = code;
    this.state = "exited";
  }

  // --- adapter-facing controls ---------------------------------------------------------------

  requestStop() {
    this.stopRequested = true;
    if (this.release) {
      const r = this.release;
      this.release = null;
      this.blockedAt = null;
      this.state = "running";
      r();
    }
    if (this.wakeIdle) this.wakeIdle();
  }

  continueWith(failpoint) {
    this.armed = failpoint ? { name: failpoint.name, hit: failpoint.hit } : null;
    if (this.release) {
      const r = this.release;
      this.release = null;
      this.blockedAt = null;
      this.state = "running";
      r();
    }
  }

  // --- failpoints (FPT-1, FPT-2) ---------------------------------------------------------------

  async failpoint(name) {
    const n = (this.hits.get(name) || 0) + 1;
    this.hits.set(name, n);
    this.totalHits += 1;
    // "*" (capability p1.failpoint-any, FPT-5) blocks at the hit-th site of any name.
    const armedHere =
      this.armed &&
      ((this.armed.name === name && this.armed.hit === n) || (this.armed.name === "*" && this.armed.hit === this.totalHits));
    if (armedHere) {
      this.armed = null; // disarmed once reached
      this.blockedAt = name;
      this.state = "blocked";
      await new Promise((resolve) => {
        this.release = resolve;
      });
    }
  }

  checkStop() {
    if (this.stopRequested) throw new StopRequested();
  }

  // A step boundary (RESUME-5 stops here) followed by a failpoint site.
  async site(name) {
    this.checkStop();
    await this.failpoint(name);
    this.checkStop();
  }

  // --- control plane ---------------------------------------------------------------------------

  async request(method, relPath, body, headers) {
    const answer = await httpJson(this.baseUrl, method, relPath, body, headers);
    if (answer.body && Number.isInteger(answer.body.now_ms)) this.nowMs = answer.body.now_ms;
    return answer;
  }

  // Non-governed requests are retried on transport failures and 5xx answers: 20 times, a renewal for as
  // long as the worker runs (p1.md 0.4: silence is no loss), with a stop honoured between two sends.
  async requestRetrying(method, relPath, body, { attempts = 20 } = {}) {
    let delay = 50;
    for (let i = 0; ; i++) {
      try {
        const answer = await this.request(method, relPath, body);
        if (answer.status < 500 || i >= attempts) return answer;
      } catch (err) {
        if (!(err instanceof TransportError) || i >= attempts) throw err;
      }
      if (attempts === Infinity) this.checkStop();
      await sleep(delay);
      delay = Math.min(delay * 2, 1000);
    }
  }

  // LEASE-3, LEASE-4: renew; true when the answer is ACTIVE and CP time is before its expiry.
  async renew(att) {
    const answer = await this.requestRetrying("POST", `v1/leases/${encodeURIComponent(att.leaseId)}/renew`, {}, {
      attempts: Infinity,
    });
    if (answer.status === 200 && answer.body && answer.body.lease && answer.body.lease.state === "ACTIVE") {
      const lease = answer.body.lease;
      if (Number.isInteger(answer.body.now_ms) && answer.body.now_ms >= lease.expires_at_ms) return false;
      att.lease = lease;
      return true;
    }
    return false; // 409 lease_not_active, 404 unknown lease
  }

  async renewOrLose(att) {
    if (!(await this.renew(att))) throw new LeaseLost();
  }

  // --- rows ---------------------------------------------------------------------------------

  // A step boundary, the before_<p>_row site, a renewal (for the phases that need the lease), the
  // row in its own transaction, the after_<p>_row site, then the cache with its two sites.
  async writeRow(att, phase, fields = {}, { renew = false } = {}) {
    await this.site(`before_${phase}_row`);
    if (renew) await this.renewOrLose(att);
    const row = this.journal.insert(att.identity, { ...fields, phase, lease_id: att.leaseId });
    att.rows.push(row);
    att.last = row;
    await this.failpoint(`after_${phase}_row`);
    await this.journal.writeCache(row, () => this.failpoint(`before_${phase}_cache`));
    await this.failpoint(`after_${phase}_cache`);
    return row;
  }

  // --- main loop ------------------------------------------------------------------------------

  async run() {
    this.journal = new Journal(this.stateDir, this.connectionLog);
    this.journal.removeStrayTemporaries();
    await this.cleanup(); // CLEAN-1: before any request
    await this.journal.rebuildCaches();

    // RESUME-1: every attempt of the journal, in the order of its claimed row.
    const attempts = new Map();
    for (const row of this.journal.allRows()) {
      const key = identityKey(row);
      let att = attempts.get(key);
      if (!att) {
        att = this.newAttempt(row, row.task ? JSON.parse(row.task) : null, row.lease_id);
        attempts.set(key, att);
      }
      att.rows.push(row);
      att.last = row;
    }
    this.attempts = attempts;
    for (const att of attempts.values()) {
      if (!TERMINAL.has(att.last.phase) && this.superseded(att)) {
        // SCOPE-7: no row and no governed side effect for it; RESUME-1: its lease released before any claim
        att.abandoned = true;
        await this.releaseLease(att.leaseId);
        continue;
      }
      if (!TERMINAL.has(att.last.phase) && this.wasAbandoned(att)) {
        // LEASE-4: a lease lost once stays lost, even if a replayed delivery revived it; give it back.
        att.abandoned = true;
        await this.releaseLease(att.leaseId);
        continue;
      }
      await this.drive(att, { resumed: true, startup: true });
    }

    // WRK-2, WRK-3: claim only when nothing is workable.
    for (;;) {
      this.checkStop();
      const index = ++this.claimsStarted;
      let answer;
      try {
        answer = await this.request("POST", "v1/claims", {});
      } catch (err) {
        if (!(err instanceof TransportError)) throw err;
        await this.idleSleep(100);
        continue;
      }
      if (answer.status !== 200 || !answer.body) {
        await this.idleSleep(100);
        continue;
      }
      const { task, lease } = answer.body;
      if (!task) {
        this.lastIdleClaim = index;
        const wait = Number.isInteger(answer.body.retry_after_ms) ? answer.body.retry_after_ms : 50;
        await this.idleSleep(Math.max(wait, 1));
        continue;
      }
      await this.served(task, lease);
    }
  }

  idleSleep(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeIdle = null;
        resolve();
      }, ms);
      this.wakeIdle = () => {
        clearTimeout(t);
        this.wakeIdle = null;
        resolve();
      };
    });
  }

  newAttempt(identitySource, task, leaseId) {
    const identity = Object.fromEntries(IDENTITY_FIELDS.map((f) => [f, identitySource[f]]));
    return { identity, task, leaseId, lease: null, rows: [], last: null, workspace: null, abandoned: false };
  }

  // SCOPE-7: the journal holds a row of a later attempt of the same task.
  superseded(att) {
    for (const other of this.attempts.values()) {
      if (other.identity.task_id === att.identity.task_id && other.identity.attempt > att.identity.attempt) return true;
    }
    return false;
  }

  // A claim answer with a task (CP-7).
  async served(task, lease) {
    const key = identityKey(task);
    const known = this.attempts.get(key);
    if (known && (this.superseded(known) || this.wasAbandoned(known))) {
      if (lease && lease.lease_id) await this.releaseLease(lease.lease_id);
      return;
    }
    if (known) {
      // RESUME-4: duplicate delivery of an attempt that has rows.
      if (TERMINAL.has(known.last.phase)) {
        if (lease && lease.lease_id) await this.releaseLease(lease.lease_id);
        return;
      }
      known.abandoned = false;
      await this.drive(known, { resumed: true });
      return;
    }
    let conflict = null;
    let later = false;
    let highestGeneration = 0;
    for (const other of this.attempts.values()) {
      const o = other.identity;
      if (o.task_id === task.task_id && o.attempt === task.attempt) conflict = "identity_conflict"; // SCOPE-6
      if (o.task_id === task.task_id && o.attempt > task.attempt) later = true;
      if (o.repository === task.repository && o.target_branch === task.target_branch) {
        highestGeneration = Math.max(highestGeneration, o.generation);
      }
    }
    if (!conflict && later) {
      // SCOPE-7: an attempt older than one the journal holds gets no row and no side effect.
      if (lease && lease.lease_id) await this.releaseLease(lease.lease_id);
      return;
    }
    if (!conflict && highestGeneration > task.generation) conflict = "stale_generation"; // LEASE-6
    const att = this.newAttempt(task, task, lease.lease_id);
    att.lease = lease;
    this.attempts.set(key, att);
    await this.writeRow(att, "claimed", { task: canonicalJson(task) });
    if (conflict) {
      await this.reconcile(att, conflict);
      await this.finishTerminal(att);
      return;
    }
    await this.drive(att, { resumed: false });
  }

  // Runs an attempt from its last durable row (RESUME-2) until it is terminal or abandoned.
  async drive(att, { resumed, startup = false }) {
    try {
      if (TERMINAL.has(att.last.phase)) {
        await this.finishTerminal(att);
        return;
      }
      if (resumed) {
        this.checkStop();
        await this.renewOrLose(att);
      }
      if (startup) {
        // RESUME-6: a resumption whose renewal answered ACTIVE is recorded first; the sixth one
        // from the same last row ends the attempt instead.
        const { task_id, attempt } = att.identity;
        if (this.journal.recoveriesAt(task_id, attempt, att.last.seq) >= 5) {
          await this.reconcile(att, "recovery_cap");
        } else {
          this.journal.addRecovery(task_id, attempt, att.last.seq);
        }
      }
      for (;;) {
        const phase = att.last.phase;
        if (TERMINAL.has(phase)) {
          await this.finishTerminal(att);
          return;
        }
        if (RANK[phase] <= 3) await this.replayToResult(att);
        else if (phase === "source_capture_done") await this.writePending(att);
        else if (phase === "commit_done") await this.converge(att);
        else if (phase === "result_pending") await this.submit(att);
        if (att.abandoned) return;
      }
    } catch (err) {
      if (!(err instanceof LeaseLost)) throw err;
      await this.leaseLost(att);
    }
  }

  // LEASE-4 by the attempt's last durable row.
  async leaseLost(att) {
    const phase = att.last.phase;
    if (phase === "commit_done") {
      await this.reconcile(att, "lease_not_converged");
      await this.finishTerminal(att); // PHASE-4: reported, then released, like every reconciliation
      return;
    }
    if (phase === "result_pending") {
      // SUB-7: exact-idempotency reconciliation by reading.
      const answer = await this.requestRetrying("GET", `v1/tasks/${encodeURIComponent(att.identity.task_id)}`);
      if (answer.status === 200 && answer.body && this.exactMatch(att, answer.body.state, answer.body.stored)) {
        await this.writeSubmitted(att);
        await this.finishTerminal(att);
        return;
      }
    }
    this.abandon(att);
  }

  wasAbandoned(att) {
    return this.journal.isAbandoned(att.identity.task_id, att.identity.attempt, att.leaseId);
  }

  // LEASE-4: recorded before the next request, so that no later process resumes the attempt.
  abandon(att) {
    if (!this.wasAbandoned(att)) this.journal.addAbandonment(att.identity.task_id, att.identity.attempt, att.leaseId);
    att.abandoned = true;
    log(`attempt ${att.identity.task_id}/${att.identity.attempt} abandoned: its lease is lost`);
    this.dropWorkspace(att);
  }

  dropWorkspace(att) {
    if (att.workspace) {
      const ws = path.join(this.workspaceRoot, att.workspace);
      att.workspace = null;
      removeNoFollow(ws).catch((err) => log(`cannot remove ${ws}: ${err.message}`));
    }
  }

  // --- before the governed commit: prepare, verify, compute (RESUME-3: always a new workspace) --

  async replayToResult(att) {
    const task = att.task;
    const ws = await this.prepareWorkspace(att);
    if (att.last.phase === "claimed") {
      await this.writeRow(att, "workspace_prepared", { workspace: ws }, { renew: true });
    }
    await this.verifyWorkspace(att, ws);
    if (att.last.phase === "workspace_prepared") {
      await this.writeRow(att, "verification_passed", {}, { renew: true });
    }
    if (this.tool) {
      try {
        const status = await runTool(this.tool, path.join(this.workspaceRoot, ws));
        if (status !== 0) log(`the tool exited with status ${status}`);
      } catch (err) {
        log(`the tool did not run: ${err.message}`);
      }
    }
    if (task.kind === "source_capture") {
      const body = await this.capture(att, ws);
      const text = canonicalJson(body);
      await this.writeRow(att, "source_capture_done", { result_body: text, result_hash: sha256Hex(text) }, { renew: true });
    } else {
      await this.governedCommit(att, ws);
    }
  }

  async prepareWorkspace(att) {
    const { task_id, attempt, base_oid } = att.identity;
    const name = `task-${task_id}-${attempt}-${randomHex(4)}`;
    const dir = path.join(this.workspaceRoot, name);
    await fsp.mkdir(dir); // fails rather than reuse an existing entry (WRK-4)
    att.workspace = name;
    await git(["clone", "--quiet", "--no-checkout", "--template=", att.task.origin_url, dir]);
    await git(["checkout", "--quiet", "--detach", base_oid], { cwd: dir });
    return name;
  }

  async verifyWorkspace(att, name) {
    const dir = path.join(this.workspaceRoot, name);
    const head = (await git(["rev-parse", "HEAD"], { cwd: dir })).trim();
    let detached = false;
    try {
      await git(["symbolic-ref", "-q", "HEAD"], { cwd: dir });
    } catch (err) {
      if (!(err instanceof GitError)) throw err;
      detached = true;
    }
    const status = await git(["status", "--porcelain", "--ignored", "--untracked-files=all"], { cwd: dir });
    if (head !== att.identity.base_oid || !detached || status !== "") {
      throw new Error(`workspace ${name} failed verification (HEAD ${head}, detached ${detached}, status ${JSON.stringify(status)})`);
    }
  }

  // TASK-3
  async capture(att, name) {
    const dir = path.join(this.workspaceRoot, name);
    const out = await git(["ls-tree", "-r", "-z", "--full-tree", att.identity.base_oid], { cwd: dir, encoding: "buffer" });
    const files = [];
    for (const entry of out.toString("utf8").split("\0")) {
      if (!entry) continue;
      const tab = entry.indexOf("\t");
      const [, type] = entry.slice(0, tab).split(" ");
      const p = entry.slice(tab + 1);
      if (type !== "blob") continue;
      const bytes = await fsp.readFile(path.join(dir, ...p.split("/")));
      files.push({ path: p, sha256: sha256Hex(bytes) });
    }
    files.sort((a, b) => Buffer.compare(Buffer.from(a.path, "utf8"), Buffer.from(b.path, "utf8")));
    return { base_oid: att.identity.base_oid, files, kind: "source_capture" };
  }

  // --- the governed commit (TASK-4, COMMIT-1 to COMMIT-3) ---------------------------------------

  async buildCommit(att, dir) {
    const { payload } = att.task;
    const base = att.identity.base_oid;
    for (const w of payload.writes) {
      const parts = w.path.split("/");
      if (!WRITE_PATH_RE.test(w.path) || parts.includes(".") || parts.includes("..") || parts[0] === ".git") {
        return null;
      }
    }
    for (const w of payload.writes) {
      const file = path.join(dir, ...w.path.split("/"));
      await fsp.mkdir(path.dirname(file), { recursive: true });
      await fsp.writeFile(file, Buffer.from(w.content, "utf8"));
      const oid = (await git(["hash-object", "-w", "--no-filters", "--stdin"], { cwd: dir, input: Buffer.from(w.content, "utf8") })).trim();
      const listed = await git(["ls-tree", "-z", base, "--", w.path], { cwd: dir });
      const mode = listed ? listed.split(" ")[0] : "100644";
      await git(["update-index", "--add", "--cacheinfo", `${mode},${oid},${w.path}`], { cwd: dir });
    }
    const tree = (await git(["write-tree"], { cwd: dir })).trim();
    const c = payload.commit;
    const date = `${c.timestamp} +0000`;
    const env = {
      GIT_AUTHOR_NAME: c.name, GIT_AUTHOR_EMAIL: c.email, GIT_AUTHOR_DATE: date,
      GIT_COMMITTER_NAME: c.name, GIT_COMMITTER_EMAIL: c.email, GIT_COMMITTER_DATE: date,
    };
    return (await git(["commit-tree", tree, "-p", base, "-F", "-"], { cwd: dir, env, input: Buffer.from(c.message, "utf8") })).trim();
  }

  async readBranch(att) {
    const ref = `refs/heads/${att.identity.target_branch}`;
    const out = await git(["ls-remote", att.task.origin_url, ref], { timeoutMs: 30000 });
    for (const line of out.split("\n")) {
      const [oid, name] = line.split("\t");
      if (name === ref) return oid;
    }
    return null;
  }

  async governedCommit(att, name) {
    const dir = path.join(this.workspaceRoot, name);
    const commit = await this.buildCommit(att, dir);
    if (commit === null) {
      await this.reconcile(att, "task_invalid");
      return;
    }
    await this.site("before_push");
    const head = await this.readBranch(att);
    if (head !== commit) {
      if (head !== att.identity.expected_branch_oid) {
        await this.reconcile(att, "branch_moved");
        return;
      }
      await this.renewOrLose(att); // COMMIT-2: right after a successful renewal
      // COMMIT-6 (strict): the branch has exactly one ACTIVE lease, the attempt's own.
      const active = (await this.branchLeases(att)).filter((l) => l.state === "ACTIVE");
      if (active.length !== 1 || active[0].lease_id !== att.leaseId) {
        await this.reconcile(att, "lease_conflict");
        return;
      }
      let pushed = false;
      try {
        await git(["push", "--quiet", "--no-verify", att.task.origin_url, `${commit}:refs/heads/${att.identity.target_branch}`], { cwd: dir, timeoutMs: 30000 });
        pushed = true;
      } catch (err) {
        if (!(err instanceof GitError)) throw err;
        log(`push refused or unknown: ${err.message}`);
      }
      if (!pushed && (await this.readBranch(att)) !== commit) {
        await this.reconcile(att, "push_refused");
        return;
      }
    }
    const body = canonicalJson({ commit_oid: commit, kind: "commit", target_branch: att.identity.target_branch });
    await this.writeRow(att, "commit_done", { commit_oid: commit, result_body: body, result_hash: sha256Hex(body) }, { renew: true });
  }

  // COMMIT-4: the convergence check after commit_done.
  async converge(att) {
    const commit = att.last.commit_oid;
    await this.site("before_receipt");
    if (!(await this.renew(att))) return this.reconcile(att, "lease_not_converged");
    const receiptPath = `v1/jobs/${encodeURIComponent(att.identity.job_id)}/receipt`;
    const receiptBody = { task_id: att.identity.task_id, attempt: att.identity.attempt, lease_id: att.leaseId, commit_oid: commit };
    let answer;
    let delay = 50;
    for (;;) {
      try {
        answer = await this.request("PUT", receiptPath, receiptBody);
        if (answer.status < 500) break;
      } catch (err) {
        if (!(err instanceof TransportError)) throw err;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 1000);
      this.checkStop();
      if (!(await this.renew(att))) return this.reconcile(att, "lease_not_converged");
    }
    if (answer.status === 403) return this.reconcile(att, "lease_not_converged");
    if (answer.status === 409) return this.reconcile(att, "receipt_conflict");
    if (answer.status !== 200 || !answer.body || !answer.body.receipt) return this.reconcile(att, "receipt_conflict");
    const receipt = answer.body.receipt;
    if (receipt.commit_oid !== commit) return this.reconcile(att, "receipt_conflict");
    if (receipt.visibility !== "confirmed") return this.reconcile(att, "receipt_not_visible");

    // COMMIT-4 (2), read as COMMIT-6 (strict) reads it: exactly one ACTIVE lease on the branch,
    // the attempt's own, with current_head_oid C.
    const active = (await this.branchLeases(att)).filter((l) => l.state === "ACTIVE");
    if (active.length !== 1 || active[0].lease_id !== att.leaseId || active[0].current_head_oid !== commit) {
      return this.reconcile(att, "lease_not_converged");
    }
    await this.writePending(att);
  }

  // CP-15: every lease of the attempt's branch; null members are never ACTIVE.
  async branchLeases(att) {
    const { repository, target_branch } = att.identity;
    const answer = await this.requestRetrying(
      "GET", `v1/leases?repository=${encodeURIComponent(repository)}&target_branch=${encodeURIComponent(target_branch)}`,
    );
    if (answer.status !== 200 || !answer.body || !Array.isArray(answer.body.leases)) {
      throw new Error(`GET v1/leases answered ${answer.status}`);
    }
    return answer.body.leases;
  }

  // --- result submission (KEY-1 to KEY-3, SUB-1 to SUB-7) ---------------------------------------

  idempotencyKey(att) {
    const { attempt, execution_digest, task_id } = att.identity;
    return "p1-result:" + sha256Hex(canonicalJson({ attempt, execution_digest, task_id }));
  }

  async writePending(att) {
    const from = att.last;
    const fields = {
      idempotency_key: this.idempotencyKey(att),
      result_hash: from.result_hash,
      result_body: from.result_body,
      commit_oid: att.task.kind === "commit" ? from.commit_oid : null,
    };
    try {
      await this.writeRow(att, "result_pending", fields, { renew: true });
    } catch (err) {
      if (err instanceof LeaseLost && from.phase === "commit_done") {
        await this.reconcile(att, "lease_not_converged");
        return;
      }
      throw err;
    }
  }

  exactMatch(att, state, stored) {
    const pending = att.last;
    return Boolean(
      stored && (state === "VERIFYING" || state === "SUCCEEDED") &&
        stored.attempt === att.identity.attempt && stored.result_hash === pending.result_hash &&
        stored.result !== undefined && canonicalJson(stored.result) === pending.result_body,
    );
  }

  async writeSubmitted(att) {
    const p = att.last;
    await this.writeRow(att, "result_submitted", {
      idempotency_key: p.idempotency_key, result_hash: p.result_hash, result_body: p.result_body, commit_oid: p.commit_oid,
    });
  }

  async submit(att) {
    const pending = att.last;
    const body = {
      attempt: att.identity.attempt,
      execution_digest: att.identity.execution_digest,
      lease_id: att.leaseId,
      result_hash: pending.result_hash,
      result: JSON.parse(pending.result_body),
    };
    const headers = { "Idempotency-Key": pending.idempotency_key };
    const relPath = `v1/tasks/${encodeURIComponent(att.identity.task_id)}/result`;
    let delay = 20;
    for (;;) {
      await this.site("before_result_submit");
      await this.renewOrLose(att); // SUB-2, LEASE-3 (b)
      let answer = null;
      try {
        answer = await this.request("POST", relPath, body, headers);
      } catch (err) {
        if (!(err instanceof TransportError)) throw err;
        log(`submission: ${err.message}; resending`);
      }
      if (answer && (answer.status === 200 || answer.status === 201)) {
        await this.writeSubmitted(att); // SUB-3
        return;
      }
      if (answer && answer.status === 409) {
        const b = answer.body || {};
        if (this.exactMatch(att, b.state, b.stored)) await this.writeSubmitted(att); // SUB-5
        else await this.reconcile(att, "result_conflict");
        return;
      }
      if (answer && answer.status === 403) throw new LeaseLost(); // SUB-6, then SUB-7
      if (answer && answer.status >= 400 && answer.status < 500) {
        await this.reconcile(att, "result_rejected"); // SUB-6
        return;
      }
      // SUB-4: a 5xx or a transport failure; the identical request again after a backoff.
      await sleep(delay);
      delay = Math.min(delay * 2, 1000);
    }
  }

  // --- terminal rows, reports and releases (PHASE-4, LEASE-5) ----------------------------------

  async reconcile(att, reason) {
    await this.writeRow(att, "reconciliation_required", { reason });
  }

  async finishTerminal(att) {
    const last = att.last;
    if (last.phase === "reconciliation_required") {
      await this.site("before_report");
      const state = HARD_FAILURES.has(last.reason) ? "FAILED" : "RECONCILIATION_REQUIRED";
      await this.requestRetrying("POST", `v1/tasks/${encodeURIComponent(att.identity.task_id)}/report`, {
        attempt: att.identity.attempt, lease_id: att.leaseId, state, reason: last.reason,
      });
    }
    await this.site("before_release");
    await this.releaseLease(att.leaseId);
    this.dropWorkspace(att);
  }

  async releaseLease(leaseId) {
    await this.requestRetrying("POST", `v1/leases/${encodeURIComponent(leaseId)}/release`, {});
  }

  // --- startup cleanup (CLEAN-1 to CLEAN-5) -----------------------------------------------------

  async cleanup() {
    const root = await fsp.realpath(this.workspaceRoot);
    const names = (await fsp.readdir(root)).filter((n) => n.startsWith("task-")).sort();
    for (const name of names) {
      const candidate = path.join(root, name);
      // CLEAN-3: the resolved parent must be the resolved root, component by component.
      let parent;
      try {
        parent = await fsp.realpath(path.dirname(candidate));
      } catch {
        continue;
      }
      if (path.relative(root, parent) !== "") continue;
      await this.site("cleanup_before_remove");
      const deadline = Date.now() + 2000;
      for (let delay = 50; ; delay = Math.min(delay * 2, 400)) {
        try {
          await removeNoFollow(candidate);
          break;
        } catch (err) {
          if (Date.now() > deadline) {
            log(`cannot remove stale workspace ${name}: ${err.message}; leaving it`);
            break;
          }
          await sleep(delay);
        }
      }
    }
  }
}
