"""Hostile workers of identity, scope and the WriterLease (SCOPE-1, LEASE-1, LEASE-6): rows that dodge the fence of
a stale generation by naming the branch's newer one, and a row whose lease id is a megabyte of text, which the
kit must name in a bounded report."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.fuzz.p1_workers._base import AtTheEnd, execute


class ForgesTheNewerGeneration(reference.Worker):
    """Served an attempt whose generation is below its journal's rows on the branch, writes its rows with the
    branch's highest generation instead, so that no row looks stale, and runs it to a submission: the rows name
    an identity the control plane never served (SCOPE-1), whatever they say of the fence (LEASE-6)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        branch = (task.get("repository"), task.get("target_branch"))
        rows: list[Row] = [r for r in self.journal.rows() if (r.repository, r.target_branch) == branch]
        newest = max((row.generation for row in rows), default=None)
        if newest is not None and isinstance(task.get("generation"), int) and newest > task["generation"]:
            task = {**task, "generation": newest}
        super()._served(task, lease)


class LeaseIdOfAMegabyte(AtTheEnd):
    """Once its result_submitted row is written, sets that row's lease_id to a megabyte of text (LEASE-1)."""

    def strike(self, attempt: reference.Attempt) -> None:
        execute(
            self.journal_path,
            "UPDATE checkpoints SET lease_id = hex(zeroblob(524288)) WHERE seq = (SELECT MAX(seq) FROM checkpoints)",
        )
