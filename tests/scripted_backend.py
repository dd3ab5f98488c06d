"""A test backend, ``scripted:NAME``: QG, QA and NLI of tests/fakes.py whose scripts are rules, registered through
:mod:`q2_plugins.backends` as a plug-in registers. Importing this module registers it (the route of
``Q2_BACKEND_MODULES=tests.scripted_backend``); an entry point ``scripted = tests.scripted_backend:BACKEND`` of the
group ``q2_plugins.backends`` reaches the same object.

The rules: the question about a candidate is ``what about <candidate>?``; its answer in a context is the candidate
as the context writes it (found case-insensitively), or no answer; a premise entails a hypothesis it contains
(case-insensitively), else the pair is neutral. So a response whose every candidate is in the knowledge scores 1,
one with none of them 0."""

from __future__ import annotations

import re
from typing import Any, Optional

from q2_plugins import backends
from q2_plugins.metric.components import NLILabel
from q2_plugins.metric.errors import SETTING, ModelLoadError
from tests.fakes import FakeNLI, FakeQA, FakeQG

__all__ = ["ScriptedBackend", "BACKEND", "parts"]


class _Rule:
    """A fake's table whose every entry is computed by a rule."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __contains__(self, key: Any) -> bool:
        return True

    def __getitem__(self, key: Any) -> Any:
        return self.rule(*key)

    def get(self, key: Any, default: Any = None) -> Any:
        value = self.rule(*key)
        return default if value is None else value


def _question(answer: str, context: str) -> list[str]:
    return [f"what about {answer}?"]


def _answer(question: str, context: str) -> Optional[str]:
    asked = re.fullmatch(r"what about (.+)\?", question, flags=re.S)
    if asked is None:
        return None
    at = context.lower().find(asked.group(1).lower())
    return None if at < 0 else context[at:at + len(asked.group(1))]


def _label(premise: str, hypothesis: str) -> Optional[NLILabel]:
    return NLILabel.ENTAILMENT if hypothesis.strip().lower() in premise.lower() else None


def parts(name: str) -> dict[str, Any]:
    """The components ``scripted:NAME`` loads, by role, each signed as the backend signs it."""
    qg, qa, nli = FakeQG(_Rule(_question)), FakeQA(_Rule(_answer)), FakeNLI(_Rule(_label))  # type: ignore[arg-type]
    for part in (qg, qa, nli):
        part.signature = f"scripted:{name}"
    return {"qg": qg, "qa": qa, "nli": nli}


class ScriptedBackend:
    """``scripted:NAME`` for QG, QA and NLI; ``scripted:missing`` cannot load (as a model that is not there)."""

    def identity(self, role: str, name: str, config: Any) -> str:
        return f"scripted:{name}"

    def load(self, role: str, name: str, config: Any) -> Any:
        if name == "missing" or role not in ("qg", "qa", "nli"):
            raise ModelLoadError(f"Cannot load the {role.upper()} model 'scripted:{name}' (setting {SETTING}): "
                                 f"the scripted backend has no such script", setting=f"{role}_model")
        return parts(name)[role]


BACKEND = ScriptedBackend()
backends.register("scripted", BACKEND)
