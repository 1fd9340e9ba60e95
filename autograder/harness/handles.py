"""What the judge holds of a submission's code (:mod:`autograder.harness.remote`): its modules, functions and
classes by name, and the modules it built (:class:`Handle`), each call a request to the worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from autograder.harness.codec import HandleRef
from autograder.harness.messages import Call, Grad, Method
from autograder.harness.student_error import StudentError
from autograder.results import FailureKind
from autograder.text import printable

if TYPE_CHECKING:
    from autograder.harness.remote import RemoteCode


class RemoteModule:
    def __init__(self, student: RemoteCode, module: str):
        self._student, self._module = student, module

    def __getattr__(self, name: str) -> RemoteFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemoteFunction(self._student, f"{self._module}.{name}")


class RemoteFunction:
    """A function or class of the submission, called through the worker."""

    def __init__(self, student: RemoteCode, target: str):
        self._student, self.target = student, target

    def __call__(self, *args, **kwargs):
        return self._student.request(Call(target=self.target, args=list(args), kwargs=kwargs))

    def with_args(self, *args, **kwargs) -> tuple:
        """Call and return ``(result, args)``, the arguments as the call left them."""
        answer = self._shaped(self._student.request(Call(target=self.target, args=list(args), kwargs=kwargs,
                                                         echo_args=True)), result=object, args=list)
        return answer["result"], answer["args"]

    def counting(self, names: tuple[str, ...], *args, **kwargs) -> tuple:
        """Call and return ``(result, {name: calls})``: how often the call used each library function."""
        answer = self._shaped(self._student.request(Call(target=self.target, args=list(args), kwargs=kwargs,
                                                         count=list(names))), result=object, counts=dict)
        return answer["result"], self._shaped(answer["counts"], **dict.fromkeys(names, int))

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Call, backpropagate ``upstream`` (default: ones) and return
        ``{"output", "inputs": [grad per argument]}``."""
        return self._shaped(self._student.request(Grad(target=self.target, args=list(args), kwargs=kwargs,
                                                       upstream=upstream)), output=object, inputs=list)

    def _shaped(self, answer, **fields: type) -> dict:
        """``answer`` if it is a dict with ``fields`` of these types: the worker runs student code, so a
        malformed answer is the submission's failure (``bad_value``), never a check that broke."""
        if not (isinstance(answer, dict) and all(k in answer and isinstance(answer[k], t) for k, t in fields.items())):
            raise StudentError(FailureKind.BAD_VALUE, f"{self.target}: malformed answer from the worker", where=self.target)
        return answer


@dataclass(frozen=True)
class SublayerCall:
    """One call of a watched submodule during a layer's forward (:meth:`Handle.with_sublayer_calls`):
    its arguments as it got them and its answer as it gave it (tensors, plain scalars, None for
    anything else)."""

    submodule: str  # the layer's name for it ("self_attn")
    args: tuple
    kwargs: dict
    output: object

    def argument(self, index: int, name: str):
        """The argument at position ``index``, or passed as ``name``; None when not given."""
        return self.args[index] if index < len(self.args) else self.kwargs.get(name)

    @staticmethod
    def well_formed(said) -> bool:
        """A record as the worker writes it (student code shares its process: anything else is a forgery),
        its tensors no larger than a layer's answers (a tensor of 0 bytes may claim any shape)."""
        def value(v) -> bool:
            if isinstance(v, torch.Tensor):
                return v.dim() <= 8 and all(size <= 2**16 for size in v.shape) and v.numel() <= 2**24
            return v is None or isinstance(v, (bool, int, float))

        return (isinstance(said, dict) and isinstance(said.get("submodule"), str) and isinstance(said.get("args"), list)
                and isinstance(said.get("kwargs"), dict) and "output" in said
                and all(value(v) for v in [*said["args"], *said["kwargs"].values(), said["output"]]))


class Handle:
    """An ``nn.Module`` the submission built; it lives in the worker.

    ``origin`` is what the judge called to get it ("module.Layer"; "module.Layer.child" for a
    submodule): its calls are charged to that module's budget and named by it. ``type_name`` is
    the class the worker says it is: a claim, for checks of form only."""

    def __init__(self, student: RemoteCode, ref: HandleRef, origin: str):
        self._student, self._ref, self.origin = student, ref, origin
        self.type_name = ref.type_name

    def _method(self, name: str, *args, **kwargs):
        return self._student.request(Method(handle=self._ref.id, name=name, args=list(args), kwargs=kwargs,
                                            target=f"{self.origin}.{name}"))

    def submodule(self, name: str) -> Handle:
        """The submodule ``name`` ("body", "layers.0") of this module, as a handle of its own."""
        ref = self._student.request(Method(handle=self._ref.id, name="submodule", args=[name],
                                           target=f"{self.origin}.submodule"), wrap=False)
        if not isinstance(ref, HandleRef):
            raise StudentError(FailureKind.BAD_VALUE, f"{self.origin}.{name} is not a module", where=f"{self.origin}.{name}")
        return Handle(self._student, ref, f"{self.origin}.{name}")

    def __call__(self, *args, **kwargs):
        return self._method("forward", *args, **kwargs)

    def using(self, student: RemoteCode) -> Handle:
        """This module, its calls made through ``student`` (a seeded or streaming view of the same
        submission)."""
        return Handle(student, self._ref, self.origin)

    def train(self, mode: bool = True) -> Handle:
        self._method("train", mode)
        return self

    def eval(self) -> Handle:
        return self.train(False)

    def state_dict(self) -> dict:
        return self._method("state_dict")

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        self._method("load_state_dict", state, strict=strict)

    def structure(self) -> dict:
        return self._method("structure")

    def standing_in(self, parts: dict[str, str], **arguments) -> Handle:
        """This layer, its submodules ``parts`` (``{"block.norm": "norm"}``: which lab part each one's
        module is) answered by the lab's stand-in for that part whenever their own call raises or
        answers with the wrong shape or dtype (see :attr:`RemoteCode.stood_in`); ``arguments`` go to
        every stand-in (``num_heads``). Without stand-ins declared, the layer as it is."""
        code = self._student._shared.stand_ins
        if code is not None:
            wired = {name: [part, code.functions[part]] for name, part in parts.items() if part in code.functions}
            self._method("stand_in", wired, code.source, arguments)
        return self

    def with_sublayer_calls(self, *args, **kwargs) -> tuple:
        """Forward, and the calls it made, in order, of the submodules a stand-in watches
        (:meth:`standing_in`): ``(output, [SublayerCall])``, what each sub-layer got and gave, so a
        check can judge a layer's wires one by one."""
        if self._student._shared.stand_ins is None:
            raise RuntimeError("a layer's sub-layer calls are watched by its stand-ins: declare `stand_in` for the "
                               "parts it uses in lab.toml")
        where = f"{self.origin}.forward"
        answer = self._student.request(Method(handle=self._ref.id, name="forward", args=list(args), kwargs=kwargs,
                                              target=where, sublayer_calls=True))
        calls = answer.get("sublayer_calls") if isinstance(answer, dict) else None
        if not (isinstance(calls, list) and all(SublayerCall.well_formed(c) for c in calls)):
            raise StudentError(FailureKind.BAD_VALUE, f"{where}: malformed answer from the worker", where=where)
        return answer["result"], [SublayerCall(printable(c["submodule"])[:100], tuple(c["args"]), c["kwargs"],
                                               c["output"]) for c in calls]

    def grad(self, *args, upstream=None, computed: tuple[int, ...] = (), **kwargs) -> dict:
        """Forward, backpropagate ``upstream`` and return ``{"output", "inputs", "parameters": {name:
        grad}}``; the arguments at the indices ``computed`` reach the call as values a layer computed
        (non-leaf tensors), the others as the caller's own leaves."""
        return self._student.request(Grad(handle=self._ref.id, args=list(args), kwargs=kwargs, upstream=upstream,
                                          target=f"{self.origin}.forward", computed=list(computed)))
