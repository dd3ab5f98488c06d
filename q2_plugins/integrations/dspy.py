"""DSPy integration: :class:`Q2Reward`, a reward function for ``dspy.BestOfN`` and ``dspy.Refine`` (or a metric for
``dspy.Evaluate``): Q² of a prediction's answer against the knowledge it should agree with, scored by the local Q²
models.

Which fields hold the answer, the knowledge and the history is the user's choice: ``answer`` names the prediction's
output field; ``knowledge`` (and ``history``) name an input field of the module, else an output field of the
prediction (a module that retrieves its own passages). ``BestOfN`` asks for one reward at a time; rewards asked at
once from several threads (``dspy.Evaluate(..., num_threads=N)``, ``Module.batch(..., num_threads=N)``) are gathered
into one core call (a :class:`~q2_plugins.integrations.batching.ThreadBatcher`), with the scores each would get
alone. An answer Q² cannot score (an error, or no valid question with the fallback off) gets
``unscored`` (default 0.0: never preferred to an answer the knowledge supports); its status is in
:attr:`Q2Reward.results`.

Needs ``pip install 'q2-plugins[dspy]'``.
"""

from __future__ import annotations

from typing import Any, Optional

try:
    import dspy
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.dspy needs dspy: pip install 'q2-plugins[dspy]' ({e.name} is missing)"
    ) from e

from q2_plugins.integrations.chat import Answer, ChatScorer, Scored, chat_scorer
from q2_plugins.metric.config import Q2Config

__all__ = ["Q2Reward"]


class Q2Reward:
    """``reward(args, prediction) -> float``: Q² of ``prediction[answer]`` against ``args[knowledge]`` (or
    ``prediction[knowledge]``). ``config`` (default ``Q2Config()``) with ``options`` (``Q2Config`` fields) on top,
    or ``scorer``, a :class:`~q2_plugins.integrations.chat.ChatScorer` to share.
    :attr:`results` keeps each call's :class:`~q2_plugins.integrations.chat.Scored` (status, questions,
    signature), in the order the calls got them."""

    def __init__(self, answer: str = "answer", knowledge: str = "knowledge", history: Optional[str] = None, *,
                 unscored: float = 0.0, config: Optional[Q2Config] = None, scorer: Optional[ChatScorer] = None,
                 **options: Any) -> None:
        self.answer, self.knowledge, self.history = answer, knowledge, history
        self.unscored = unscored
        self.scorer = chat_scorer(scorer, config, options, slot="dspy")  # a bad option fails here, before any call
        self.results: list[Scored] = []

    def _field(self, args: dict, prediction: Any, name: str, what: str) -> Any:
        if name in args:
            return args[name]
        if name in prediction:
            return prediction[name]
        raise KeyError(f"q2: neither the module's inputs ({sorted(args)}) nor the prediction "
                       f"({sorted(prediction.keys())}) have the {what} field {name!r}; name it with "
                       f"Q2Reward({what}=...)")

    def answer_of(self, args: dict, prediction: dspy.Prediction) -> Answer:
        """What this reward scores of one call: the answer, its knowledge and its history."""
        if self.answer not in prediction:
            raise KeyError(f"q2: the prediction has no answer field {self.answer!r} (fields: "
                           f"{sorted(prediction.keys())}); name it with Q2Reward(answer=...)")
        knowledge = self._field(args, prediction, self.knowledge, "knowledge")
        history: tuple[str, ...] = ()
        if self.history is not None:
            turns = self._field(args, prediction, self.history, "history")
            history = tuple(map(str, turns)) if isinstance(turns, (list, tuple)) else (str(turns),)
        knowledge = list(knowledge) if isinstance(knowledge, (list, tuple)) else knowledge
        return Answer(str(prediction[self.answer]), knowledge, history)

    def __call__(self, args: dict, prediction: dspy.Prediction, trace: Any = None) -> float:
        (scored,) = self.scorer.gathered([self.answer_of(args, prediction)])
        self.results.append(scored)
        return self.unscored if scored.score is None else float(scored.score)
