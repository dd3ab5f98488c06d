# Copyright the q2-plugins authors. Licensed under the Apache License, Version 2.0.
"""Q²: factual consistency of knowledge-grounded dialogue responses, as a Hugging Face ``evaluate`` module.

This file only translates ``evaluate`` inputs and options into one :meth:`q2_plugins.Q2Scorer.score` call.
"""

import dataclasses

import datasets
import evaluate

from q2_plugins.integrations.adapters import ScorerCache, config_from_options
from q2_plugins.io.rows import result_row
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import NamesSetting
from q2_plugins.metric.names import METRIC_INFO
from q2_plugins.metric.progress import on_a_terminal

_CITATION = """\
@inproceedings{honovich-etal-2021-q2,
  title = "$Q^{2}$: Evaluating Factual Consistency in Knowledge-Grounded Dialogues via Question Generation and Question Answering",
  author = "Honovich, Or and Choshen, Leshem and Aharoni, Roee and Neeman, Ella and Szpektor, Idan and Abend, Omri",
  booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
  year = "2021",
  pages = "7856--7870",
}
"""  # noqa: E501 (the title line of the citation)

_DESCRIPTION = """\
Q² checks whether a dialogue response is consistent with the knowledge it should be grounded in: it generates
questions about informative spans of the response, answers them from the knowledge, and compares the answers
(token F1, upgraded by NLI). Responses without a valid question are scored by end-to-end NLI (the fallback).
The system score is the mean over scored responses; coverage is the share of responses with a valid question.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the responses to score.
    knowledge (list of str, or list of lists of str): the knowledge of each response (a list is joined by spaces).
    history (list, optional, keyword of compute only): the dialogue before each response; checked, not read by Q².
    explain (bool, default False, keyword of compute only): add every response's questions, answers, F1 and NLI.
    Any Q2Config field (e.g. use_nli=False), given to compute, overrides the load-time config for that call.
Returns:
    q2: system score (mean over scored responses; None when no response was scored),
    q2_no_nli: the same without NLI ("Q² w/o NLI"),
    scores: per-response score (None for a response without one; see explanations for why),
    coverage: share of responses with at least one valid question,
    fallback_rate: share of responses scored by the end-to-end NLI fallback,
    q2_stderr, q2_ci_low, q2_ci_high: q2's standard error and 95% interval (inside [0, 1]: Wilson score interval
        scaled by the scores' variance; None with fewer than two scored responses),
    coverage_ci_low, coverage_ci_high: coverage's 95% Wilson interval,
    n, n_scored, n_with_questions, n_fallback, n_no_valid_question, n_errors: counts,
    hashcode: the reproducibility signature (models and revisions, decoding, filters, version),
    explanations (with explain=True): one row per response, as `q2 score --explain` writes them (response,
        knowledge, status, score, questions with both answers, F1, NLI label and
        offsets, dropped questions, spans).
Examples:
    The models are local directories, e.g. saved by `q2 prefetch --output-dir q2-models`:

    >>> import evaluate
    >>> q2 = evaluate.load("q2", qg_model="q2-models/qg", qa_model="q2-models/qa", nli_model="q2-models/nli")
    >>> results = q2.compute(
    ...     predictions=["it aired in the us , canada and latin america"],
    ...     knowledge=["The Joy of Painting aired on PBS in the United States, Canada, Latin America and Europe."],
    ... )
    >>> sorted(results)  # doctest: +NORMALIZE_WHITESPACE
    ['coverage', 'coverage_ci_high', 'coverage_ci_low', 'fallback_rate', 'hashcode', 'n', 'n_errors', 'n_fallback',
     'n_no_valid_question', 'n_scored', 'n_with_questions', 'q2', 'q2_ci_high', 'q2_ci_low', 'q2_no_nli',
     'q2_stderr', 'scores']
    >>> len(results["scores"]), 0.0 <= results["q2"] <= 1.0
    (1, True)
"""

# config_name presets (evaluate.load("q2", config_name=...)); keyword options are applied on top
CONFIGS = {
    "default": {},  # the paper's Q²
    "no_nli": {"use_nli": False},  # the paper's "Q² w/o NLI"
}

_Q2_FIELDS = frozenset(f.name for f in dataclasses.fields(Q2Config))
# evaluate's own keyword arguments of EvaluationModule.__init__ (cache_dir is evaluate's, not Q2Config's)
_EVALUATE_KWARGS = frozenset({"keep_in_memory", "cache_dir", "num_process", "process_id", "seed", "experiment_id",
                              "hash", "max_concurrent_cache_files", "timeout"})


def keyword_argument(setting: str) -> str:
    """How errors name a setting here: the keyword argument of ``evaluate.load`` / ``compute`` (``qg_model=``)."""
    return f"{setting}="


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Q2(evaluate.Metric):
    def __init__(self, config_name=None, config=None, **kwargs):
        if config_name is not None and config_name not in CONFIGS:
            raise ValueError(f"Unknown config_name {config_name!r} for q2; expected one of {sorted(CONFIGS)}")
        unknown = sorted(set(kwargs) - _Q2_FIELDS - _EVALUATE_KWARGS)
        if unknown:
            raise TypeError(f"Unknown option(s) {unknown} for evaluate.load('q2'); options are Q2Config fields "
                            f"{sorted(_Q2_FIELDS - {'cache_dir'})} (Q2's cache_dir: pass config=Q2Config(...))")
        if config is not None and not isinstance(config, (Q2Config, dict)):
            raise TypeError(f"Expected config to be a Q2Config or a dict, but got {type(config).__name__}")
        base = config if isinstance(config, Q2Config) else config_from_options(config)
        options = {**CONFIGS[config_name or "default"], **{k: v for k, v in kwargs.items() if k in _Q2_FIELDS}}
        self.q2_config = config_from_options(options, base)
        self._scorers = ScorerCache()
        super().__init__(config_name=config_name, **{k: v for k, v in kwargs.items() if k in _EVALUATE_KWARGS})

    def _info(self):
        string = datasets.Value("string")
        return evaluate.MetricInfo(
            description=f"{_DESCRIPTION}Q2 is {METRIC_INFO.direction()}.\n",
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features({"predictions": string, "knowledge": string}),
                datasets.Features({"predictions": string, "knowledge": datasets.Sequence(string)}),
            ],
            codebase_urls=["https://github.com/orhonovich/q-squared"],
            reference_urls=["https://aclanthology.org/2021.emnlp-main.619/"],
        )

    def _compute(self, predictions, knowledge, history=None, explain=False, **options):
        config = config_from_options(options, self.q2_config)
        try:
            result = self._scorers.get(config).score(
                responses=predictions, knowledge=knowledge, history=history, explain=explain,
                progress=on_a_terminal(len(predictions)),
            )
        except NamesSetting as e:  # the core names its setting; here it is the keyword argument
            raise e.named(keyword_argument) from None
        output = {**result.stats.summary(), "scores": result.scores, "hashcode": result.signature}
        if explain:  # rows in the format of `q2 score --explain`, which `q2 report` renders
            output["explanations"] = [result_row(i, {"response": p, "knowledge": k}, r, explain=True,
                                                 random_weights=result.random_weights)
                                      for i, (p, k, r) in enumerate(zip(predictions, knowledge, result.responses))]
        return output
