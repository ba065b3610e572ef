"""Hostile answers around the readings p1.md section 0.5 settles: a wait that keeps reporting the block
``p1.worker.continue`` released (ADP-2), with a hostile failpoint member too. The kit must fail the case
naming the rule, and end every process of it: never hang on a worker that is blocked for ever, never a
traceback on a member it did not expect."""

from __future__ import annotations

from typing import Any

from resumekit.reference import adapter
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.control import Control


class _NeverWakes(Control):
    """``release`` answers and the worker stays blocked: the thread never wakes up."""

    def release(self, failpoint: tuple[str, int] | None) -> None:
        with self._cond:
            self._armed = failpoint


class ReportsTheReleasedBlockForEver(reference.Worker):
    """Every wait after ``p1.worker.continue`` still says blocked at the released site, and the worker never
    moves again: the kit must name ADP-2 at the first such wait, and end the worker blocked for ever."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.control.__class__ = _NeverWakes


class ReleasedBlockWithAHostileName(ReportsTheReleasedBlockForEver):
    """As above, and each blocked answer after the first names its failpoint as an object of 10,000 members
    instead of a string: the kit must refuse the answer clearly, never take it for a name."""

    def run(self) -> int:
        encode = adapter._encode_response
        blocks: list[bool] = []

        def hostile(response: dict[str, Any]) -> bytes:
            result = response.get("result")
            if isinstance(result, dict) and result.get("state") == "blocked":
                blocks.append(True)
                if len(blocks) > 1:
                    result = {**result, "failpoint": {f"k{i}": [i] for i in range(10_000)}}
                    response = {**response, "result": result}
            return encode(response)

        adapter._encode_response = hostile
        return super().run()
