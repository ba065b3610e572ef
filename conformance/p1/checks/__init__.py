"""The P1 verdict: a table of rules, each a pure check of one case's recorded history (docs/spec/p1.md).

The harness records what it did and saw (``conformance.history``); it never judges. A check is a function
``(history, scenario) -> list[Mismatch]`` in the module of the spec section whose clauses it enforces, and
``rules.RULES`` is the table of every check: its name, the clauses it may fail, and when it judges. A
check reads the history only through ``story.Story``'s views and never reads a file or talks to a process
(``tests/test_purity.py`` keeps every module here pure), so a verdict is a function of the history and the
scenario, and a check is tested on a history written by hand.

Two moments to judge:

- ``at_stop`` rules judge as the run goes. The harness asks them (``rules.halt``) after it records what a
  worker did at a moment it cannot go on from (blocked at another failpoint, an exit that was no crash, a
  wait that never ended); when one fails, the run stops there and its mismatches are the verdict.
- every rule judges a run that took all its steps, over the whole history.

The sections, each the module of the spec's section whose clauses it enforces: ``journal`` (JNL, with the
JNL-5/JNL-6 settings the worker attests, and WRK-2 as the rows show it), ``cache`` (CACHE), ``phases`` (PHASE-1),
``resume`` (PHASE, SCOPE-3/4/6/7, RESUME), ``scope`` (SCOPE-1/2/5, and LEASE-6's fence), ``restarts`` (RESUME-3,
RESUME-4, RESUME-6), ``tasks`` (TASK-3: a capture's result, and its origin left unwritten), ``submission`` (KEY,
SUB, TASK-2) and ``answers`` (what a submission's answer means, SUB-3 and SUB-6), ``commit`` (COMMIT and the
origins' CP-17/CP-18), ``leases`` (LEASE), ``cleanup`` (CLEAN), ``processes`` (WRK, CRASH-2, ADP, CP-22),
``convergence`` (OUT, with a submission after a hard failure, and each task's expected outcome, FPT-4),
``failpoints`` (FPT-1, FPT-2 and the catalog), and ``campaigns`` (FPT-4, FPT-5 of a crash matrix or a soak);
``_shared`` holds the little they share. ``resumekit list --checks`` lists every rule.
"""
