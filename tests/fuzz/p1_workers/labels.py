"""Hostile workers whose bug only a scenario's expected outcome shows (issue 38): the kit must refuse them
naming the rule the scenario sets up, never a clause of a situation that did not happen."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer


class TakesA5xxForARejection(reference.Worker):
    """Takes a 5xx answer to its submission for a 4xx: the attempt ends in result_rejected after one send, where
    SUB-4 asks it to send the same submission again. The count of submissions is SUB-4's to name (the scenario's
    rule), not SUB-6's: no 4xx answer ever came."""

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        answer = super()._request(method, path, body, headers)
        if method == "POST" and path.endswith("/result") and answer.status >= 500:
            return Answer(422, answer.body)
        return answer
