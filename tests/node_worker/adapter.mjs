#!/usr/bin/env node
// resumekit-node-p1-worker: a second P1 worker, in JavaScript, written from docs/spec/p1.md,
// docs/spec/p1-control-plane.md, docs/adapter-protocol.md, docs/certifying.md, schemas/ and
// golden/p1/ alone. This file is the adapter (protocol version 1 over stdin/stdout, JSON Lines);
// the worker runs in this process as async code (worker.mjs), so `p1.worker.wait` is answered
// while it works or blocks, and the pid the kit may kill is this process's.
//
// Run: node tests/node_worker/adapter.mjs   (after `npm ci` in tests/node_worker)

import { createInterface } from "node:readline";

import { TOOLS_SUPPORTED } from "./tools.mjs";
import { Worker } from "./worker.mjs";
import { log } from "./util.mjs";

const PROTOCOL_VERSION = 1;

const HELLO_RESULT = {
  protocol: PROTOCOL_VERSION,
  implementation: {
    name: "resumekit-node-p1-worker",
    version: "1.0.0",
    language: "javascript",
    homepage: "https://nodejs.org",
  },
  capabilities: ["p1.worker", "p1.journal", "p1.failpoint-any", ...(TOOLS_SUPPORTED ? ["p1.tools"] : [])],
  profiles: ["core", "strict"],
};

let worker = null; // the current (or last) worker
let connectionLog = []; // ADP-3: the journal connections of the current (or last) worker

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function respond(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

async function waitFor(w, timeoutMs) {
  // OUT-2: idle only once a claim that started after this request was answered without a task,
  // so that a change the kit made just before asking is always seen by a fresh claim.
  const claimsAtRequest = w.claimsStarted;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (w.state === "exited") return { state: "exited", exitCode: w.exitCode };
    if (w.state === "blocked") return { state: "blocked", failpoint: w.blockedAt, pid: process.pid };
    if (w.lastIdleClaim > claimsAtRequest) return { state: "idle" };
    if (Date.now() >= deadline) return { state: "running" };
    await sleep(Math.max(0, Math.min(5, deadline - Date.now())));
  }
}

async function stopWorker() {
  if (!worker || worker.state === "exited") return worker ? worker.exitCode : 0;
  worker.requestStop();
  await worker.done;
  return worker.exitCode;
}

async function handle(request) {
  const seq = request.seq;
  switch (request.cmd) {
    case "hello":
      if (request.protocol !== PROTOCOL_VERSION) {
        return { seq, error: { message: `unsupported protocol ${JSON.stringify(request.protocol)}; this adapter speaks 1` } };
      }
      return { seq, result: HELLO_RESULT };
    case "p1.worker.start": {
      if (worker && worker.state !== "exited") {
        return { seq, error: { message: "a worker of this adapter is already running" } };
      }
      const tool = request.tool;
      if (tool !== undefined) {
        const argv = tool && tool.argv;
        if (!TOOLS_SUPPORTED || !Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && a)) {
          return { seq, error: { message: `'tool' must be {"argv": [non-empty strings]} (p1.tools, POSIX only)` } };
        }
      }
      connectionLog = [];
      worker = new Worker(request.config, {
        failpoint: request.failpoint, marker: request.marker, connectionLog, tool: tool ? tool.argv : null,
      });
      worker.start();
      return { seq, result: { pid: process.pid } };
    }
    case "p1.worker.wait":
      if (!worker) return { seq, error: { message: "no worker was started" } };
      return { seq, result: await waitFor(worker, request.timeoutMs) };
    case "p1.worker.continue":
      if (!worker || worker.state !== "blocked") return { seq, error: { message: "the worker is not blocked" } };
      worker.continueWith(request.failpoint);
      return { seq, result: {} };
    case "p1.worker.stop":
      return { seq, result: { exitCode: await stopWorker() } };
    case "p1.journal.settings":
      return { seq, result: { connections: connectionLog.map((c) => ({ ...c })) } };
    default:
      return { seq, error: { message: `unknown or unsupported command ${JSON.stringify(request.cmd ?? null)}` } };
  }
}

async function main() {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of rl) {
    if (line.trim() === "") continue;
    let request;
    try {
      request = JSON.parse(line);
      if (request === null || typeof request !== "object" || Array.isArray(request)) throw new TypeError("a request must be a JSON object");
    } catch (err) {
      respond({ seq: null, error: { message: `cannot parse request: ${err.message}` } });
      continue;
    }
    if (request.cmd === "stop") break;
    let response;
    try {
      response = await handle(request);
    } catch (err) {
      log(`${request.cmd} failed: ${err.stack}`);
      response = { seq: request.seq ?? null, error: { message: `${request.cmd} failed: ${err.message}`, context: { traceback: String(err.stack) } } };
    }
    respond(response);
  }
  // `stop` or the end of stdin: stop the worker in order (its marker is written), then exit 0.
  await stopWorker();
  process.exit(0);
}

main().catch((err) => {
  log(`fatal: ${err.stack}`);
  process.exit(1);
});
