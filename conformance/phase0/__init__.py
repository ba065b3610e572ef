"""The Phase 0 crash contract, as the kit checks it.

``contract`` registers it; ``cases`` and ``fixtures`` are its golden cases and how they are read;
``plan_checks`` (pure) compares a plan with an expectation; ``decisions`` runs the decision cases through
the run's adapter; ``ledger_damage`` (pure) makes the damaged bytes; the process harness is ``session``
(dealings with the implementation's processes), ``failpoints``, ``ledger_faults``, ``schedule`` and
``exit_marker``, bound together by ``crash.process_runners``.
"""
