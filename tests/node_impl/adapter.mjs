#!/usr/bin/env node
// resumekit-node-example: a second, independent implementation of the resumekit Phase 0
// decision contract, written only from docs/adapter-protocol.md (protocol v1),
// docs/spec/phase0.md (sections 0-8 and 11) and schemas/phase0/*.json.
//
// Run: node tests/node_impl/adapter.mjs   (speaks JSON Lines on stdin/stdout; logs go to stderr)
// Node >= 20, built-in modules only.

import * as fs from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";

const PROTOCOL_VERSION = 1;

const HELLO_RESULT = {
  protocol: PROTOCOL_VERSION,
  implementation: {
    name: "resumekit-node-example",
    version: "1.0.0",
    language: "javascript",
    homepage: "https://nodejs.org",
  },
  capabilities: ["phase0.projection"],
  profiles: ["core", "strict"],
};

// `--store` adds a durable ledger store (phase0.store, phase0.crash, phase0.ledger-file);
// `--store=no-fsync` is the same store with every sync left out, a deliberately broken variant
// that survives a process crash and loses acknowledged rows to a power cut.
const STORE_ARG = process.argv.slice(2).find((a) => a === "--store" || a.startsWith("--store="));
const STORE_MODE = STORE_ARG === undefined ? null : STORE_ARG === "--store" ? "durable" : STORE_ARG.slice(8);
if (STORE_MODE !== null) {
  if (STORE_MODE !== "durable" && STORE_MODE !== "no-fsync") {
    process.stderr.write(`unknown store mode ${STORE_MODE}; use --store or --store=no-fsync\n`);
    process.exit(2);
  }
  HELLO_RESULT.capabilities = ["phase0.projection", "phase0.store", "phase0.crash", "phase0.ledger-file"];
  if (STORE_MODE === "no-fsync") HELLO_RESULT.implementation.name += "-no-fsync";
}

function log(message) {
  process.stderr.write(`[resumekit-node-example] ${message}\n`);
}

// ---------------------------------------------------------------------------------------------
// JSON that keeps every number exactly as written.
//
// PLAN-8 and PLAN-9 require the events of a plan to be the committed events "unchanged", and
// `args`/`result` may be any JSON value. JSON.parse would round integers above 2^53 and turn
// 1e400 into Infinity (then null), so numbers are kept as their source text (RawNumber) and
// written back verbatim. Objects are null-prototype so that a key such as "__proto__" stays data.
// ---------------------------------------------------------------------------------------------

class RawNumber {
  constructor(raw) {
    this.raw = raw;
  }
  valueOf() {
    return Number(this.raw);
  }
}

const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WS = new Set([" ", "\t", "\n", "\r"]);

function parseJson(text) {
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`invalid JSON at offset ${i}: ${what}`);
  };
  const skip = () => {
    while (i < text.length && WS.has(text[i])) i++;
  };
  const parseString = () => {
    // text[i] === '"'. Find the closing quote, then let JSON.parse decode the escapes.
    let j = i + 1;
    for (;;) {
      if (j >= text.length) fail("unterminated string");
      const c = text.charCodeAt(j);
      if (c === 0x22) break;
      if (c === 0x5c) j += 2;
      else if (c < 0x20) fail("control character in string");
      else j++;
    }
    const value = JSON.parse(text.slice(i, j + 1));
    i = j + 1;
    return value;
  };
  // Iterative, so that deeply nested args cannot overflow the call stack.
  const stack = []; // frames: {container, key (for objects), isArray}
  let result;
  let haveResult = false;
  const put = (value) => {
    if (stack.length === 0) {
      result = value;
      haveResult = true;
      return;
    }
    const top = stack[stack.length - 1];
    if (top.isArray) top.container.push(value);
    else Object.defineProperty(top.container, top.key, {
      value, enumerable: true, writable: true, configurable: true,
    });
  };
  // expect: "value" | "afterValue" | "key"
  let expect = "value";
  for (;;) {
    skip();
    if (expect === "value") {
      if (i >= text.length) fail("unexpected end of input");
      const c = text[i];
      if (c === "{") {
        i++;
        skip();
        const obj = Object.create(null);
        if (text[i] === "}") {
          i++;
          put(obj);
          expect = "afterValue";
        } else {
          stack.push({ container: obj, key: null, isArray: false });
          expect = "key";
        }
      } else if (c === "[") {
        i++;
        skip();
        const arr = [];
        if (text[i] === "]") {
          i++;
          put(arr);
          expect = "afterValue";
        } else {
          stack.push({ container: arr, key: null, isArray: true });
          expect = "value";
        }
      } else {
        if (c === '"') put(parseString());
        else if (text.startsWith("true", i)) { i += 4; put(true); }
        else if (text.startsWith("false", i)) { i += 5; put(false); }
        else if (text.startsWith("null", i)) { i += 4; put(null); }
        else {
          NUMBER_RE.lastIndex = i;
          const m = NUMBER_RE.exec(text);
          if (!m) fail(`unexpected character ${JSON.stringify(c)}`);
          i += m[0].length;
          put(new RawNumber(m[0]));
        }
        expect = "afterValue";
      }
    } else if (expect === "key") {
      if (text[i] !== '"') fail("expected a string key");
      const key = parseString();
      skip();
      if (text[i] !== ":") fail("expected ':'");
      i++;
      stack[stack.length - 1].key = key;
      expect = "value";
    } else {
      // afterValue
      if (stack.length === 0) {
        if (i !== text.length) fail("trailing characters");
        if (!haveResult) fail("no value");
        return result;
      }
      const top = stack[stack.length - 1];
      const c = text[i];
      if (c === ",") {
        i++;
        expect = top.isArray ? "value" : "key";
        if (!top.isArray) skip();
      } else if ((top.isArray && c === "]") || (!top.isArray && c === "}")) {
        i++;
        stack.pop();
        put(top.container);
      } else {
        fail("expected ',' or a closing bracket");
      }
    }
  }
}

// Canonical JSON (PURE-2): keys sorted by code point, no white space, non-ASCII unescaped,
// numbers as written (input) or as integers (computed counters).
function compareCodePoints(a, b) {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done === y.done ? 0 : x.done ? -1 : 1;
    const d = x.value.codePointAt(0) - y.value.codePointAt(0);
    if (d !== 0) return d;
  }
}

function toCanonicalJson(value) {
  const out = [];
  // Iterative writer: a work list of values and literal tokens.
  const work = [value];
  const LITERAL = Symbol("literal");
  while (work.length > 0) {
    const v = work.pop();
    if (v !== null && typeof v === "object" && v[LITERAL] !== undefined) {
      out.push(v[LITERAL]);
    } else if (v === null || v === undefined) {
      out.push("null");
    } else if (v instanceof RawNumber) {
      out.push(v.raw);
    } else if (typeof v === "number") {
      if (!Number.isFinite(v)) throw new TypeError(`cannot encode number ${v}`);
      out.push(JSON.stringify(v));
    } else if (typeof v === "string" || typeof v === "boolean") {
      out.push(JSON.stringify(v));
    } else if (Array.isArray(v)) {
      const parts = [{ [LITERAL]: "[" }];
      v.forEach((item, k) => {
        if (k > 0) parts.push({ [LITERAL]: "," });
        parts.push(item);
      });
      parts.push({ [LITERAL]: "]" });
      for (let k = parts.length - 1; k >= 0; k--) work.push(parts[k]);
    } else if (typeof v === "object") {
      const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort(compareCodePoints);
      const parts = [{ [LITERAL]: "{" }];
      keys.forEach((key, k) => {
        parts.push({ [LITERAL]: (k > 0 ? "," : "") + JSON.stringify(key) + ":" });
        parts.push(v[key]);
      });
      parts.push({ [LITERAL]: "}" });
      for (let k = parts.length - 1; k >= 0; k--) work.push(parts[k]);
    } else {
      throw new TypeError(`cannot encode a value of type ${typeof v}`);
    }
  }
  return out.join("");
}

// ---------------------------------------------------------------------------------------------
// Phase 0 projection (docs/spec/phase0.md)
// ---------------------------------------------------------------------------------------------

const TERMINAL_STATUSES = new Set(["completed", "failed", "aborted", "cancelled"]);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof RawNumber);

// EVT-4: partial means `partial` is true.
const isPartial = (e) => e.partial === true;

// EVT-3: a terminal status, or actions.endInvocation === true; either alone is enough.
function isTerminal(e) {
  if (TERMINAL_STATUSES.has(e.status)) return true;
  return isObject(e.actions) && e.actions.endInvocation === true;
}

// EVT-2: the tool fact an event carries, if any.
function toolFact(e) {
  const c = e.content;
  if (!isObject(c)) return null;
  if (c.kind === "function_call") return { kind: "call", id: c.id, name: c.name, args: c.args };
  if (c.kind === "function_response") {
    return { kind: "response", id: c.id, name: c.name, isError: c.isError === true };
  }
  return null;
}

const DIRECTIVE =
  "Do not retry the interrupted tool call. Its side effects may or may not have happened: " +
  "verify the current state with read-only inspection first, then decide what to do.";

function buildPlan(events, expectedHighWater, profile) {
  if (!Array.isArray(events)) throw new TypeError("`events` must be an array of RuntimeEvents");
  events.forEach((e, k) => {
    if (!isObject(e)) throw new TypeError(`event ${k} is not an object`);
  });

  const diagnostics = [];
  const reasons = new Set();

  // PLAN-1: the high-water counts every event, partial ones included.
  const highWater = events.length;

  // OFF-1: an expected high-water that differs from the prefix length blocks the plan.
  if (expectedHighWater !== undefined && expectedHighWater !== null) {
    const expected = Number(expectedHighWater);
    if (expected !== highWater) {
      diagnostics.push({
        code: "runtime_offset_mismatch",
        message: `expected a committed prefix of ${expected} runtime events, found ${highWater}`,
        detail: { expected: expectedHighWater, actual: highWater },
      });
      reasons.add("runtime_offset_mismatch");
    }
  }

  // OP-1 to OP-5: operations, created by the first call of an id, settled at most once by a
  // response that comes after that call. Names are not compared when settling (OP-4).
  const operations = []; // in the order of their creating calls
  const opById = new Map();
  for (const e of events) {
    if (isPartial(e)) continue;
    const f = toolFact(e);
    if (!f) continue;
    if (f.kind === "call") {
      if (!opById.has(f.id)) {
        const op = {
          toolCallId: f.id,
          toolName: f.name,
          args: f.args,
          status: "indeterminate",
          callRuntimeEventId: e.id,
        };
        operations.push(op);
        opById.set(f.id, op);
      }
    } else {
      const op = opById.get(f.id);
      if (op && op.responseRuntimeEventId === undefined) {
        op.responseRuntimeEventId = e.id;
        op.responseIsError = f.isError;
        op.status = f.isError ? "failed" : "succeeded";
      }
    }
  }

  // PLAN-2: one pending_tool_result per indeterminate operation.
  for (const op of operations) {
    if (op.status !== "indeterminate") continue;
    diagnostics.push({
      code: "pending_tool_result",
      message:
        `tool call ${op.toolCallId} (${op.toolName}) has no committed result: ` +
        "its side effects may or may not have happened",
      eventId: op.callRuntimeEventId,
      toolCallId: op.toolCallId,
      toolName: op.toolName,
    });
  }

  // PLAN-3 and PLAN-4, judged against the operations of the whole prefix.
  for (const e of events) {
    if (isPartial(e)) continue;
    const f = toolFact(e);
    if (!f || f.kind !== "response") continue;
    const op = opById.get(f.id);
    if (!op) {
      diagnostics.push({
        code: "unmatched_tool_result",
        message: `tool result ${f.id} (${f.name}) answers no tool call of the committed prefix`,
        eventId: e.id,
        toolCallId: f.id,
        toolName: f.name,
      });
    } else if (op.toolName !== f.name) {
      diagnostics.push({
        code: "tool_name_mismatch",
        message: `tool result ${f.id} is named ${f.name} but its call is named ${op.toolName}`,
        eventId: e.id,
        toolCallId: f.id,
        toolName: f.name,
        detail: { callToolName: op.toolName, responseToolName: f.name },
      });
    }
  }

  // Strict profile (section 8): extra diagnostics and ledger_integrity_violation only.
  if (profile === "strict") {
    const strict = strictDiagnostics(events);
    if (strict.length > 0) {
      diagnostics.push(...strict);
      reasons.add("ledger_integrity_violation"); // STRICT-7
    }
  }

  // PLAN-5
  const DANGLING = new Set(["pending_tool_result", "unmatched_tool_result", "tool_name_mismatch"]);
  if (diagnostics.some((d) => DANGLING.has(d.code))) reasons.add("dangling_tool_state");

  // PLAN-6 and PLAN-7
  const requiresVerification = operations.some((op) => op.status === "indeterminate");
  const rejectionReasons = ["runtime_offset_mismatch", "dangling_tool_state", "ledger_integrity_violation"]
    .filter((r) => reasons.has(r));
  const disposition = rejectionReasons.length === 0 && !requiresVerification ? "safe_replay" : "blocked";

  // PLAN-9: a tool-call id is paired when a non-partial response with that id follows a
  // non-partial call with that id and the same name (the latest call seen so far is compared).
  const lastCallName = new Map();
  const paired = new Set();
  for (const e of events) {
    if (isPartial(e)) continue;
    const f = toolFact(e);
    if (!f) continue;
    if (f.kind === "call") lastCallName.set(f.id, f.name);
    else if (lastCallName.has(f.id) && lastCallName.get(f.id) === f.name) paired.add(f.id);
  }
  const replayRuntimeEvents = events.filter((e) => {
    if (isPartial(e)) return false;
    const f = toolFact(e);
    return !f || paired.has(f.id);
  });

  const plan = {
    disposition,
    operations,
    diagnostics,
    rejectionReasons,
    requiresVerification,
    sourceRuntimeEventHighWater: highWater,
    runtimeEvents: events.slice(), // PLAN-8: the committed prefix, unchanged and in order
    replayRuntimeEvents,
  };
  if (requiresVerification) plan.directive = DIRECTIVE;
  return plan;
}

function strictDiagnostics(events) {
  const out = [];
  const seenEventIds = new Set();
  const seenCallIds = new Set();
  const seenResponseIds = new Set();
  let identity = null;
  let terminalSeen = false;

  // STRICT-4 needs to know which tool-call ids have a non-partial call anywhere in the prefix.
  const callIds = new Set();
  for (const e of events) {
    if (isPartial(e)) continue;
    const f = toolFact(e);
    if (f && f.kind === "call") callIds.add(f.id);
  }

  for (const e of events) {
    if (isPartial(e)) continue;
    const f = toolFact(e);

    // STRICT-1
    if (seenEventIds.has(e.id)) {
      out.push({
        code: "duplicate_event_id",
        message: `event id ${e.id} was already used by an earlier committed event`,
        eventId: e.id,
      });
    }
    seenEventIds.add(e.id);

    // STRICT-5: the run identity is that of the first non-partial event.
    const id = { sessionId: e.sessionId, runId: e.runId, invocationId: e.invocationId, turnId: e.turnId };
    if (identity === null) {
      identity = id;
    } else if (Object.keys(identity).some((k) => identity[k] !== id[k])) {
      out.push({
        code: "run_identity_conflict",
        message:
          `event ${e.id} belongs to session ${e.sessionId}, run ${e.runId}, invocation ` +
          `${e.invocationId}, turn ${e.turnId}, not to the run of the first event`,
        eventId: e.id,
        detail: { expected: identity, actual: id },
      });
    }

    if (f) {
      // STRICT-6: a tool fact after the first terminal event.
      if (terminalSeen) {
        out.push({
          code: "tool_fact_after_terminal",
          message: `tool ${f.kind === "call" ? "call" : "result"} ${f.id} comes after the terminal event`,
          eventId: e.id,
          toolCallId: f.id,
          toolName: f.name,
        });
      }
      if (f.kind === "call") {
        // STRICT-2
        if (seenCallIds.has(f.id)) {
          out.push({
            code: "duplicate_tool_call",
            message: `tool call id ${f.id} was already used by an earlier committed call`,
            eventId: e.id,
            toolCallId: f.id,
            toolName: f.name,
          });
        }
        seenCallIds.add(f.id);
      } else {
        // STRICT-3
        if (seenResponseIds.has(f.id)) {
          out.push({
            code: "duplicate_tool_result",
            message: `tool call ${f.id} already has an earlier committed result`,
            eventId: e.id,
            toolCallId: f.id,
            toolName: f.name,
          });
        }
        seenResponseIds.add(f.id);
        // STRICT-4: a result committed before the first call of its id, which comes later.
        if (!seenCallIds.has(f.id) && callIds.has(f.id)) {
          out.push({
            code: "tool_result_before_call",
            message: `tool result ${f.id} was committed before its call`,
            eventId: e.id,
            toolCallId: f.id,
            toolName: f.name,
          });
        }
      }
    }

    if (isTerminal(e)) terminalSeen = true;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The durable ledger store (docs/spec/phase0.md, section 9), with --store
//
// <workspace>/sessions/<sessionId>/runs/<runId>/runtime-events.jsonl, UTF-8 JSON Lines. An append
// cuts off a torn tail first (STORE-7), writes the whole row with one write, syncs the file, and
// syncs every directory that gained an entry (the new file, new directories) before it answers
// (STORE-2). A read opens the file read-only and changes nothing (STORE-6).
// ---------------------------------------------------------------------------------------------

const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;
const ROLES = new Set(["user", "model", "tool", "system"]);
const AUTHORS = new Set(["user", "agent", "tool", "system"]);
const STATUSES = new Set(["streaming", "completed", "failed", "aborted", "cancelled"]);
const KINDS = new Set(["text", "thinking", "function_call", "function_response", "error"]);
const EVENT_KEYS = new Set([
  "id", "invocationId", "runId", "sessionId", "turnId", "ts", "branch", "partial", "role", "author", "status",
  "content", "actions", "refs",
]);

// Why a parsed row is not a RuntimeEvent (schemas/phase0/runtime-event.json), or null.
function eventProblem(e) {
  if (!isObject(e)) return "the row is not a JSON object";
  for (const key of Object.keys(e)) if (!EVENT_KEYS.has(key)) return `unknown member ${JSON.stringify(key)}`;
  for (const key of ["id", "invocationId", "runId", "sessionId", "turnId"]) {
    if (typeof e[key] !== "string" || e[key].length === 0) return `${key} is not a non-empty string`;
  }
  if (!(e.ts instanceof RawNumber)) return "ts is not a number";
  if (e.branch !== undefined && typeof e.branch !== "string") return "branch is not a string";
  if (typeof e.partial !== "boolean") return "partial is not a boolean";
  if (!ROLES.has(e.role)) return "role is not one of user, model, tool, system";
  if (!AUTHORS.has(e.author)) return "author is not one of user, agent, tool, system";
  if (e.status !== undefined && !STATUSES.has(e.status)) return "status is not a known status";
  if (e.actions !== undefined && !isObject(e.actions)) return "actions is not an object";
  if (e.actions !== undefined && e.actions.endInvocation !== undefined && typeof e.actions.endInvocation !== "boolean") {
    return "actions.endInvocation is not a boolean";
  }
  if (e.refs !== undefined && !isObject(e.refs)) return "refs is not an object";
  if (e.content !== undefined) {
    const c = e.content;
    if (!isObject(c) || !KINDS.has(c.kind)) return "content has no known kind";
    if (c.kind === "function_call" || c.kind === "function_response") {
      if (typeof c.id !== "string" || c.id.length === 0) return `${c.kind} has no id`;
      if (typeof c.name !== "string" || c.name.length === 0) return `${c.kind} has no name`;
      if (c.kind === "function_call" && !("args" in c)) return "function_call has no args";
    }
  }
  return null;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const SYNC = STORE_MODE !== "no-fsync";

function syncPath(p) {
  if (!SYNC) return;
  const fd = fs.openSync(p, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

class LedgerStore {
  constructor(workspace, sessionId, runId) {
    for (const [what, id] of [["sessionId", sessionId], ["runId", runId]]) {
      if (typeof id !== "string" || !ID_RE.test(id)) throw new TypeError(`invalid ${what} ${JSON.stringify(id)}`);
    }
    if (typeof workspace !== "string") throw new TypeError("workspace is not a string");
    this.workspace = path.resolve(workspace);
    this.file = path.join(this.workspace, "sessions", sessionId, "runs", runId, "runtime-events.jsonl");
    this.fd = null;
    this.rows = 0;
  }

  close() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  open() {
    const runDir = path.dirname(this.file);
    const missing = [];
    for (let d = runDir; d !== this.workspace && !fs.existsSync(d); d = path.dirname(d)) missing.push(d);
    for (const d of [...missing].reverse()) fs.mkdirSync(d);
    const created = !fs.existsSync(this.file);
    const fd = fs.openSync(this.file, "a+");
    const data = fs.readFileSync(this.file);
    const committed = data.lastIndexOf(0x0a) + 1;
    if (committed < data.length) {
      fs.ftruncateSync(fd, committed); // STORE-7: a torn tail goes before the next row
      if (SYNC) fs.fsyncSync(fd);
    }
    this.rows = data.subarray(0, committed).reduce((n, b) => n + (b === 0x0a ? 1 : 0), 0);
    this.fd = fd;
    // Deepest first: the run directory (the new file), then each new directory's parent.
    return [...(created ? [runDir] : []), ...missing.map((d) => path.dirname(d))];
  }

  append(event) {
    const problem = eventProblem(event);
    if (problem !== null) throw new TypeError(`the event is not a valid RuntimeEvent: ${problem}`);
    const row = Buffer.from(toCanonicalJson(event) + "\n", "utf8");
    const gained = this.fd === null ? this.open() : [];
    fs.writeSync(this.fd, row);
    if (SYNC) fs.fsyncSync(this.fd);
    for (const d of new Set(gained)) syncPath(d);
    this.rows += 1;
    return this.rows;
  }

  // {status: "ok", events, tornTail} or {status: "corrupt", line, message}
  read() {
    let data;
    try {
      data = fs.readFileSync(this.file);
    } catch (err) {
      if (err.code === "ENOENT") return { status: "ok", events: [], tornTail: null };
      throw err;
    }
    const committed = data.lastIndexOf(0x0a) + 1;
    const events = [];
    let start = 0;
    for (let line = 1; start < committed; line++) {
      const end = data.indexOf(0x0a, start);
      const bytes = data.subarray(start, end);
      start = end + 1;
      let event;
      try {
        event = parseJson(UTF8.decode(bytes));
      } catch (err) {
        return { status: "corrupt", line, message: `row ${line} is not UTF-8 JSON: ${err.message}` };
      }
      const problem = eventProblem(event);
      if (problem !== null) return { status: "corrupt", line, message: `row ${line}: ${problem}` };
      events.push(event);
    }
    const tail = data.length - committed;
    return { status: "ok", events, tornTail: tail ? { offset: committed, length: tail } : null };
  }
}

let store = null;
const markers = [];

function openStore() {
  if (store === null) throw new Error("no store is open: send phase0.store.open first");
  return store;
}

function writeMarkers() {
  for (const marker of markers.splice(0)) {
    try {
      fs.writeFileSync(marker, "orderly exit\n");
    } catch (err) {
      log(`cannot write the exit marker ${marker}: ${err.message}`);
    }
  }
}

function handleStore(request) {
  const seq = request.seq;
  switch (request.cmd) {
    case "phase0.store.open": {
      const next = new LedgerStore(request.workspace, request.sessionId, request.runId);
      if (store !== null) store.close();
      store = next;
      return { seq, result: {} };
    }
    case "phase0.store.append":
      return { seq, result: { rows: openStore().append(request.event) } };
    case "phase0.store.read":
      return { seq, result: openStore().read() };
    case "phase0.store.plan": {
      const read = openStore().read();
      if (read.status !== "ok") return { seq, result: read };
      const profile = request.profile ?? "core";
      return { seq, result: { status: "ok", plan: buildPlan(read.events, request.expectedRuntimeEventHighWater, profile) } };
    }
    case "phase0.crash.arm":
      if (typeof request.marker !== "string") throw new TypeError("marker is not a string");
      markers.push(request.marker);
      return { seq, result: { pid: process.pid } };
    case "phase0.ledger.locate":
      return { seq, result: { path: openStore().file } };
    default:
      return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Protocol loop (docs/adapter-protocol.md)
// ---------------------------------------------------------------------------------------------

function respond(message) {
  process.stdout.write(toCanonicalJson(message) + "\n");
}

function errorResponse(seq, message, context) {
  const error = { message };
  if (context !== undefined) error.context = context;
  return { seq, error };
}

function handle(request) {
  const seq = request.seq;
  switch (request.cmd) {
    case "hello": {
      const protocol = request.protocol instanceof RawNumber ? Number(request.protocol) : request.protocol;
      if (protocol !== PROTOCOL_VERSION) {
        return errorResponse(
          seq,
          `unsupported protocol version ${toCanonicalJson(request.protocol ?? null)}; ` +
            `this adapter speaks protocol ${PROTOCOL_VERSION}`,
          { supported: [PROTOCOL_VERSION] },
        );
      }
      return { seq, result: HELLO_RESULT };
    }
    case "phase0.plan": {
      const profile = request.profile ?? "core";
      if (profile !== "core" && profile !== "strict") {
        return errorResponse(seq, `unknown profile ${JSON.stringify(profile)}; expected "core" or "strict"`);
      }
      const plan = buildPlan(request.events, request.expectedRuntimeEventHighWater, profile);
      return { seq, result: { plan } };
    }
    default: {
      const answer = STORE_MODE !== null ? handleStore(request) : null;
      if (answer !== null) return answer;
      return errorResponse(seq, `unknown or unsupported command ${JSON.stringify(request.cmd ?? null)}`, {
        cmd: request.cmd ?? null,
        capabilities: HELLO_RESULT.capabilities,
      });
    }
  }
}

async function main() {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of rl) {
    if (line.trim() === "") continue;
    let request;
    try {
      request = parseJson(line);
      if (!isObject(request)) throw new TypeError("a request must be a JSON object");
    } catch (err) {
      log(`cannot parse request: ${err.message}`);
      let seq = null;
      try {
        seq = JSON.parse(line)?.seq ?? null;
      } catch {
        /* no seq to echo */
      }
      respond(errorResponse(seq, `cannot parse request: ${err.message}`, { traceback: String(err.stack) }));
      continue;
    }
    if (request.cmd === "stop") break; // no response; exit 0
    let response;
    try {
      response = handle(request);
    } catch (err) {
      log(`${request.cmd} (seq ${toCanonicalJson(request.seq ?? null)}) failed: ${err.stack}`);
      response = errorResponse(request.seq ?? null, `${request.cmd} failed: ${err.message}`, {
        traceback: String(err.stack),
      });
    }
    respond(response);
  }
  rl.close();
  process.stdin.destroy();
  if (store !== null) store.close();
  writeMarkers();
  process.exitCode = 0;
}

main().catch((err) => {
  log(`fatal: ${err.stack}`);
  writeMarkers();
  process.exitCode = 1;
});
