"""spaCy work done in a separate process while the models work (for runs whose models are on a GPU, where spaCy's
CPU time would otherwise sit on the critical path).

- :class:`CandidatesAhead` wraps the scorer's candidate extractor: the next chunk's responses are parsed while the
  models score this one.
- :class:`PersonalAhead` wraps the personal-question filter: a round's questions are parsed while the question
  answerer reads the same questions (:func:`q2_plugins.metric.stages.select_questions`).

:meth:`~_Ahead.start` hands texts to a worker process (``python -m q2_plugins.metric.spacy_worker KIND PIPELINE``: its
own spaCy pipeline, JSON lines over its standard input and output); the wrapped method then serves the texts done and
does the others itself. A process, not a thread: a spaCy thread holds Python's lock often enough to slow a thread that
drives a GPU op by op (``benchmarks/bench_overlap.py`` measures both). The rule and the pipeline are the same, so the
outputs are identical either way (tested); a worker that cannot start or stops leaves all the work to the caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import weakref
from typing import Any, Optional, Sequence

from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy
from q2_plugins.metric.spans import mentions_from_json, mentions_to_json

__all__ = ["CandidatesAhead", "PersonalAhead", "off_cpu"]


def off_cpu(config: Any) -> bool:
    """Whether any model of ``config`` runs off the CPU (then the CPU stages are worth overlapping)."""
    import torch

    roles = ("qg", "qa", "nli") if config.uses_nli else ("qg", "qa")
    return any(torch.device(config.role_device(r)).type != "cpu" for r in roles)


class _Worker:
    """A worker process with the spaCy component ``kind`` (``candidates`` or ``personal``) of pipeline ``spacy_name``:
    one request at a time, sent by :meth:`send` (returns at once) and read back by :meth:`receive`."""

    def __init__(self, kind: str, spacy_name: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path))
        self.proc = subprocess.Popen([sys.executable, "-m", "q2_plugins.metric.spacy_worker", kind, spacy_name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._writer: Optional[threading.Thread] = None
        self._write_error: Optional[BaseException] = None
        self._finalizer = weakref.finalize(self, _stop, self.proc)

    def send(self, method: str, texts: list[str]) -> None:
        data = (json.dumps({"method": method, "texts": texts}) + "\n").encode("ascii")

        def write() -> None:  # in a thread: a request longer than the pipe's buffer waits for the worker to read it
            try:
                self.proc.stdin.write(data)  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except BaseException as e:  # noqa: BLE001 - read back by receive()
                self._write_error = e

        self._writer = threading.Thread(target=write, name="q2-ahead-writer", daemon=True)
        self._writer.start()

    def receive(self) -> list[Any]:
        if self._writer is not None:
            self._writer.join()
        if self._write_error is not None:
            raise RuntimeError(f"the spaCy worker took no request: {self._write_error}")
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the spaCy worker stopped (exit {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["out"]

    def close(self) -> None:
        self._finalizer()


def _stop(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - it is stopped either way
        proc.kill()


class _Ahead:
    """A spaCy component whose ``method`` can work ahead in a worker process (see the module docstring). ``keep``:
    how many earlier requests' outputs not asked for yet are kept when more texts are started (the next chunk's
    candidates are asked for after the chunk after it is started; a round's personal decisions that the run already
    knew are never asked for). Older ones are dropped, so a long run holds no outputs nobody asks for."""

    keep = 1
    kind = ""
    method = ""

    def __init__(self, inner: Any, spacy_name: str) -> None:
        self.inner = inner
        self._spacy_name = spacy_name
        self._worker: Optional[_Worker] = None
        self._broken = False
        self._pending: Optional[list[str]] = None
        self._done: dict[str, tuple[int, Any]] = {}  # text -> (its request's number, output)
        self._requests = 0

    def prepare(self) -> None:
        """Start the worker now, so its pipeline loads while other work goes on."""
        if self._worker is None and not self._broken:
            try:
                self._worker = _Worker(self.kind, self._spacy_name)
            except Exception:  # noqa: BLE001 - no worker: the caller does all the work
                self._broken = True

    def start(self, texts: Sequence[str]) -> None:
        """Hand ``texts`` to the worker (after taking back what it was doing); returns at once."""
        self.wait()
        self._requests += 1
        oldest = self._requests - self.keep
        self._done = {t: v for t, v in self._done.items() if v[0] >= oldest}
        todo = [t for t in dict.fromkeys(texts) if isinstance(t, str) and t not in self._done]
        self.prepare()
        if not todo or self._worker is None:
            return
        self._worker.send(self.method, todo)
        self._pending = todo

    def wait(self) -> None:
        """Take back the worker's outputs of the texts last started (none, if it failed: they are done here)."""
        if self._pending is None or self._worker is None:
            return
        todo, self._pending = self._pending, None
        try:
            self._done.update((t, (self._requests, out)) for t, out in zip(todo, self._worker.receive()))
        except Exception:  # noqa: BLE001 - the texts are done in the foreground instead (its error is named)
            self._broken = True
            self._worker.close()
            self._worker = None

    def _serve(self, texts: Sequence[str]) -> list[Any]:
        """The output of each text: done ahead where it was, done now otherwise."""
        self.wait()
        rest = [t for t in texts if t not in self._done]
        fresh = dict(zip(rest, getattr(self.inner, self.method)(rest))) if rest else {}
        out = [self._done[t][1] if t in self._done else fresh[t] for t in texts]
        for t in texts:
            self._done.pop(t, None)
        return out

    def close(self) -> None:
        """Stop the worker (it also stops when this object is collected, or at exit)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __getattr__(self, name: str) -> Any:  # unfit, signature, ... of the wrapped component
        return getattr(self.inner, name)


class CandidatesAhead(_Ahead):
    """A candidate extractor that can extract the next chunk's candidates ahead (see the module docstring)."""

    kind, method = "candidates", "extract"

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        # the worker's candidates come as JSON (with their offsets), those done here as they are
        return [mentions_from_json(c) or [] if isinstance(c, dict) else list(c) for c in self._serve(texts)]


class PersonalAhead(_Ahead):
    """A personal-question filter that can decide a round's questions while they are answered (see the module
    docstring)."""

    keep = 0
    kind, method = "personal", "is_personal"

    def is_personal(self, questions: Sequence[str]) -> list[bool]:
        return [bool(p) for p in self._serve(questions)]


def _serve_requests(kind: str, spacy_name: str) -> int:
    """The worker: load the pipeline, then answer each request line with a reply line until standard input ends."""

    try:
        nlp = load_spacy(spacy_name, shared=False)
    except Exception:  # noqa: BLE001 - the caller sees the worker stop and does the work itself
        return 1
    component = SpacyCandidateExtractor(nlp) if kind == "candidates" else SpacyPersonalFilter(nlp)
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            out = getattr(component, request["method"])(request["texts"])
            if kind == "candidates":  # (their offsets too: JSON writes a Mention as its text alone)
                out = [mentions_to_json(c) for c in out]
            reply = {"out": out}
        except Exception as e:  # noqa: BLE001 - one request's failure is the caller's to redo
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.buffer.write((json.dumps(reply) + "\n").encode("ascii"))
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve_requests(sys.argv[1], sys.argv[2]))
