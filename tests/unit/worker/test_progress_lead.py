"""Which task of a user program reports the job's progress (``launcher.progress``)."""

from __future__ import annotations

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # before TensorFlow is imported, as in every task

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

pytestmark = pytest.mark.tf  # imports TensorFlow: not in the fast lane
require_module("tensorflow")  # launcher.progress carries the Keras callback

from launcher import progress  # noqa: E402


def _tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


@pytest.mark.parametrize(("is_lead", "tf_config", "leads"), [
    ("1", None, True),
    ("0", _tf_config({"chief": ["a:1"], "worker": ["b:1"]}, "chief", 0), False),  # the variable wins
    (None, _tf_config({"worker": ["a:1", "b:1"]}, "worker", 0), True),  # chief-less: worker 0 leads
    (None, _tf_config({"worker": ["a:1", "b:1"]}, "worker", 1), False),
    (None, _tf_config({"chief": ["a:1"], "worker": ["b:1"]}, "worker", 0), False),
    (None, _tf_config({"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}, "ps", 0), False),
    (None, _tf_config({"chief": ["a:1"]}, "evaluator", 0), False),
    (None, None, True),  # outside tfcluster: the only task leads
    (None, "not json", True),
])
def test_the_lead_reports(monkeypatch: pytest.MonkeyPatch, is_lead: str | None, tf_config: str | None,
                          leads: bool) -> None:
    for name, value in (("TFCLUSTER_IS_CHIEF", is_lead), ("TF_CONFIG", tf_config)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert progress._leads() is leads
