"""The P1 step verbs: the harness's table and the scenario schema name the same verbs."""

from __future__ import annotations

import json

from resumekit.conformance.p1.scenario import SECOND_WORKER_STEPS, STEPS
from tests.support import ROOT


def _schema() -> dict[str, object]:
    path = ROOT / "schemas" / "golden" / "p1-scenarios.json"
    loaded: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


# Steps only the campaigns generate (the crash matrices' and the soak's), never written in a golden file.
CAMPAIGN_ONLY = {"crash_or_idle", "settle"}


def test_every_verb_the_schema_allows_has_a_handler_and_no_other() -> None:
    step = _schema()["$defs"]["step"]  # type: ignore[index]
    verbs = set(step["properties"]) - {"second_worker"}
    assert verbs == set(STEPS) - CAMPAIGN_ONLY, (sorted(verbs - set(STEPS)), sorted(set(STEPS) - verbs))
    assert not CAMPAIGN_ONLY & verbs


def test_a_second_worker_takes_the_verbs_its_schema_allows() -> None:
    step = _schema()["$defs"]["step"]["properties"]["second_worker"]  # type: ignore[index]
    text = json.dumps(step)
    assert set(SECOND_WORKER_STEPS) <= set(STEPS)
    for verb in SECOND_WORKER_STEPS:
        assert f'"{verb}"' in text, verb
