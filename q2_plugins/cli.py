"""Command line: ``q2 score``, ``q2 replay``, ``q2 report``, ``q2 compare``, ``q2 prefetch``, ``q2 meta-eval``,
``q2 perturb``, ``q2 train``, ``q2 hooks``.
Config flags map one-to-one onto :class:`Q2Config`."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from . import __version__
from . import metric_names as M
from .config import MODEL_KINDS, config_from_args, config_options
from .results import print_summary

if TYPE_CHECKING:
    from .progress import Progress

__all__ = ["main", "build_parser", "config_from_args"]


_GROUP_TITLES = {
    "models": "models (each named in the signature by its identity)",
    "question generation": "Q2 settings: question generation (each can change a score; in the signature)",
    "question answering": "Q2 settings: question answering",
    "filters and comparison": "Q2 settings: filters and answer comparison",
    "coreference": "Q2 settings: coreference (the paper's appendix A step; off by default)",
    "budgets": "Q2 settings: per-row budgets, each checked before the work it bounds (lengths before any spaCy or "
               "model work; 0 = no limit; docs/failures.md)",
    "runtime": "runtime (how a run goes: never changes a score, not in the signature)",
    "per-role": "per-role model settings (each overrides the setting for all models; the dtype is in the signature)",
}


def _add_config_flags(parser: argparse.ArgumentParser, names: Optional[Sequence[str]] = None) -> None:
    """One flag per :class:`Q2Config` field (or per field in ``names``), grouped by what the field means."""
    groups: dict[str, Any] = {}
    for opt in config_options():
        if names is not None and opt.name not in names:
            continue
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(_GROUP_TITLES[opt.group])
        flag = "--" + opt.name.replace("_", "-")
        if opt.type is bool:
            groups[opt.group].add_argument(flag, dest=opt.name, action=argparse.BooleanOptionalAction,
                                           default=opt.default, help=opt.help)
        else:
            shown = "" if opt.default is None else " (default: %(default)s)"
            groups[opt.group].add_argument(flag, dest=opt.name, type=opt.type, default=opt.default,
                                           choices=opt.choices, help=opt.help + shown)


def _add_score_io_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input and output")
    g.add_argument("--input", required=True, help="JSONL or CSV/TSV file, one response per row")
    g.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    g.add_argument("--response-column", default="response", help="column of the responses")
    g.add_argument("--knowledge-column", default="knowledge", help="column of the knowledge")
    g.add_argument("--history-column", default=None, help="optional column with the dialogue history")
    g.add_argument("--output", help="JSONL file of per-response results (in input order), '-' for standard output "
                                    "(the summary then goes to standard error); its summary, signature and config "
                                    "go to OUTPUT.meta.json")
    g.add_argument("--explain", action="store_true", help="include every question, its answers, F1 and NLI label")
    g.add_argument("--labels", dest="labels", action=_DeprecatedLabels, help=argparse.SUPPRESS)
    g.add_argument("--begin-labels", dest="labels", action="store_true",
                   help="add each response's BEGIN-style label (label, label3, label_reason; docs/taxonomy_stress.md)")
    g.add_argument("--taxonomy-model", metavar="DIR",
                   help="label responses with a five-way model of q2 train --labels 5 instead of the text rules "
                        "(implies --begin-labels; the history column is its previous turn; docs/training.md)")
    g.add_argument("--html", help="also write an HTML report of the results here (implies --explain and "
                                  "--begin-labels)")
    g.add_argument("--format", choices=("text", "json"), default="text", help="summary printed on stdout")
    g.add_argument("--fail-on-error", action="store_true",
                   help="exit 1 when any row gets an error (by default only when no row could be scored)")
    g.add_argument("--chunk-size", type=int, default=1000, help="rows per scoring call (results stream out)")
    g.add_argument("--no-progress", action="store_true",
                   help="no progress bars and no 'loading models' line (standard error stays quiet)")


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows every flag's default (a flag that is unset by default says so in its text)."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default is None or action.required:
            return action.help
        return super()._get_help_string(action)


def _add_ray_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("Ray engine (--engine ray; needs the ray extra; docs/ray.md)")
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process; ray: an actor pool on Ray Data (files or directories in and out)")
    g.add_argument("--ray-address", help="Ray cluster to join (default: start a local one)")
    g.add_argument("--concurrency", type=int, default=1, help="scoring actors, each loading the models once")
    g.add_argument("--num-cpus-per-worker", type=float, default=1, help="CPUs (torch threads) per actor")
    g.add_argument("--num-gpus-per-worker", type=float, default=None, help="GPUs per actor (with --device cuda)")
    g.add_argument("--ray-batch-size", type=int, default=64, help="rows per scoring call of an actor")
    g.add_argument("--keep-min-score", type=float, default=None,
                   help="filter mode: --output gets rows with q2_score >= this, --dropped-output the others")
    g.add_argument("--unscored", choices=("drop", "keep"), default="drop",
                   help="filter mode: where rows without a score (errors, no valid question) go")
    g.add_argument("--dropped-output", help="filter mode: the dropped rows (default: <output> with .dropped)")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that a command's unknown flag is refused in the command's own usage, with the
    closest flags it has (``q2 score --ouput``: did you mean --output?), before any other complaint."""

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace: Any = None) -> Any:
        if self._subparsers is None and args is not None:  # a command's parser (the top level has subcommands)
            for token in args:
                if token == "--":
                    break
                flag = token.split("=", 1)[0]
                if flag.startswith("--") and not any(o.startswith(flag) for o in self._option_string_actions):
                    close = difflib.get_close_matches(flag, sorted(self._option_string_actions), n=3, cutoff=0.6)
                    self.error(f"unrecognized argument {flag}"
                               + (f"; did you mean {' or '.join(close)}?" if close else ""))
        return super().parse_known_args(args, namespace)


class _DeprecatedLabels(argparse.Action):
    """``q2 score --labels``, the old spelling of ``--begin-labels`` (``q2 train --labels`` is a count)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        print("q2 score: --labels is deprecated and will be removed: it is --begin-labels (q2 train --labels is the "
              "number of labels)", file=sys.stderr)
        setattr(namespace, self.dest, True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="q2", description="Q2 factual consistency for knowledge-grounded dialogue")
    parser.add_argument("--version", action="version", version=f"q2_plugins {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("score", help="score a JSONL/CSV file of responses and knowledge", formatter_class=_Help)
    _add_score_io_flags(p)
    _add_config_flags(p)
    _add_ray_flags(p)

    r = sub.add_parser("replay", help="score recorded per-question outputs of the original pipeline",
                       formatter_class=_Help)
    r.add_argument("--steps", required=True, nargs="+", help="*_out.steps.csv file(s)")
    r.add_argument("--scores", nargs="*", default=[],
                   help="matching *_scores.csv file(s): recorded fallback values for responses without questions")
    r.add_argument("--output", help="JSONL file of per-response results")
    r.add_argument("--explain", action="store_true")
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.add_argument("--normalization", default="q2-original", choices=("q2-original", "squad"))
    r.add_argument("--discard-unanswerable", action="store_true",
                   help="Q2*: questions with no answer in the knowledge do not count when another one has an answer")
    r.add_argument("--html", help="also write an HTML report of the results here (implies --explain)")

    h = sub.add_parser("report", help="write a self-contained HTML report of results files", formatter_class=_Help)
    h.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="q2 score / q2 replay output (JSONL), or a per-example file of the framework adapters")
    h.add_argument("--output", required=True, help="the HTML file to write")
    h.add_argument("--title", help="page title (default: the input file names)")
    h.add_argument("--texts", metavar="INPUT",
                   help="the file q2 score read: adds each row's response and knowledge (q2 score output has none)")
    h.add_argument("--response-column", default="response")
    h.add_argument("--knowledge-column", default="knowledge")
    h.add_argument("--history-column", default=None)

    t = sub.add_parser("make-test-models",
                       help="build tiny RANDOM-weight QG/QA/NLI models (offline smoke runs; scores are meaningless)")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--output-dir", help="write DIR/qg, DIR/qa, DIR/nli and DIR/coref (coreference)")
    where.add_argument("--examples", metavar="DIR",
                       help="lay DIR out as the documented examples expect: q2-models/{qg,qa,nli,coref}, "
                            "my-dialogue-model "
                            "(causal LM), my-seq2seq-model (T5), metrics/response_length (an evaluate module)")

    f = sub.add_parser("prefetch", help="download the configured models into a directory, for offline machines",
                       formatter_class=_Help)
    f.add_argument("--output-dir", required=True, help="where the models go: DIR/qg, DIR/qa, DIR/nli, DIR/coref")
    _add_config_flags(f, names=[f"{role}_{what}" for role in (*MODEL_KINDS, "coref") for what in ("model", "revision")])

    from .compare import add_parser as add_compare_parser
    from .hooks import add_parser as add_hooks_parser
    from .metaeval.cli import add_parser as add_meta_eval_parser
    from .perturb import add_parser as add_perturb_parser

    add_meta_eval_parser(sub, _add_config_flags)
    add_perturb_parser(sub)
    from .train import add_parser as add_train_parser

    add_train_parser(sub, _Help)
    add_hooks_parser(sub)
    add_compare_parser(sub)
    return parser


def _score(args: argparse.Namespace) -> int:
    _check_outputs(args)  # before any file is opened: no output may be an input
    with _terminate_as_interrupt():
        if args.engine == "ray":
            if args.taxonomy_model:
                raise ValueError("--taxonomy-model labels with the local engine; drop --engine ray")
            return _score_with_ray(args)
        return _score_local(args)


def _score_local(args: argparse.Namespace) -> int:
    from .io import ResultFile, read_rows
    from .rows import cache_line, write_meta
    from .scorer import Q2Scorer

    if args.keep_min_score is not None:
        raise ValueError("--keep-min-score (filter mode) needs --engine ray")
    taxonomy = _taxonomy_model(args.taxonomy_model) if args.taxonomy_model else None
    config = config_from_args(args)
    spec = _row_spec(args)
    # the file and its columns are checked before anything else
    rows = read_rows(args.input, args.input_format, spec.required, spec.settings)
    if not args.output and not args.html:  # said before the work, not after it
        print("q2 score: no --output: the per-response results will not be saved, only the summary printed "
              "(name a file, or - for standard output)", file=sys.stderr)
    scorer = _loaded(Q2Scorer(config), progress=not args.no_progress)  # a model that cannot load stops here, once
    progress = _run_progress(args)
    out = ResultFile(args.output) if args.output else None
    report_rows: Optional[list[dict[str, Any]]] = [] if args.html else None
    try:
        stats, errors, signature = _score_rows(scorer, rows, spec, args, out, report_rows, progress, taxonomy)
    finally:
        _close(progress)
    summary = {**stats.summary(), **errors.summary()}
    signature = signature or scorer.signature
    code, problem = stats.exit_code(args.fail_on_error)
    extra: dict[str, Any] = {} if scorer.cache is None else {"cache": scorer.cache.counts()}
    if args.taxonomy_model:
        extra["taxonomy_model"] = _taxonomy_model_id(args.taxonomy_model)
    if report_rows is not None:
        try:
            _write_report(args.html, report_rows, signature, summary, [args.input])
        except OSError as e:  # the results are saved: the run failed only to write its report, and says so
            code, extra["html_error"] = 2, f"--html {args.html} could not be written: {e}"
    if out is not None and not out.stdout:
        write_meta(out.target, engine="local", signature=signature, summary=summary, config=config, rows=out.rows,
                   input=args.input, spec=spec, exit_code=code, **extra)
    stream = sys.stderr if out is not None and out.stdout else sys.stdout
    print_summary({**summary, **extra}, signature, args.format, stream)
    if "cache" in extra and args.format == "text":
        print(cache_line(extra["cache"], config.cache_dir), file=stream)
    for line in (extra.get("html_error"), problem):
        if line:
            print(f"q2 score: {line}", file=sys.stderr)
    return code


def _row_spec(args: argparse.Namespace) -> Any:
    """The flags that say which fields are scored and what each result carries (``--html`` implies both extras)."""
    from .rows import RowSpec

    return RowSpec(args.response_column, args.knowledge_column, args.history_column,
                   explain=args.explain or bool(args.html), labels=args.labels or bool(args.html))


def _check_outputs(args: argparse.Namespace) -> None:
    """Every file the run would write (``--output`` with its ``.partial``, ``.meta.json`` and temporaries, the
    ``--html`` report, Ray's dropped rows) against the input, through links too: a clash stops the run here."""
    from .io import check_outputs, files_written

    outputs: list[tuple[str, list[Any]]] = []
    if args.output and args.output != "-":
        outputs.append((f"--output {args.output}", files_written(args.output)))
    if args.html:
        outputs.append((f"--html {args.html}", _html_files(args.html)))
    if args.engine == "ray" and args.keep_min_score is not None and args.output:
        from .rows import dropped_path

        dropped = args.dropped_output or dropped_path(args.output)
        outputs.append((f"--dropped-output {dropped}", files_written(dropped)))
    check_outputs([args.input], outputs)


def _html_files(path: str) -> list[Path]:
    """An HTML report and the temporary files its writer may make beside it."""
    import os

    from .io import tmp_path

    html = Path(path)
    return [html, tmp_path(html), html.with_name(f".{html.name}.{os.getpid()}.tmp")]


class Terminated(KeyboardInterrupt):
    """The run got SIGTERM or SIGHUP: it stops as on Ctrl-C (the ``.partial`` named), exit code 128 + the signal."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while the run goes, so that it ends as an interrupt does."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    chosen = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    try:
        previous = {s: signal.signal(s, stop) for s in chosen}
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _score_rows(scorer: Any, rows: Iterator[dict[str, Any]], spec: Any, args: argparse.Namespace, out: Any,
                report_rows: Optional[list[dict[str, Any]]], progress: Optional[Progress],
                labeller: Any = None) -> tuple[Any, Any, Any]:
    """Score the rows chunk by chunk, streaming result rows out; the output is committed once all are written. A
    run that stops (an interrupt, SIGTERM, a full disk) says where its rows so far are, then raises."""
    from .results import Q2Stats, RowErrors
    from .rows import result_row, score_records

    stats, errors, signature, offset = Q2Stats(), RowErrors(), "", 0
    try:
        for chunk in _chunks(rows, args.chunk_size):
            if progress is not None:  # a slow batch names its row by its place in the input and its id
                progress.row_names = [f"row {offset + i}" + (f" (id {row['id']!r})" if "id" in row else "")
                                      for i, row in enumerate(chunk)]
            result = score_records(scorer, chunk, spec, progress=progress or False, labeller=labeller)
            for i, (row, res) in enumerate(zip(chunk, result.responses)):
                record = result_row(offset + i, row, res)
                if res.error is not None:
                    errors.add(res.error)
                if out is not None:
                    out.write(record)
                if report_rows is not None:
                    report_rows.append(_with_texts(record, row, spec))
            if out is not None:
                out.flush()
            stats, signature, offset = stats + result.stats, result.signature, offset + len(chunk)
        if out is not None:
            out.commit()
    except BaseException as e:
        _close(progress)
        partial = out.abandon() if out is not None else None
        kept = f"; its {out.rows} rows so far are in {partial}, {args.output} is left as it was" if partial else ""
        print(f"q2 score: the run stopped after {offset} rows{kept} ({type(e).__name__})", file=sys.stderr)
        raise
    return stats, errors, signature


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_progress(args: argparse.Namespace) -> Optional[Progress]:
    """The run's progress bars (None with ``--no-progress``): the rows against the input's record count (unknown
    when the input is not a regular file), and, on a terminal, one bar per stage across all chunks."""
    if args.no_progress:
        return None
    from .io import count_records
    from .progress import Progress

    terminal = getattr(sys.stderr, "isatty", lambda: False)()
    return Progress(total=count_records(args.input, args.input_format), stage_bars=terminal)


def _close(progress: Optional[Progress]) -> None:
    if progress is not None:
        progress.close()


def _taxonomy_model(path: str) -> Any:
    from . import backends
    from .backends.loading import quiet_loading

    with quiet_loading():
        return backends.load("taxonomy", model=path)


def _score_with_ray(args: argparse.Namespace) -> int:
    """``--engine ray``: the flags mapped onto :class:`~q2_plugins.ray_data.RayScoreOptions`."""
    if args.html:
        raise ValueError("--html needs the local engine; write the report from the Ray output with q2 report "
                         "--texts INPUT")
    if args.keep_min_score is not None and not args.output:
        raise ValueError("--keep-min-score needs --output (the kept rows)")
    if args.output == "-":
        raise ValueError("--output - (standard output) needs the local engine; name a file or directory")
    try:
        from .ray_data import RayScoreOptions, run_score
    except ModuleNotFoundError as e:
        raise SystemExit(f"q2 score: error: {e}") from None
    options = RayScoreOptions(
        input=args.input, output=args.output, input_format=args.input_format, rows=_row_spec(args),
        concurrency=args.concurrency, num_cpus_per_worker=args.num_cpus_per_worker,
        num_gpus_per_worker=args.num_gpus_per_worker, batch_size=args.ray_batch_size, ray_address=args.ray_address,
        keep_min_score=args.keep_min_score, keep_unscored=args.unscored == "keep", dropped_output=args.dropped_output,
        fail_on_error=args.fail_on_error, summary_format=args.format, progress=not args.no_progress)
    return run_score(config_from_args(args), options)


def _loaded(scorer: Any, progress: bool) -> Any:
    """``scorer.load()`` with one "loading models" line on standard error (none without progress) in place of the
    model libraries' own per-file loading bars."""
    if progress:
        print("q2: loading models", file=sys.stderr, flush=True)
    return scorer.load(quiet=True)


def _taxonomy_model_id(path: str) -> str:
    """The identity (content hash) of the five-way model that labelled the rows (``--taxonomy-model``)."""
    from . import backends

    return backends.identity("taxonomy", model=path)


def _with_texts(record: dict[str, Any], row: dict[str, Any], spec: Any) -> dict[str, Any]:
    """A result row plus the texts it scored, for the HTML report."""
    from .report import HUMAN_LABEL

    texts = {"response": row.get(spec.response_column), "knowledge": row.get(spec.knowledge_column),
             HUMAN_LABEL: row.get(HUMAN_LABEL)}
    if spec.history_column:
        texts["history"] = row.get(spec.history_column)
    return {**record, **{k: v for k, v in texts.items() if isinstance(v, str)}}


def _write_report(path: str, rows: list[dict[str, Any]], signature: str, summary: dict[str, Any],
                  sources: list[str]) -> None:
    from .report import write_html

    write_html(path, rows, signatures=[signature], summary=summary,
               title="Q² report: " + ", ".join(Path(s).name for s in sources), sources=sources, version=__version__)
    print(f"HTML report: {path}", file=sys.stderr)


def _replay(args: argparse.Namespace) -> int:
    import csv

    from .io import check_outputs
    from .replay import load_original_steps, replay

    if args.scores and len(args.scores) != len(args.steps):
        raise SystemExit("q2 replay: give one --scores file per --steps file, in the same order")
    check_outputs([*args.steps, *args.scores], [(f"--{flag} {path}", _html_files(path)) for flag, path in
                                                (("output", args.output), ("html", args.html)) if path])
    records = []
    sources: list[str] = []
    for i, steps in enumerate(args.steps):
        fallback = None
        if args.scores:
            with open(args.scores[i], newline="", encoding="utf-8") as f:
                fallback = {row["id"]: float(row["Q2_no_nli"]) for row in csv.DictReader(f)}
        loaded = load_original_steps(steps, fallback)
        records.extend(loaded)
        sources.extend([Path(steps).name.removesuffix("_out.steps.csv")] * len(loaded))
    result = replay(records, normalization=args.normalization, explain=args.explain or bool(args.html),
                    discard_unanswerable=args.discard_unanswerable)
    rows = [_replay_row(rec, res, src, result.signature) for rec, res, src in zip(records, result.responses, sources)]
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    # the recorded steps carry no NLI labels: the replayed mean is Q2 w/o NLI, never to be printed as Q2
    summary = {**result.stats.summary(), **_NO_Q2, "note": _REPLAY_NOTE}
    print_summary(summary, result.signature, args.format)
    if args.format == "text":
        print(f"note          {_REPLAY_NOTE}")
    if args.html:
        _write_report(args.html, rows, result.signature, summary, list(args.steps))
    return 0


def _replay_row(rec: Any, res: Any, source: str, signature: Any) -> dict[str, Any]:
    """One replay output row: the response's id, source file and texts, its result and the signature. The original
    run's files are named by gold label (``<system>_consistent`` / ``<system>_inconsistent``); such a name sets
    ``gold``."""
    from .results import explained_row

    gold = next((g for g in ("inconsistent", "consistent") if source.endswith("_" + g)), None)
    return explained_row(res, ids={"id": rec.id, "source": source, **({"gold": gold} if gold else {})},
                         texts={"response": rec.response, "knowledge": rec.knowledge}, signature=signature)


def _report(args: argparse.Namespace) -> int:
    from .io import check_outputs, meta_path
    from .report import report_from_files

    read = [*args.inputs, *map(meta_path, args.inputs), *([args.texts] if args.texts else [])]
    check_outputs(read, [(f"--output {args.output}", _html_files(args.output))])
    data = report_from_files(args.inputs, args.output, title=args.title, texts=args.texts,
                             columns=(args.response_column, args.knowledge_column, args.history_column))
    errors = sum(r["status"] == "error" for r in data.rows)
    print(f"{args.output}: {len(data.rows)} responses ({errors} errors) from {len(data.sources)} file(s)")
    return 0


# a replay has no Q2 with NLI, hence no interval of it (its interval is q2 compare's, on Q2 w/o NLI)
_NO_Q2 = {m.key: None for m in (M.Q2, M.Q2_STDERR, M.Q2_CI_LOW, M.Q2_CI_HIGH)}
_REPLAY_NOTE = ("Q2 n/a: the recorded steps carry no NLI labels, so the replay gives only Q2 w/o NLI (token F1; "
                "responses without questions take their recorded fallback value)")


def _prefetch(args: argparse.Namespace) -> int:
    from .prefetch import prefetch_model
    from .signature import model_id
    from .transformers_models import load_model

    config = config_from_args(args)
    out = Path(args.output_dir)
    for role, kind in MODEL_KINDS.items():
        name = getattr(config, f"{role}_model")
        target = prefetch_model(role, name, getattr(config, f"{role}_revision"), out / role)
        load_model(role, str(target), None, "cpu", "float32", kind, cpu_kernels="torch")  # it loads: fail here
        print(f"{role}: {name} -> {target}  (signs as {model_id(str(target))})")
    from .coref import load_fcoref

    target = prefetch_model("coref", config.coref_model, config.coref_revision, out / "coref")
    load_fcoref(str(target))  # it loads: fail here
    print(f"coref: {config.coref_model} -> {target}  (signs as {model_id(str(target))})")
    print(f"On the offline machine: --qg-model {out / 'qg'} --qa-model {out / 'qa'} --nli-model {out / 'nli'}"
          f" (with --coref: --coref-model {out / 'coref'})")
    return 0


def _make_test_models(args: argparse.Namespace) -> int:
    from .testing import build_all, build_examples

    paths = build_examples(args.examples) if args.examples else build_all(args.output_dir)
    for role, path in paths.items():
        print(f"{role}: {path}" + ("" if role.startswith("metrics/") else "  (random weights)"))
    return 0


def _meta_eval(args: argparse.Namespace) -> int:
    from .metaeval.cli import run

    return run(args)


def _perturb(args: argparse.Namespace) -> int:
    from .perturb import run

    return run(args)


def _compare(args: argparse.Namespace) -> int:
    from .compare import options_from_args, run

    return run(options_from_args(args))


def _train(args: argparse.Namespace) -> int:
    from .train import options_from_args, run

    try:
        return run(options_from_args(args), args.format)
    except ModuleNotFoundError as e:
        raise SystemExit(f"q2 train: error: {e}") from None


def _hooks(args: argparse.Namespace) -> int:
    from .hooks import run

    return run(args)


def _flag_names(command: str) -> dict[str, str]:
    """Setting -> flag for the settings of ``command`` whose flag is not the setting's name with dashes."""
    if command == "meta-eval":
        from .metaeval.cli import FLAGS

        return FLAGS
    return {"score": {"batch_size": "--ray-batch-size"}, "perturb": {"inputs": "--input"}}.get(command, {})


def flag_of(command: str) -> Callable[[str], str]:
    """How ``q2 command`` writes a library setting in its errors: its flag (``qg_model`` -> ``--qg-model``)."""
    flags = _flag_names(command)
    return lambda setting: flags.get(setting, "--" + setting.replace("_", "-"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .errors import ModelLoadError, NamesSetting
    from .io import InputFormatError

    try:
        return {"score": _score, "replay": _replay, "report": _report, "prefetch": _prefetch,
                "make-test-models": _make_test_models, "meta-eval": _meta_eval,
                "perturb": _perturb, "train": _train, "hooks": _hooks, "compare": _compare}[args.command](args)
    except NamesSetting as e:  # a library error names its setting; the command line names the flag
        print(f"q2 {args.command}: error: {e.named(flag_of(args.command))}", file=sys.stderr)
        return 2
    except OSError as e:  # "[Errno 2] No such file or directory: 'x'" -> "x: no such file or directory"
        what = f"{e.filename}: {e.strerror[0].lower()}{e.strerror[1:]}" if e.filename and e.strerror else e
        print(f"q2 {args.command}: error: {what}", file=sys.stderr)
        return 2
    except (InputFormatError, ModelLoadError, ValueError) as e:
        print(f"q2 {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Terminated as e:
        print(f"q2 {args.command}: terminated ({e})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print(f"q2 {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
