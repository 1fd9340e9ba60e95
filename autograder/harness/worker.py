"""The worker: the only process that imports and runs a submission's modules.

Forked by :mod:`autograder.harness.zygote` (with torch already imported) for
:class:`autograder.harness.remote.RemoteCode`: confined in a sandbox for student code, unconfined for
the trusted reference solution. It reads requests and
writes answers on one socket in the format of :mod:`autograder.harness.codec`; a student's ``print``
goes to a log, never into the answer channel. Every request starts from the same RNG state, so a result does
not depend on which calls came before it.

The requests and answers are declared in :mod:`autograder.harness.messages`; each kind of request is served by
the method :data:`SERVE` names for it. An error answer says what went wrong in ``kind`` (one a worker may
name, :data:`autograder.kinds.KINDS`).
"""

from __future__ import annotations

import importlib
import os
import random
import signal
import socket
import sys
import traceback

import torch

from autograder.harness.codec import CodecError, GeneratorSpec, HandleRef, Unread, encode, read_frame, recv_exact
from autograder.harness.guards import Forbidden, Guards, ImportRefused, SubmissionImports
from autograder.harness.messages import (CONTINUE_STREAM, Answered, Build, Call, Configure, Grad, Hello,
                                         MessageError, Method, Request, WorkerError)
from autograder.harness.stand_ins import StandIns
from autograder.harness.tracebacks import describe_exception, failing_line, innermost_student_code, student_frames
from autograder.kinds import FailureKind
from autograder.limits import Limits

DEFAULT_SEED = 0


class RequestError(Exception):
    """A request the worker cannot serve (missing module or name, a module that does not import,
    bad handle, bad value); ``fields`` go into the error answer as they are."""

    def __init__(self, kind: FailureKind, message: str, where: str = "", **fields):
        super().__init__(message)
        self.kind, self.where, self.fields = kind, where, fields



class CallTimeout(BaseException):
    """Raised in student code when its call runs out of time. A BaseException, so that the
    student's ``except Exception`` lets it through."""


def time_is_up(signum, frame):
    raise CallTimeout


class Worker:
    def __init__(self, root: str, imports: SubmissionImports):
        self.root = os.path.realpath(root)
        self.imports = imports
        self.handles: dict[int, torch.nn.Module] = {}
        self.broken_imports: dict[str, RequestError] = {}
        self.timeout = 0.0  # seconds a call may run before it is interrupted; 0: never
        # What the judge reads of one message (its Configure says the run's): an answer over it is refused here.
        declared = Limits()
        self.frame_bytes, self.header_bytes = declared.frame_bytes, declared.header_bytes
        self.guards = Guards()
        self.stand_ins = StandIns(self.root)

    # -- resolving student names -------------------------------------------------------
    def module(self, name: str):
        if name in self.broken_imports:
            raise self.broken_imports[name]
        if not os.path.isfile(os.path.join(self.root, name + ".py")):
            raise RequestError(FailureKind.MISSING, f"{name}.py is missing from the submission", name, file=f"{name}.py")
        try:
            return importlib.import_module(name)
        except (CallTimeout, ImportRefused):
            raise  # a loop at import is answered as a time-out (never asked again), a refused import as such
        except BaseException as exc:  # noqa: BLE001 - any failure at import is the student's
            file, line = failing_line(exc, self.root)
            place = f" (at {file} line {line})" if line else ""
            self.broken_imports[name] = RequestError(
                FailureKind.IMPORT, f"{name}.py could not be imported: {describe_exception(exc, bool(line))}{place}", name,
                file=file or f"{name}.py", line=line, type=type(exc).__name__, phase="import")
            raise self.broken_imports[name] from None

    def resolve(self, target: str):
        module_name, _, attr = str(target).partition(".")
        module = self.module(module_name)
        if not attr or not hasattr(module, attr):
            raise RequestError(FailureKind.MISSING, f"{module_name}.py defines no `{attr}`", target)
        return getattr(module, attr)

    def handle(self, handle_id) -> torch.nn.Module:
        try:
            return self.handles[int(handle_id)]
        except (KeyError, TypeError, ValueError):
            raise RequestError(FailureKind.BAD_REQUEST, f"no object with handle {handle_id!r} (was the worker restarted?)") from None

    # -- values ---------------------------------------------------------------------------
    def materialise(self, value):
        """Turn wire placeholders into live objects for the student's code."""
        if isinstance(value, GeneratorSpec):
            return torch.Generator().manual_seed(value.seed)
        if isinstance(value, HandleRef):
            return self.handle(value.id)
        if isinstance(value, list):
            return [self.materialise(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.materialise(v) for v in value)
        if isinstance(value, dict):
            return {k: self.materialise(v) for k, v in value.items()}
        return value

    def publish(self, value):
        """Turn a student's return value into something the codec may send."""
        if isinstance(value, torch.nn.Module):
            handle_id = len(self.handles) + 1
            self.handles[handle_id] = value
            return HandleRef(handle_id, qualified_name(type(value)))
        if isinstance(value, (list, tuple)):
            items = [self.publish(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {self.publish(k): self.publish(v) for k, v in value.items()}
        return value

    # -- operations ---------------------------------------------------------------------------
    def serve(self, request: Request):
        if request.fresh:
            self.handles.clear()
        if request.seed != CONTINUE_STREAM:
            seed = DEFAULT_SEED if request.seed is None else int(request.seed)
            # The CPU generator is the one torch.manual_seed reseeds here (no accelerator), at 1% of the cost.
            torch.default_generator.manual_seed(seed)
            random.seed(seed)  # Python's too, which the scan allows and a fork reseeds from the system's entropy
        self.guards.serving(request)
        self.imports.serving(request)
        self.stand_ins.calls = [] if request.sublayer_calls else None
        with self.guards.enforcing():
            return SERVE[type(request)](self, request)

    def configure(self, request: Configure) -> None:
        self.timeout = float(request.timeout or 0)
        self.frame_bytes = int(request.frame_bytes or self.frame_bytes)
        self.header_bytes = int(request.header_bytes or self.header_bytes)
        self.imports.imports = request.imports

    def call(self, request: Call):
        args, kwargs = self.materialise(list(request.args)), self.materialise(dict(request.kwargs))
        result = self.publish(self.resolve(request.target)(*args, **kwargs))
        # The arguments as the call left them: checks that inputs were not modified in place.
        if not request.echo_args:
            return result
        return {"result": result, "args": [a if isinstance(a, torch.Tensor) else None for a in args]}

    def build(self, request: Build):
        built = []
        for target, spec_args, spec_kwargs in request.specs:
            built.append(self.resolve(target)(*self.materialise(spec_args), **self.materialise(spec_kwargs)))
        return self.publish(built)

    def method(self, request: Method):
        args, kwargs = self.materialise(list(request.args)), self.materialise(dict(request.kwargs))
        module = self.handle(request.handle)
        if request.name not in METHODS:
            raise RequestError(FailureKind.BAD_REQUEST, f"method {request.name!r} is not available")
        return self.publish(METHODS[request.name](self, module, args, kwargs))

    def stand_in(self, module: torch.nn.Module, parts: dict, source: str, arguments: dict) -> None:
        self.stand_ins.install({name: (submodule(module, name), part, function)
                                for name, (part, function) in parts.items()}, source, arguments)

    def grad(self, request: Grad):
        args, kwargs = self.materialise(list(request.args)), self.materialise(dict(request.kwargs))
        inputs = [a.detach().clone().requires_grad_(True) if floating(a) else a for a in args]
        computed = set(request.computed)
        passed = [a.clone() if i in computed and floating(a) else a for i, a in enumerate(inputs)]
        if request.handle is not None:
            module = self.handle(request.handle)
            module.zero_grad(set_to_none=True)
            out = module(*passed, **kwargs)
            params = dict(module.named_parameters())
        else:
            out = self.resolve(request.target)(*passed, **kwargs)
            params = {}
        if not isinstance(out, torch.Tensor):
            raise RequestError(FailureKind.EXCEPTION, f"expected a tensor to backpropagate through, got {type(out).__name__}")
        upstream = request.upstream
        if not out.requires_grad:
            return {"output": out, "inputs": [None] * len(inputs), "parameters": {k: None for k in params}}
        backpropagate(out, upstream if upstream is not None else torch.ones_like(out))
        return {
            "output": out,
            "inputs": [a.grad if isinstance(a, torch.Tensor) else None for a in inputs],
            "parameters": {k: p.grad for k, p in params.items()},
        }


SERVE = {Configure: Worker.configure, Call: Worker.call, Build: Worker.build, Method: Worker.method,
         Grad: Worker.grad}


def load_state_dict(worker: Worker, module: torch.nn.Module, args: list, kwargs: dict) -> None:
    module.load_state_dict(*args, **kwargs)


def train(worker: Worker, module: torch.nn.Module, args: list, kwargs: dict) -> None:
    module.train(*args, **kwargs)


# A handle's methods a request may call, by name.
METHODS = {
    "forward": lambda worker, module, args, kwargs: module(*args, **kwargs),
    "train": train,
    "state_dict": lambda worker, module, args, kwargs: dict(module.state_dict()),
    "load_state_dict": load_state_dict,
    "structure": lambda worker, module, args, kwargs: structure(module),
    "submodule": lambda worker, module, args, kwargs: submodule(module, str(args[0]) if args else ""),
    "stand_in": lambda worker, module, args, kwargs: worker.stand_in(module, *args),
}


def submodule(module: torch.nn.Module, name: str) -> torch.nn.Module:
    try:
        return module.get_submodule(name)
    except AttributeError as exc:
        raise RequestError(FailureKind.MISSING, f"no submodule {name!r}: {exc}") from None



def backpropagate(out: torch.Tensor, upstream: torch.Tensor) -> None:
    """``out.backward(upstream)``: the same gradients, to the bit (the sum's gradient with respect to
    ``out`` is ``upstream`` exactly), with torch's error for an ``upstream`` of another shape. Not
    torch's own call: its shape check for a given ``upstream`` imports sympy, 0.4 s in every process
    that grades (zygote, judge, reference), where nothing else needs it. In a worker it runs inside the
    request's bans, as the student's backward does: a lab that banned ``mul`` or ``sum`` would have its
    gradient requests refused."""
    if upstream.shape != out.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {upstream.shape} and output[0] has "
                           f"a shape of {out.shape}.")
    (out * upstream).sum().backward()


def floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def structure(module: torch.nn.Module) -> dict:
    """What a module is made of, in creation order: the structural checks judge this."""
    return {
        "type": qualified_name(type(module)),
        "children": [[name, qualified_name(type(child))] for name, child in module.named_children()],
        "submodules": [[name, qualified_name(type(sub))] for name, sub in module.named_modules() if name],
        "parameters": [[name, list(p.shape), qualified_name(type(p))] for name, p in module.named_parameters(recurse=False)],
        "all_parameters": [[name, list(p.shape)] for name, p in module.named_parameters()],
        "buffers": [[name, str(b.dtype).removeprefix("torch."), list(b.shape)] for name, b in module.named_buffers(recurse=False)],
        "training": bool(module.training),
    }



def error_answer(exc: BaseException, request: Request | None, root: str, timeout: float) -> dict:
    where = str(getattr(request, "target", "") or getattr(request, "name", ""))
    answer = {"kind": FailureKind.EXCEPTION, "type": type(exc).__name__, "message": describe_exception(exc), "where": where,
              "trace": "", "file": "", "line": 0, "phase": ""}
    if isinstance(exc, RequestError):
        return {**answer, "type": "", "kind": exc.kind, "message": str(exc), "where": exc.where or where, **exc.fields}
    frames = student_frames(exc, root)
    if frames:  # a call that began at a module's top level happened while it was imported
        answer.update(file=frames[-1].filename, line=frames[-1].lineno or 0,
                      phase="import" if frames[0].name == "<module>" else "")
        if frames[0].filename != frames[-1].filename:  # the submission's own line that led into another file
            answer["called_from"] = f"{frames[0].filename} line {frames[0].lineno or 0}"
    if isinstance(exc, CallTimeout):
        if answer["phase"] == "import":
            loading = list(dict.fromkeys(f.filename for f in frames if f.name == "<module>"))
            message = (f"a loop at import time in {answer['file']} (line {answer['line']}): "
                       f"{' and '.join(loading)} never finished loading in {timeout:g} s")
            return {**answer, "kind": FailureKind.TIMEOUT, "type": "", "message": message, "loading": loading}
        running = f": it was still running {answer['file']} line {answer['line']}" if frames else ""
        return {**answer, "kind": FailureKind.TIMEOUT, "type": "", "message": f"{where} did not finish in {timeout:g} s{running}"}
    if isinstance(exc, Forbidden):
        return {**answer, "kind": FailureKind.FORBIDDEN, "type": "", "message": str(exc)}
    if isinstance(exc, NotImplementedError) and frames:
        # Name the stub that raised ("module.Layer"), not the call that led there.
        code = innermost_student_code(exc, root)
        stub = f"{os.path.splitext(os.path.basename(code.co_filename))[0]}.{code.co_qualname.removesuffix('.__init__')}"
        return {**answer, "kind": FailureKind.NOT_IMPLEMENTED, "message": f"not implemented yet: {stub}", "where": stub}
    answer["trace"] = "".join(traceback.format_list(frames[-5:]))[-3000:]
    return {**answer, "kind": FailureKind.MEMORY} if isinstance(exc, MemoryError) else answer


def run(root: str, sock: socket.socket, report=None) -> None:
    """Serve requests for the submission in ``root`` until the judge hangs up.

    ``report`` (a :class:`autograder.harness.sandbox.Report`) says how this process was confined (it was
    forked into a sandbox by the zygote); its first message to the judge repeats it, and where it says
    the sandbox refused (:attr:`Report.refused`) the worker ends there. Without one, the worker runs
    unconfined (the reference solution) and prints to stderr.
    """
    torch.set_num_threads(1)  # tiny tensors: a thread pool costs more than it saves, and lanes fill the cores
    if report is None:
        os.dup2(2, 1)  # a student's print goes to stderr, never into the answer channel
    sock.sendall(encode(Hello(None if report is None else {"enforced": report.enforced, "missing": report.missing,
                                                          "refused": report.refused}).to_wire()))
    if report is not None and report.refused:  # its files are not confined: no student code runs here
        return
    imports = SubmissionImports(os.path.realpath(root))
    sys.meta_path.append(imports)
    worker = Worker(root, imports)
    signal.signal(signal.SIGALRM, time_is_up)
    unread = Unread()
    while True:
        try:
            wire = read_frame(lambda n: recv_exact(sock, unread, n), worker.frame_bytes, worker.header_bytes)
        except (EOFError, OSError):
            return
        sock.sendall(answer(worker, wire))


def answer(worker: Worker, wire) -> bytes:
    """The encoded answer to a request as it came (``wire``): what serving it gave, or what went wrong."""
    request = None
    try:
        try:
            request = Request.from_wire(wire)
        except MessageError as exc:
            raise RequestError(FailureKind.BAD_REQUEST, str(exc)) from None
        signal.setitimer(signal.ITIMER_REAL, worker.timeout)
        try:
            value = worker.serve(request)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            counts, worker.guards.counted, worker.guards.forbidden = worker.guards.counted, {}, frozenset()
            stood_in, worker.stand_ins.events = worker.stand_ins.events, []
            calls, worker.stand_ins.calls = worker.stand_ins.calls, None
        frame = encode(Answered(value, counts if request.count else None, calls, stood_in).to_wire())
    except CodecError as exc:
        frame = bad_value(request, f"returned a value the grader cannot read: {exc}")
    except BaseException as exc:  # noqa: BLE001 - report everything the student's code raises
        frame = encode(WorkerError(**error_answer(exc, request, worker.root, worker.timeout)).to_wire())
    if len(frame) > worker.frame_bytes:  # the judge would refuse it: say why, in the student's terms
        frame = bad_value(request, f"returned {len(frame) / 2**20:.0f} MiB, more than the "
                                   f"{worker.frame_bytes // 2**20} MiB one call may return")
    return frame


def bad_value(request: Request | None, message: str) -> bytes:
    """The error answer for a result that cannot go back to the judge."""
    return encode(WorkerError(**{"kind": FailureKind.BAD_VALUE, "type": "", "message": message,
                                 "where": str(getattr(request, "target", "")), "trace": "", "file": "", "line": 0,
                                 "phase": ""}).to_wire())
