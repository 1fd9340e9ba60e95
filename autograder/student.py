"""The judge's side of the boundary: call a submission's code without importing it.

``Student(dir)`` starts a worker (:mod:`autograder.worker`) on first use and forwards calls
to it. Checks read naturally::

    student.softmax.softmax(scores, dim=0)                 # call a function
    sa = student.seeded(789).projections.SelfAttention_v2(3, 2)   # seeded construction
    sa(inputs); sa.state_dict(); sa.eval()                 # use the module it built
    v1, v2 = student.build_in_order(123, ("projections.SelfAttention_v1", 3, 2),
                                         ("projections.SelfAttention_v2", 3, 2))

Anything that goes wrong on the student's side (an exception, a stub, a missing module, a
time-out, a dead worker) arrives as :class:`StudentError` with a one-line message; the next
call after a time-out or a crash starts a fresh worker, so one bad function costs only the
checks that call it.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.codec import CodecError, HandleRef, encode, read_frame

KIT_ROOT = Path(__file__).resolve().parent.parent


class StudentError(Exception):
    """The student's code failed; ``kind`` says how (``not_implemented``, ``exception``,
    ``import``, ``missing``, ``timeout``, ``crashed``, ``bad_value``, ``bad_request``)."""

    def __init__(self, kind: str, message: str, type_name: str = "", where: str = "", trace: str = ""):
        super().__init__(message)
        self.kind, self.type_name, self.where, self.trace = kind, type_name, where, trace

    @property
    def message(self) -> str:
        return str(self)


class WorkerProcess:
    """One worker process and its two pipes."""

    def __init__(self, root: Path):
        self.log = tempfile.TemporaryFile()
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autograder.worker", str(root), str(req_r), str(resp_w)],
            cwd=KIT_ROOT,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            pass_fds=(req_r, resp_w),
        )
        os.close(req_r)
        os.close(resp_w)

    def exchange(self, request: dict, timeout: float):
        self._write_all(encode(request))
        deadline = time.monotonic() + timeout

        def read_exact(n: int) -> bytes:
            chunks, remaining = [], n
            while remaining:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.resp_r], [], [], left)[0]:
                    raise TimeoutError
                chunk = os.read(self.resp_r, min(remaining, 1 << 20))
                if not chunk:
                    raise EOFError
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks)

        return read_frame(read_exact)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.req_w, view):]

    def exit_code(self, wait: float = 1.0):
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            return None

    def output_tail(self, limit: int = 1500) -> str:
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - limit))
        return self.log.read().decode("utf-8", "replace").strip()

    def close(self) -> None:
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


class Student:
    """A submission folder seen through a worker process."""

    def __init__(self, root, timeout: float = 10.0, seed: int | None = None, _shared=None):
        self.root = Path(root).resolve()
        self.timeout = timeout
        self._seed = seed
        self._shared = _shared if _shared is not None else {"worker": None}

    # -- the calls checks make ------------------------------------------------------------
    def __getattr__(self, module: str) -> "ModuleProxy":
        if module.startswith("_"):
            raise AttributeError(module)
        return ModuleProxy(self, module)

    def seeded(self, seed: int) -> "Student":
        """The same submission, with every call made right after ``torch.manual_seed(seed)``."""
        return Student(self.root, self.timeout, seed, self._shared)

    def build_in_order(self, seed: int, *specs) -> list["Handle"]:
        """Construct ``(target, *args)`` specs one after another after a single ``manual_seed``."""
        wire = [[spec[0], list(spec[1:]), {}] for spec in specs]
        return self.request({"op": "build", "specs": wire, "seed": seed})

    def source(self, module: str) -> str | None:
        """The text of ``<module>.py`` (read here, never run here), or None when missing."""
        path = self.root / f"{module}.py"
        try:
            return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        except OSError:
            return None

    # -- transport ------------------------------------------------------------------------------
    def request(self, request: dict):
        request.setdefault("seed", self._seed)
        worker = self._shared["worker"]
        if worker is None:
            worker = self._shared["worker"] = WorkerProcess(self.root)
        where = request.get("target") or request.get("name") or request.get("op")
        try:
            answer = worker.exchange(request, self.timeout)
        except TimeoutError:
            self.close()
            raise StudentError("timeout", f"{where} timed out after {self.timeout:g} s") from None
        except (EOFError, OSError, CodecError) as exc:
            code = worker.exit_code()
            tail = worker.output_tail()
            self.close()
            how = f"exit code {code}" if code is not None else f"a broken answer ({exc})"
            detail = f"\n--- output before it stopped ---\n{tail}" if tail else ""
            raise StudentError("crashed", f"the process running your code stopped during {where} ({how}){detail}") from None
        if not isinstance(answer, dict) or ("ok" not in answer and "error" not in answer):
            raise StudentError("bad_value", f"{where}: malformed answer from the worker")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise StudentError(str(error.get("kind", "exception")), str(error.get("message", "failed")),
                               str(error.get("type", "")), str(error.get("where", where)), str(error.get("trace", "")))
        return self._wrap(answer["ok"])

    def _wrap(self, value):
        if isinstance(value, HandleRef):
            return Handle(self, value)
        if isinstance(value, list):
            return [self._wrap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value

    def close(self) -> None:
        worker, self._shared["worker"] = self._shared["worker"], None
        if worker is not None:
            worker.close()


class ModuleProxy:
    def __init__(self, student: Student, module: str):
        self._student, self._module = student, module

    def __getattr__(self, name: str) -> "Callable":
        if name.startswith("_"):
            raise AttributeError(name)
        return Callable(self._student, f"{self._module}.{name}")


class Callable:
    """A function or class of the submission, called through the worker."""

    def __init__(self, student: Student, target: str):
        self._student, self.target = student, target

    def __call__(self, *args, **kwargs):
        return self._student.request({"op": "call", "target": self.target, "args": list(args), "kwargs": kwargs})

    def with_args(self, *args, **kwargs) -> tuple:
        """Call and return ``(result, args)``, the arguments as the call left them."""
        answer = self._student.request({"op": "call", "target": self.target, "args": list(args),
                                        "kwargs": kwargs, "echo_args": True})
        return answer["result"], answer["args"]

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Call, backpropagate ``upstream`` (default: ones) and return
        ``{"output", "inputs": [grad per argument]}``."""
        return self._student.request({"op": "grad", "target": self.target, "args": list(args),
                                      "kwargs": kwargs, "upstream": upstream})


class Handle:
    """An ``nn.Module`` the submission built; it lives in the worker."""

    def __init__(self, student: Student, ref: HandleRef):
        self._student, self._ref = student, ref
        self.type_name = ref.type_name

    def _method(self, name: str, *args, **kwargs):
        return self._student.request({"op": "method", "handle": self._ref.id, "name": name,
                                      "args": list(args), "kwargs": kwargs, "target": f"{self.type_name}.{name}"})

    def __call__(self, *args, **kwargs):
        return self._method("forward", *args, **kwargs)

    def train(self, mode: bool = True) -> "Handle":
        self._method("train", mode)
        return self

    def eval(self) -> "Handle":
        return self.train(False)

    def state_dict(self) -> dict:
        return self._method("state_dict")

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        self._method("load_state_dict", state, strict=strict)

    def structure(self) -> dict:
        return self._method("structure")

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Forward, backpropagate ``upstream`` and return
        ``{"output", "inputs", "parameters": {name: grad}}``."""
        return self._student.request({"op": "grad", "handle": self._ref.id, "args": list(args), "kwargs": kwargs,
                                      "upstream": upstream, "target": f"{self.type_name}.forward"})
