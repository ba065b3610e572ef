"""What the runner knows of the Phase 0 contract: plan checks, ledger faults and the crash harness."""
