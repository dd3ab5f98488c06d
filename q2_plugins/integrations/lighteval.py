"""LightEval integration: Q² as sample-level LightEval metrics computed in batches, and the ``q2_wow`` custom task.

:func:`q2_metrics` gives six :class:`~lighteval.metrics.utils.metric_utils.SampleLevelMetric` objects, ``q2``,
``q2_no_nli``, ``q2_coverage``, ``q2_fallback_rate`` and the bounds of ``q2``'s 95% interval, ``q2_ci_low`` and
``q2_ci_high`` (the interval ``q2 score`` prints: :func:`q2_ci_low`), as :mod:`q2_plugins.metric.names` declares
them, with ``batched_compute=True``: LightEval hands each of them all the samples of a task at once, and they share one
:class:`Q2Batch`, so a task's samples are scored in **one** :meth:`Q2Scorer.score` call whichever metric asks first.
Per sample, a metric's value is the response's figure; a response without one (an error, or no valid question with
the fallback off) gets NaN and the task's figure is the mean over the others (:func:`scored_mean`), as in the core.

The settings and the signature reach LightEval's results JSON in ``config_tasks.<task>.metrics[*].sample_level_fn``
(``Q2Batch(..., signature=...)``): LightEval writes each metric's computation as its text.

:func:`q2_task` makes a task from a folder of JSON-lines files of Wizard-of-Wikipedia style records
(``knowledge``, ``history``, ``response``) with no download: ``q2_plugins.integrations.lighteval_tasks`` (give it
to ``--custom-tasks``) holds ``q2_wow`` on the 8-record sample bundled with the lm-eval task, and
:class:`RecordedResponses` is a LightEval model that answers with each record's recorded ``response`` (scoring what a
system already said). :func:`custom_tasks_only` / :func:`main`: LightEval's command line with its task list limited
to the custom tasks (see there why).

Needs ``pip install 'q2-plugins[lighteval]'``.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

try:
    from lighteval.metrics.metrics_sample import SampleLevelComputation
    from lighteval.metrics.utils.metric_utils import SampleLevelMetric
    from lighteval.models.abstract_model import LightevalModel
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.lighteval_task import LightevalTaskConfig
    from lighteval.tasks.requests import Doc, SamplingMethod
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.lighteval needs lighteval: pip install 'q2-plugins[lighteval]' ({e.name} is missing; "
        f"from a checkout, bash scripts/setup_lighteval.sh makes .venv-lighteval, where it runs)"
    ) from e

from q2_plugins import Q2Config, ResponseResult
from q2_plugins.integrations import adapters
from q2_plugins.metric import names as M
from q2_plugins.metric.results import ResponseStatus
from q2_plugins.metric.significance import mean_interval_of

__all__ = ["Q2Batch", "Q2Value", "q2_metrics", "scored_mean", "q2_ci_low", "q2_ci_high", "wow_prompt", "q2_task",
           "TaskDataError", "data_splits", "RecordedResponses",
           "SAMPLE_DATA", "custom_tasks_only", "main"]

#: the bundled Wizard-of-Wikipedia sample (8 records) of the lm-eval task, which the ``q2_wow`` task reads
SAMPLE_DATA = Path(__file__).resolve().parent / "lm_eval" / "tasks" / "q2_wow" / "q2_wow_sample.jsonl"


def _response_text(response: ModelResponse) -> str:
    texts = response.final_text if hasattr(response, "final_text") else response.text
    return texts[0] if texts else ""


class Q2Batch:
    """Scores the samples LightEval hands a metric in one core call and keeps that batch's results, so the other
    Q² metrics of the task, asked with the same samples, read them instead of scoring again."""

    def __init__(self, knowledge: str = "knowledge", history: Optional[str] = None, config: Optional[Q2Config] = None,
                 **options: Any) -> None:
        self.knowledge = knowledge
        self.history = history
        self.config: Q2Config = adapters.config_from_options(options, base=config)  # a bad option fails here, at once
        self.signature: Optional[str] = None
        self.calls = 0  # core calls made
        self._last: Optional[tuple[str, list[ResponseResult]]] = None

    def _field(self, doc: Doc, key: str, what: str) -> Any:
        specific = doc.specific or {}
        if key not in specific:
            raise KeyError(f"q2: the sample has no {what} {key!r} in doc.specific (keys: {sorted(specific)}); name "
                           f"it with q2_metrics({what}=...)")
        return specific[key]

    def results(self, responses: Sequence[ModelResponse], docs: Sequence[Doc]) -> list[ResponseResult]:
        """The Q² result of each sample, scored in one call unless this batch was scored last."""
        if len(responses) != len(docs):
            raise ValueError(f"q2: LightEval passed {len(responses)} responses for {len(docs)} samples")
        texts = [_response_text(r) for r in responses]
        knowledge = [self._field(d, self.knowledge, "knowledge") for d in docs]
        history = None if self.history is None else [self._field(d, self.history, "history") for d in docs]
        key = json.dumps([texts, knowledge, history], default=repr)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        res = adapters.shared_scorer(self.config, slot="lighteval").score(responses=texts, knowledge=knowledge,
                                                                          history=history, explain=True)
        self.calls += 1
        self.signature = str(res.signature)
        self._last = (key, res.responses)
        return res.responses

    def __deepcopy__(self, memo: dict) -> "Q2Batch":
        return self  # LightEval deep-copies task configs when it saves them: this holds results, not settings

    def __str__(self) -> str:
        return f"Q2Batch(knowledge={self.knowledge}, history={self.history}, signature={self.signature})"


def _value(result: ResponseResult, key: str) -> float:
    """A sample's value of the metric ``key`` (NaN where it has none), as lm-eval's adapter reports it."""
    if key in (M.Q2.framework_key, M.Q2_NO_NLI.framework_key):
        value = result.score if key == M.Q2.framework_key else result.score_no_nli
        return math.nan if value is None else float(value)
    if result.status == ResponseStatus.ERROR:
        return math.nan
    if key == M.COVERAGE.framework_key:
        return float(result.status == ResponseStatus.SCORED)
    return float(result.used_fallback)


class Q2Value(SampleLevelComputation):
    """One Q² figure per sample, for a batch of samples (``batched_compute=True``): the computation of one metric."""

    def __init__(self, batch: Q2Batch, key: str) -> None:
        self.batch = batch
        self.key = key

    def compute(self, responses: Sequence[ModelResponse], docs: Sequence[Doc], **kwargs: Any) -> list[float]:
        return [_value(r, self.key) for r in self.batch.results(responses, docs)]

    def __deepcopy__(self, memo: dict) -> "Q2Value":
        return self


def scored_mean(values: Sequence[float]) -> float:
    """The mean over the samples that have a value (NaN for none), the core's system figure. (The name holds
    ``mean``: LightEval then computes the standard error in closed form.)"""
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _bound(values: Sequence[float], which: str) -> float:
    """The ``which`` bound of the 95% interval of the samples' mean (NaN with fewer than two values): the one ``q2
    score`` prints (:func:`q2_plugins.metric.significance.mean_interval_of`, inside [0, 1])."""
    interval = mean_interval_of(values, M.INTERVAL_CONFIDENCE)[1]
    return math.nan if interval is None else getattr(interval, which)


def q2_ci_low(values: Sequence[float]) -> float:
    """The lower bound of ``q2``'s 95% interval from the samples' values (see :func:`_bound`)."""
    return _bound(values, "low")


def q2_ci_high(values: Sequence[float]) -> float:
    """The upper bound of ``q2``'s 95% interval from the samples' values (see :func:`_bound`)."""
    return _bound(values, "high")


def q2_metrics(knowledge: str = "knowledge", history: Optional[str] = None, config: Optional[Q2Config] = None,
               **options: Any) -> list[SampleLevelMetric]:
    """The Q² metrics of a task whose samples carry the knowledge in ``doc.specific[knowledge]`` (and the dialogue
    before the response in ``doc.specific[history]``, read with ``coref``). The settings: ``config`` (default
    ``Q2Config()``) with ``options`` (``Q2Config`` fields) on top."""
    batch = Q2Batch(knowledge, history, config, **options)
    figures = [(m, m.framework_key, scored_mean) for m in M.PER_RESPONSE]
    figures += [(M.Q2_CI_LOW, M.Q2.framework_key, q2_ci_low), (M.Q2_CI_HIGH, M.Q2.framework_key, q2_ci_high)]
    return [SampleLevelMetric(metric_name=m.framework_key, higher_is_better=m.higher_is_better,
                              category=SamplingMethod.GENERATIVE, sample_level_fn=Q2Value(batch, key),
                              corpus_level_fn=corpus, batched_compute=True)
            for m, key, corpus in figures]


def wow_prompt(line: dict, task_name: str = "") -> Doc:
    """A Wizard-of-Wikipedia record as a LightEval sample: the prompt (the knowledge, the turns, then ``Wizard:``),
    the recorded response as the one choice, and ``knowledge`` / ``history`` / ``response`` / ``id`` in
    ``specific``."""
    turns = line["history"] if isinstance(line["history"], list) else [line["history"]]
    speakers = ["Apprentice", "Wizard"]
    first = (len(turns) - 1) % 2  # the last turn is the apprentice's
    lines = [f"Knowledge: {line['knowledge']}"]
    lines += [f"{speakers[(first + i) % 2]}: {turn}" for i, turn in enumerate(turns)]
    response = line.get("response") or ""
    return Doc(task_name=task_name, query="\n".join(lines) + "\nWizard:", choices=[response], gold_index=0,
               id=str(line.get("id", "")),
               specific={"knowledge": line["knowledge"], "history": line["history"], "response": response,
                         "id": line.get("id")})


class TaskDataError(ValueError):
    """A task's data folder does not hold what the task reads (no such folder, no data file, not the split named)."""


def data_splits(folder: Union[str, Path]) -> dict[str, list[str]]:
    """The splits ``datasets`` reads from the data files of ``folder``, each with its files (relative names), by
    ``datasets``' own rules: a file whose name has ``train`` in it is the split ``train``, ``test`` / ``eval`` the
    split ``test``, ``validation`` / ``valid`` / ``dev`` the split ``validation``, ...; only when no name says a
    split, every file is ``train`` (a file that names none beside ones that do is not read)."""
    from datasets.data_files import DataFilesDict, EmptyDatasetError, get_data_patterns

    folder = Path(folder)
    try:
        files = DataFilesDict.from_patterns(get_data_patterns(str(folder)), base_path=str(folder))
    except EmptyDatasetError:
        return {}
    return {str(split): sorted(Path(f).relative_to(folder.resolve()).as_posix() for f in found)
            for split, found in files.items()}


def _split(name: str, folder: Path, split: Optional[str]) -> str:
    """The split the task reads: ``split``, or the folder's one split when it is None; else one line naming the
    files found (:class:`TaskDataError`)."""
    splits = data_splits(folder)
    if split in splits or (split is None and len(splits) == 1):
        return split or next(iter(splits))
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) or ["no file"]
    seen = f"the split(s) {', '.join(splits)}" if splits else "no split"
    what = f"reads the split {split!r}" if split else "reads one split (split=None)"
    raise TaskDataError(f"q2: the LightEval task {name!r} {what}, but {folder} holds {', '.join(files)}: "
                        f"{seen} (a file's name says its split: test.jsonl is 'test', train.jsonl 'train', others "
                        f"'train' when no name says one); name one with q2_task(..., split=...)")


def q2_task(name: str = "q2_wow", data: Union[str, Path, None] = None, *, split: Optional[str] = None,
            knowledge: str = "knowledge", history: Optional[str] = None, generation_size: int = 40,
            config: Optional[Q2Config] = None, **options: Any) -> LightevalTaskConfig:
    """A LightEval task on the JSON-lines files of the folder ``data`` (default: the folder of :data:`SAMPLE_DATA`),
    read from disk by ``datasets`` (no hub): the split ``split`` (default: the folder's one split; the file names say
    the splits, :func:`data_splits`), every record a sample (:func:`wow_prompt`), scored by :func:`q2_metrics` with
    ``config`` and ``options``. A folder without that split raises :class:`TaskDataError` naming the files found."""
    folder = Path(data) if data is not None else SAMPLE_DATA.parent
    if not folder.is_dir():
        raise TaskDataError(f"q2: the LightEval task {name!r} reads a folder of JSON-lines files; {folder} is not one")
    split = _split(name, folder, split)
    return LightevalTaskConfig(
        name=name, prompt_function=wow_prompt, hf_repo=str(folder.resolve()), hf_subset="default",
        metrics=q2_metrics(knowledge, history, config, **options), hf_avail_splits=[split], evaluation_splits=[split],
        generation_size=generation_size, stop_sequence=["\n"], version=1)


class RecordedResponses(LightevalModel):
    """A LightEval model that answers each sample with its record's recorded ``response`` (``doc.specific``): Q²
    of what a system already said, through LightEval. ``lighteval custom NAME PATH_OF_THIS_FILE ...``."""

    def __init__(self, config: Any) -> None:
        from lighteval.utils.cache_management import SampleCache

        self.config = config
        self._cache = SampleCache(config)  # LightEval's pipeline expects one; nothing is cached (answers are read)

    @property
    def tokenizer(self) -> Any:
        return None

    @property
    def add_special_tokens(self) -> bool:
        return False

    @property
    def max_length(self) -> int:
        return 2048

    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        return [ModelResponse(text=[(d.specific or {}).get("response", "")]) for d in docs]

    def loglikelihood(self, docs: list[Doc]) -> list[ModelResponse]:
        raise NotImplementedError("RecordedResponses only answers generative tasks")

    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        raise NotImplementedError("RecordedResponses only answers generative tasks")


@contextmanager
def custom_tasks_only() -> Iterator[None]:
    """Inside, LightEval's task list holds only the tasks of ``--custom-tasks``.

    LightEval 0.13 builds its task list by importing every built-in task, and some of them reach the network when
    imported: ``tiny_benchmarks`` downloads a pickle from GitHub, ``mt_bench`` and ``mix_eval`` ask the Hub for their
    judge model (with an argument that huggingface_hub 1.x removed: a ``TypeError`` next to transformers 5). So
    ``lighteval`` fails before any task runs, offline or on the transformers-5 stack. Nothing else changes."""
    from lighteval.tasks.registry import Registry

    original = Registry.__dict__["load_all_task_configs"]

    def load_custom_task_configs(custom_tasks: Any = None, load_multilingual: bool = False) -> dict:
        if custom_tasks is None:
            raise ValueError("q2: LightEval's built-in tasks are not loaded here: name a custom tasks module "
                             "(e.g. q2_plugins.integrations.lighteval_tasks)")
        return Registry._extract_configs(Registry.create_custom_tasks_module(custom_tasks))

    Registry.load_all_task_configs = staticmethod(load_custom_task_configs)  # type: ignore[method-assign]
    try:
        yield
    finally:
        Registry.load_all_task_configs = original  # type: ignore[method-assign]


RECORDED_MODEL_FLAG = "--recorded-model-file"


def main(argv: Optional[list[str]] = None) -> Any:
    """``python -m q2_plugins.integrations.lighteval ARGS``: LightEval's command line (``lighteval ARGS``), its task
    list made by :func:`custom_tasks_only`. ``--recorded-model-file`` alone prints the path of this file, the model
    file of :class:`RecordedResponses` for ``lighteval custom``."""
    import sys

    from lighteval.__main__ import app

    args = sys.argv[1:] if argv is None else argv
    if args == [RECORDED_MODEL_FLAG]:
        print(Path(__file__).resolve())
        return 0
    with custom_tasks_only():
        try:
            return app(args=args)
        except TaskDataError as e:  # (the user's data folder: one line, not LightEval's traceback around it)
            print(e, file=sys.stderr)
            raise SystemExit(2) from None


if __name__ == "__main__":  # (the module's own main: a task file imports it by name, and raises its TaskDataError)
    from q2_plugins.integrations.lighteval import main as _main

    _main()
