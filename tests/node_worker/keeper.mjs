// The keeper of one tool (tools.mjs): node keeper.mjs -- ARGV...
// It leads its own process group (started detached); the tool joins that group. At the end of stdin
// (the worker died) or when the tool exits, it kills the whole group, itself last of all.

import { spawn } from "node:child_process";

const endGroup = () => process.kill(-process.pid, "SIGKILL");

const dash = process.argv.indexOf("--");
const argv = dash < 0 ? [] : process.argv.slice(dash + 1);
process.stdin.on("end", endGroup);
process.stdin.on("error", endGroup);
process.stdin.resume();
if (argv.length === 0) {
  process.stdout.write("127\n", endGroup);
} else {
  const tool = spawn(argv[0], argv.slice(1), { stdio: ["ignore", 2, 2] });
  tool.on("error", (err) => {
    process.stderr.write(`keeper: cannot start ${argv[0]}: ${err.message}\n`);
    process.stdout.write("127\n", endGroup);
  });
  tool.on("exit", (code, signal) => {
    const status = code !== null ? code : -1;
    process.stdout.write(`${status}\n`, endGroup);
  });
}
