// Plumbing of the Node P1 worker: canonical JSON (p1.md TASK-2), the control-plane HTTP client
// (p1-control-plane.md CP-1, CP-2; p1.md WRK-3), git through child_process (WRK-4), atomic file
// replacement (CACHE-3) and a removal walk that never follows a link (CLEAN-4).

import { createHash, randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";

export function log(message) {
  process.stderr.write(`[node-p1-worker ${process.pid}] ${message}\n`);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function sha256Hex(data) {
  return createHash("sha256").update(data).digest("hex");
}

export function randomHex(bytes) {
  return randomBytes(bytes).toString("hex");
}

// TASK-2: members sorted by key, no white space, JSON.stringify's string escapes (which are the
// spec's: \b \t \n \f \r short forms, other controls as lowercase \u00xx, nothing else escaped),
// integers only.
export function canonicalJson(value) {
  if (value === null) return "null";
  if (typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new TypeError(`not an integer: ${value}`);
    return String(value);
  }
  if (Array.isArray(value)) return "[" + value.map(canonicalJson).join(",") + "]";
  if (typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonicalJson(value[k])).join(",") + "}";
  }
  throw new TypeError(`cannot encode ${typeof value}`);
}

// ---------------------------------------------------------------------------------------------
// HTTP (CP-1): every endpoint is the base URL followed by a relative path; bodies are UTF-8 JSON.
// ---------------------------------------------------------------------------------------------

export class TransportError extends Error {}

export const REQUEST_TIMEOUT_MS = 4500; // WRK-3: at most 5 s of real time per request

export function httpJson(baseUrl, method, relPath, body, headers = {}) {
  const url = new URL(relPath, baseUrl);
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body), "utf8");
  const allHeaders = { Accept: "application/json", Connection: "close", ...headers };
  if (payload !== null) {
    allHeaders["Content-Type"] = "application/json";
    allHeaders["Content-Length"] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn(value);
    };
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers: allHeaders, agent: false },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed = null;
          try {
            parsed = text ? JSON.parse(text) : null;
          } catch {
            parsed = null;
          }
          finish(resolve, { status: res.statusCode, body: parsed });
        });
        res.on("error", (err) => finish(reject, new TransportError(`${method} ${relPath}: ${err.message}`)));
        res.on("aborted", () => finish(reject, new TransportError(`${method} ${relPath}: aborted`)));
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error("timeout"));
      finish(reject, new TransportError(`${method} ${relPath}: timed out`));
    }, REQUEST_TIMEOUT_MS);
    req.on("error", (err) => finish(reject, new TransportError(`${method} ${relPath}: ${err.message}`)));
    if (payload !== null) req.write(payload);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// git (WRK-4): no system or global configuration, no hooks, no filters, core.autocrlf=false.
// ---------------------------------------------------------------------------------------------

export class GitError extends Error {
  constructor(message, code, stdout, stderr) {
    super(message);
    this.code = code;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

const GIT_BASE_ENV = (() => {
  const env = {};
  for (const key of ["PATH", "HOME", "SystemRoot", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL"]) {
    if (process.env[key] !== undefined) env[key] = process.env[key];
  }
  env.GIT_CONFIG_NOSYSTEM = "1";
  env.GIT_CONFIG_GLOBAL = os.devNull;
  env.GIT_TERMINAL_PROMPT = "0";
  return env;
})();

const GIT_CONFIG = ["-c", "core.autocrlf=false", "-c", "core.hooksPath=" + os.devNull, "-c", "commit.gpgsign=false"];

export function git(args, { cwd, input, env, timeoutMs = 60000, encoding = "utf8" } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      [...GIT_CONFIG, ...args],
      { cwd, env: { ...GIT_BASE_ENV, ...(env || {}) }, maxBuffer: 256 * 1024 * 1024, timeout: timeoutMs, encoding },
      (err, stdout, stderr) => {
        if (err) {
          reject(new GitError(`git ${args.join(" ")}: ${String(stderr).trim() || err.message}`, err.code, stdout, stderr));
        } else {
          resolve(stdout);
        }
      },
    );
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

export function fsyncDir(dir) {
  if (process.platform === "win32") return; // CACHE-3: a directory cannot be opened for syncing
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// Removes `target` without following any link: links and files are unlinked, directories are
// walked by lstat and removed bottom-up. A directory without owner rwx is made rwx first (CLEAN-5:
// a read-only attribute inside the root is cleared); the parent of `target` is never changed.
export async function removeNoFollow(target) {
  let st;
  try {
    st = await fsp.lstat(target);
  } catch (err) {
    if (err.code === "ENOENT") return;
    throw err;
  }
  if (!st.isDirectory()) {
    await fsp.unlink(target);
    return;
  }
  if ((st.mode & 0o700) !== 0o700) {
    const fd = await fsp.open(target, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    try {
      await fd.chmod(0o700);
    } finally {
      await fd.close();
    }
  }
  for (const name of await fsp.readdir(target)) {
    await removeNoFollow(path.join(target, name));
  }
  // Re-check the type before rmdir: rmdir never follows a link, and an entry swapped for a link
  // in between is unlinked as a link.
  const again = await fsp.lstat(target);
  if (again.isDirectory()) await fsp.rmdir(target);
  else await fsp.unlink(target);
}
