"""The ``--q2-*`` options in ParlAI's parser, their mapping onto :class:`Q2Config`, and the scorer they select.

Every :class:`Q2Config` field is one ParlAI option ``--q2-<field>`` (``qg_model`` -> ``--q2-qg-model``), built from
:func:`q2_plugins.metric.config.config_options`, the list the ``q2`` command line uses too. ParlAI style: booleans take
a value (``--q2-use-nli false``); a boolean that is on by default also gets a switch (``--q2-no-nli``,
``--q2-no-fallback``, ...). Four options belong to the ParlAI side only: ``--q2-knowledge-field``,
``--q2-history``, ``--q2-score-every`` and ``--q2-per-example-file``.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Mapping, MutableMapping, Optional

from q2_plugins.metric import names as M
from q2_plugins.metric.config import Q2Config, config_options
from q2_plugins.metric.errors import NamesSetting, SettingError

__all__ = [
    "GROUP_TITLE", "NO_KNOWLEDGE", "add_q2_args", "patch_parser", "config_from_opt", "scorer_for",
    "register_scorer", "unregister_scorer", "knowledge_field", "knowledge_error", "parlai_option",
    "set_validation_mode",
]

GROUP_TITLE = "Q2 factual consistency (q2-plugins: --metrics q2, Q2 reranking)"
# Wizard of Wikipedia's value for "the wizard used no knowledge" (parlai.tasks.wizard_of_wikipedia TOKEN_NOCHOSEN).
NO_KNOWLEDGE = "no_passages_used"
_DEFAULT_FIELD = "checked_sentence"


def _negative_flag(name: str) -> str:
    return "--q2-no-" + name.removeprefix("use_").replace("_", "-")


def add_q2_args(parser: Any) -> None:
    """Add the Q2 argument group to a ``ParlaiParser`` (once; later calls do nothing)."""
    if "--q2-knowledge-field" in parser._option_string_actions:
        return
    group = parser.add_argument_group(GROUP_TITLE)
    group.add_argument(
        "--q2-knowledge-field", default=_DEFAULT_FIELD,
        help="field of the teacher's message holding the knowledge a response is scored against (a string or a "
             f"list of strings). Wizard of Wikipedia: checked_sentence, the sentence the wizard used; examples whose "
             f"value is {NO_KNOWLEDGE} are not scored and are counted as q2_no_knowledge",
    )
    group.add_argument(
        "--q2-history", type="bool", default=False,
        help="pass the episode so far (the teacher's turns and the gold responses before this one) to the Q2 core "
             "as the history of each response (read only with --q2-coref, which resolves the response's pronouns "
             "over it)",
    )
    group.add_argument(
        "--q2-per-example-file", default=None, metavar="FILE.jsonl",
        help="write every scored example to FILE.jsonl, one JSON row each (task, episode and turn ids, response, "
             "knowledge, then the row of `q2 score --explain`: score, status, every question with both answers, F1 "
             "and NLI label), from the metric's own batched calls; `q2 report FILE.jsonl` renders it",
    )
    group.add_argument(
        "--q2-score-every", type=int, default=256,
        help="--metrics q2 scores the responses it has collected in one Q2 call every this many responses and at "
             "every report",
    )
    for opt in config_options():
        flag = "--q2-" + opt.name.replace("_", "-")
        if opt.type is bool:
            group.add_argument(flag, type="bool", default=opt.default, help=opt.help)
            if opt.default:
                group.add_argument(_negative_flag(opt.name), dest=f"q2_{opt.name}", action="store_false",
                                   help=f"same as {flag} false")
        else:
            group.add_argument(flag, type=opt.type, default=opt.default, choices=opt.choices, help=opt.help)


def patch_parser(parser_class: Any) -> None:
    """Make ``parser_class.add_parlai_args`` (ParlAI's common arguments of every script) add the Q2 group too, and
    ``parser_class.parse_args`` set the direction of a Q² validation metric (:func:`set_validation_mode`)."""

    def add_parlai_args(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        add_q2_args(self)
        return out

    def parse_args(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        opt = original(self, *args, **kwargs)
        set_validation_mode(opt)
        return opt

    for method in (add_parlai_args, parse_args):
        original = getattr(parser_class, method.__name__)
        if not getattr(original, "__q2_plugins__", False):
            setattr(parser_class, method.__name__, _patched(original, method))


def _patched(original: Any, method: Any) -> Any:
    """``original`` wrapped by ``method(original, self, ...)``, marked as ours (patching twice does nothing)."""

    @functools.wraps(original)
    def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        return method(original, self, *args, **kwargs)

    patched.__q2_plugins__ = True  # type: ignore[attr-defined]
    return patched


#: the direction of each figure ParlAI reports, by its ParlAI name (``q2_fallback_rate``: lower is better)
_HIGHER_IS_BETTER = {m.framework_key: m.higher_is_better for m in M.METRICS if m.higher_is_better is not None}


def set_validation_mode(opt: MutableMapping[str, Any]) -> Optional[str]:
    """``--validation-metric-mode`` for a ``--validation-metric`` that is a Q² figure, from its declared direction
    (:mod:`q2_plugins.metric.names`): ParlAI's ``train_model`` knows the direction of its own metrics only and
    maximises any other, which is wrong for ``q2_fallback_rate``. Unset: set (``max`` / ``min``); set to the
    opposite: kept, with a one-line note on stderr. Returns the declared mode (None for a metric not Q²'s)."""
    higher = _HIGHER_IS_BETTER.get(opt.get("validation_metric"))  # type: ignore[arg-type]
    if higher is None:
        return None
    mode = "max" if higher else "min"
    if opt.get("validation_metric_mode") is None:
        opt["validation_metric_mode"] = mode
    elif opt["validation_metric_mode"] != mode:
        print(f"q2: --validation-metric-mode {opt['validation_metric_mode']} with --validation-metric "
              f"{opt['validation_metric']}, whose {'higher' if higher else 'lower'} values are better "
              f"(--validation-metric-mode {mode}); kept as given", file=sys.stderr)
    return mode


def config_from_opt(opt: Mapping[str, Any]) -> Q2Config:
    """The :class:`Q2Config` that the ``--q2-*`` options in ``opt`` describe (absent options: the defaults)."""
    try:
        return Q2Config.from_dict({o.name: opt.get(f"q2_{o.name}", o.default) for o in config_options()})
    except SettingError as e:  # the core names the setting; in ParlAI it is the option --q2-<setting>
        raise e.named(parlai_option) from None


def parlai_option(setting: str) -> str:
    """The ParlAI option of a library setting, as errors name it: ``qg_model`` -> ``--q2-qg-model``."""
    return "--q2-" + setting.replace("_", "-")


def knowledge_field(opt: Mapping[str, Any]) -> str:
    return opt.get("q2_knowledge_field") or _DEFAULT_FIELD


def knowledge_error(message: Mapping[str, Any], field: str, who: str) -> str:
    """The one message for a teacher message that lacks the knowledge field: names the field and the option."""
    fields = ", ".join(sorted(str(k) for k in message.keys() if not str(k).endswith("_vec"))) or "none"
    return (f"{who}: the message has no {field!r} field, so there is no knowledge to score the response against "
            f"(message fields: {fields}). Name the field that holds the knowledge with --q2-knowledge-field FIELD "
            f"(Wizard of Wikipedia: checked_sentence).")


_REGISTERED: list[Any] = []


def register_scorer(scorer: Any) -> None:
    """Use ``scorer`` for ParlAI runs whose ``--q2-*`` options give ``scorer.config`` (see ``parlai_ext``)."""
    if not hasattr(scorer, "config") or not hasattr(scorer, "score"):
        raise TypeError(f"Expected a Q2Scorer (an object with .config and .score), but got {type(scorer).__name__}")
    _REGISTERED.insert(0, scorer)


def unregister_scorer(scorer: Any) -> None:
    if scorer in _REGISTERED:
        _REGISTERED.remove(scorer)


def scorer_for(config: Q2Config, load: bool = True) -> Any:
    """A registered scorer for ``config``, else the process-wide one (models load once per process).

    ``load`` loads the models now, so that a wrong model path fails at the first example, not at the report.
    """
    try:  # a library error names its setting; here it is the option --q2-<setting>
        scorer: Optional[Any] = next((s for s in _REGISTERED if s.config == config), None)
        if scorer is None:
            from q2_plugins.integrations.adapters import shared_scorer

            scorer = shared_scorer(config, slot="parlai")
        if load:
            from q2_plugins.backends.loading import quiet_loading

            c = scorer.config
            parts = ["candidate_extractor", "question_generator", "question_answerer"]
            parts += ["personal_filter"] if c.remove_personal else []
            parts += ["nli"] if (c.use_nli or c.fallback) else []
            with quiet_loading():  # as q2 score: no per-file loading bars in ParlAI's output
                for part in parts:
                    getattr(scorer, part, None)
    except NamesSetting as e:
        raise e.named(parlai_option) from None
    return scorer
