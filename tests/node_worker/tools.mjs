// Capability p1.tools (docs/adapter-protocol.md; p1.md ADP-2, WRK-5): run a tool in a workspace so that
// it, and whatever it starts, ends with this process however this process ends.
//
// POSIX only. The worker starts a keeper (keeper.mjs) with `detached: true`, so the keeper leads a new
// session and process group whose id is its own pid, and the keeper starts the tool in that group. The
// keeper's stdin is a pipe from the worker that the worker never writes: when the worker dies the
// kernel closes it, the keeper sees its end and kills its whole group, itself included, with
// process.kill(-pid, "SIGKILL"); when the tool exits first the keeper reports its status on stdout and
// kills the group the same way, ending what the tool left behind. The keeper is alive while it sends the
// kill, so the group id cannot belong to anyone else. Known gap: the next worker does not wait for a
// slow keeper before its startup cleanup (Node has no file lock to wait on); the keeper reacts within
// milliseconds, the next worker's start takes longer.

import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const KEEPER = path.join(path.dirname(fileURLToPath(import.meta.url)), "keeper.mjs");

export const TOOLS_SUPPORTED = process.platform !== "win32";

// The tool's exit status (a negative number for a signal), or an Error if it could not be run.
export function runTool(argv, cwd) {
  return new Promise((resolve, reject) => {
    const keeper = spawn(process.execPath, [KEEPER, "--", ...argv], {
      cwd,
      detached: true,
      stdio: ["pipe", "pipe", "inherit"],
    });
    let out = "";
    keeper.stdout.setEncoding("utf8");
    keeper.stdout.on("data", (chunk) => {
      out += chunk;
    });
    keeper.on("error", (err) => reject(new Error(`cannot start the keeper: ${err.message}`)));
    keeper.on("close", () => {
      keeper.stdin.destroy();
      const status = Number.parseInt(out.trim(), 10);
      if (Number.isInteger(status)) resolve(status);
      else reject(new Error(`the keeper ended without the tool's status (${out.trim() || "nothing"})`));
    });
  });
}
