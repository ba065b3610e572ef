"""The reference's Phase 0 runtime: the pure projection and the file-backed ledger store."""
