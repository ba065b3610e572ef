"""The origin's pre-receive hook: the origin itself, not the worker, enforces the governed-commit rule.

Copied into each scenario's bare repository and run by git with the kit's interpreter. It imports
nothing of resumekit, so it runs wherever git runs it. Every attempt is logged, accepted or refused,
before git is told the verdict, so the kit can count recommit attempts as well as landed commits.

Policy (``resumekit-policy.json`` in the repository): ``{"refs/heads/NAME": "EXPECTED_OLD_OID"}``.
An update is accepted only if its ref is in the policy, it is not a deletion, and the ref's current
value is exactly the expected one.
"""

import json
import os
import sys
import time

ZERO = "0" * 40


def main() -> int:
    git_dir = os.environ.get("GIT_DIR", ".")
    with open(os.path.join(git_dir, "resumekit-policy.json"), encoding="utf-8") as handle:
        policy = json.load(handle)
    verdict = 0
    records = []
    for line in sys.stdin.read().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        old, new, ref = parts
        if ref not in policy:
            reason = f"ref {ref} is not governed here"
        elif new == ZERO:
            reason = f"deleting {ref} is refused"
        elif old != policy[ref]:
            reason = f"{ref} is at {old}, not at the expected {policy[ref]}"
        else:
            reason = ""
        record = {"ref": ref, "old": old, "new": new, "accepted": not reason, "reason": reason, "at": time.time()}
        records.append(record)
        if reason:
            verdict = 1
            sys.stderr.write(f"resumekit origin: refused: {reason}\n")
    # A push is all or nothing: if any update is refused, none of its updates lands.
    if verdict:
        for record in records:
            if record["accepted"]:
                record["accepted"], record["reason"] = False, "another update of the same push was refused"
    with open(os.path.join(git_dir, "resumekit-pushes.jsonl"), "a", encoding="utf-8") as log:
        for record in records:
            log.write(json.dumps(record, sort_keys=True) + "\n")
        log.flush()
        os.fsync(log.fileno())
    return verdict


if __name__ == "__main__":
    sys.exit(main())
