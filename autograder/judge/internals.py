"""A judge-side scan of a submission's source for code that reaches into the interpreter's,
PyTorch's or the grader's internals.

A part that forbids a library function (``torch.sort``, ``F.group_norm``) or counts calls
(``torch.dot``) is enforced inside the worker that runs the student's code, by wrappers and a
dispatch mode (:mod:`autograder.harness.guards`). Code in that process can reach them: leave the
dispatch mode, empty the guards through ``gc``, call the original behind ``__wrapped__``. Nothing
in the worker can be trusted to notice, so this scan runs in the judge, on the bytes the worker
will import, and never runs them. Each finding is a :class:`Reach`: file, line, and what the code
does in words a student understands.

The rules are data (:mod:`autograder.judge.reach_rules`), allowlists wherever Python allows one:

- imports: the modules of :data:`LIBRARIES` and the lab's own modules, nothing else;
- the attributes of those modules: what each :class:`Library` allows (for torch: its public API
  but for :data:`TORCH_INTERNALS`, and only the submodules listed), whatever name the module
  goes by (``import torch as t``, ``x = torch``, a sibling module's ``helper``), and a module is
  only ever the base of an attribute, never a value passed around;
- names that start with ``_``: the submission's own (``_EPS``, ``_split``, ``self._cache``,
  ``other_module._helper``); of the others only ``__init__``, ``__name__``, ``__qualname__`` and
  ``__doc__`` are read, and a class defines only the dunder methods of :data:`CLASS_DUNDERS`;
- built-ins: :data:`ALLOWED_BUILTINS`; ``getattr`` and its kin only called, with a name the
  source spells out (a string literal, or a loop over a tuple of them), or on ``self`` with a
  name that starts with a public literal (``f"W_{kind}"``); ``type`` only as ``type(x)``, and an
  object's class only named, compared or tested (a class's class makes classes with any dunder);
- no dunder name in a string or as a keyword (a class's namespace, ``dict(__del__=...)``), and
  ``sys.stdout``/``sys.stderr`` only written to.

One rule is a denylist, because any object may carry the attributes: frames, code, raw memory
and files, compilers and tensors of another class (:data:`INTERPRETER_ATTRIBUTES`). The tables are
checked against the installed torch and standard library, and under each Python the README names,
by ``tests/test_internals.py``, which also lists what this scan does not see (``NOT_CAUGHT``):
static analysis of Python is not airtight.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autograder.judge.reach_names import (BUILTIN_NAMES, is_dunder, PERHAPS, Names,
                                          Module, bound_names, is_docstring, public_prefix, stringy)
from autograder.judge.reach_rules import (ALLOWED_BUILTINS, CLASS_DUNDERS, INTERPRETER_ATTRIBUTES, MODULE_DUNDERS,
                                          NAMED_LOOKUPS, READABLE_DUNDER_ATTRIBUTES, READABLE_DUNDER_NAMES, Rules,
                                          CLASS_READERS, rules_for)


@dataclass(frozen=True, order=True)
class Reach:
    """One place where a submission reaches into internals: ``what`` is a short phrase
    ("imports gc", "reads a private attribute `_C`")."""

    file: str
    line: int
    what: str




def scan(source: str | bytes, filename: str, own_modules: frozenset[str], allowed: frozenset[str] = frozenset()
         ) -> list[Reach]:
    """Every place where ``source`` (one module of a submission, named ``filename`` in the
    findings) reaches into interpreter, PyTorch or grader internals, by line. ``own_modules``
    are the lab's module names (``"blocks"``): they may be imported, and their private names
    used. Names imported from them are treated as possibly being modules (use
    :func:`scan_submission` to have them resolved). A module that does not parse gives no
    findings: its import fails, and that is reported elsewhere."""
    return _scan(source, filename, frozenset(own_modules), None, rules_for(frozenset(allowed)))


def scan_submission(folder: Path, modules: Iterable[str], allowed: frozenset[str] = frozenset()) -> list[Reach]:
    """:func:`scan` over the lab's module files (``modules``: ``"blocks.py"``, ...) present in
    ``folder``, each read as bytes and decoded as the import system will (a ``# coding:`` line is
    honoured: read as UTF-8, a UTF-7 file would hide what Python runs). A name one module imports
    from another is resolved to what it is there, so a module cannot be handed over under an
    innocent name. Files that cannot be read are skipped."""
    sources = {}
    for name in modules:
        try:
            sources[Path(name).stem] = (name, (Path(folder) / name).read_bytes())
        except OSError:
            continue
    own, rules = frozenset(Path(name).stem for name in modules), rules_for(frozenset(allowed))
    trees = {stem: tree for stem, (_, data) in sources.items() if isinstance(tree := _parse(data), ast.Module)}
    # What each module exports as a module, to a fixpoint (a module may pass on what it imported).
    exports: dict[str, dict[str, frozenset[Module]]] = {stem: {} for stem in own}
    for _ in range(len(trees) + 1):
        found = {stem: _Facts(tree, own, exports, rules).exported() for stem, tree in trees.items()}
        if all(found[stem] == exports[stem] for stem in trees):
            break
        exports.update(found)
    reaches = []
    for name, data in sources.values():
        reaches += _scan(data, name, own, exports, rules)
    return reaches


def submission_loads(folder: Path, modules: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each of the lab's modules (``"blocks.py"``, ...), the lab's modules that importing it
    loads, itself included (``{"model": {"model", "blocks"}}``): what one of them reaching into
    internals can touch. Static, as the scan allows no other way to import. A module that does not
    parse loads only itself (it fails to import)."""
    own = {Path(name).stem for name in modules}
    direct = {}
    for stem in own:
        try:
            tree = _parse((Path(folder) / f"{stem}.py").read_bytes())
        except OSError:
            tree = None
        names = set()
        for node in ast.walk(tree) if isinstance(tree, ast.Module) else ():
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        direct[stem] = names & own
    loads = {}
    for stem in own:
        seen, todo = {stem}, [stem]
        while todo:
            for imported in direct[todo.pop()] - seen:
                seen.add(imported)
                todo.append(imported)
        loads[stem] = frozenset(seen)
    return loads


def _parse(data: bytes) -> ast.Module | Reach | None:
    """The module's tree as Python would compile it; None if it does not compile; a Reach if it
    compiles but is too deep for the scan (so it cannot slip through unread)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are the student's business
            tree = ast.parse(data)
        tree.body = [kept for node in tree.body for kept in _run_on_import(node)]
        return tree
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return Reach("", 1, "is nested too deeply to be checked")


def _run_on_import(node: ast.stmt) -> list[ast.stmt]:
    """``node``, or of an ``if __name__ == "__main__":`` block only its ``else`` (the block is a
    student's self-test: it never runs when the grader imports the module, and rebinding
    ``__name__`` is flagged)."""
    test = node.test if isinstance(node, ast.If) else None
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and {_name_or_text(test.left), _name_or_text(test.comparators[0])} == {"__name__", "'__main__'"}):
        return node.orelse
    return [node]


def _name_or_text(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    return repr(expr.value) if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _scan(source: str | bytes, filename: str, own: frozenset[str],
          exports: Mapping[str, Mapping[str, frozenset[Module]]] | None, rules: Rules) -> list[Reach]:
    tree = _parse(source.encode("utf-8") if isinstance(source, str) else source)
    if tree is None:
        return []
    if isinstance(tree, Reach):
        return [Reach(filename, tree.line, tree.what)]
    return sorted({Reach(filename, line, what) for line, what in _Facts(tree, own, exports, rules).reaches()})


class _Facts(Names):
    """One module's tree, what its names are bound to (:class:`Names`), and the rules applied to it."""

    # -- the rules --------------------------------------------------------------------------------
    def reaches(self) -> set[tuple[int, str]]:
        for node, parent, scope in self.nodes:
            line = getattr(node, "lineno", None) or getattr(parent, "lineno", 1)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and isinstance(scope, ast.ClassDef):
                self._found(line, "imports inside a class body (a module as the class's attribute)")
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node.value, node.attr, not isinstance(node.ctx, ast.Load), line)
                if isinstance(node.ctx, ast.Load):
                    self._module_as_value(node, parent, scope, line)
                    self._stream(node, parent, line)
                    if node.attr == "__class__":
                        self._class_kept(node, parent, line)
            elif isinstance(node, ast.Name):
                self._name(node, parent, scope, line)
            elif isinstance(node, ast.Call):
                self._call(node, scope, line)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and is_dunder(node.value):
                if node.value != "__main__" and not is_docstring(parent):
                    self._found(line, f"spells a dunder name in a string ({node.value!r})")
            elif isinstance(node, ast.keyword) and node.arg and is_dunder(node.arg):
                self._found(line, f"passes `{node.arg}` as a keyword")
            elif isinstance(node, ast.MatchClass):
                for attribute in node.kwd_attrs:  # case C(attr=...) reads attr
                    self._attribute(None, attribute, False, line)
            for name in bound_names(node):
                if is_dunder(name) and not self._may_bind_dunder(name, scope):
                    self._found(line, f"defines `{name}`" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                                else f"sets `{name}`")
        return self.found

    def _found(self, line: int, what: str) -> None:
        self.found.add((line, what))

    def _may_bind_dunder(self, name: str, scope: ast.AST) -> bool:
        if isinstance(scope, ast.ClassDef):
            return name in CLASS_DUNDERS
        return scope is self.tree and name in MODULE_DUNDERS

    def _allowed_module(self, name: str) -> bool:
        return name in self.rules.libraries or name in self.own

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self._allowed_module(alias.name):
                self._found(node.lineno, f"imports {alias.name}")

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._found(node.lineno, "a relative import (from . import ...)")
            return
        module = node.module or ""
        if not self._allowed_module(module):
            self._found(node.lineno, f"imports {module}")
            return
        for alias in node.names:
            name = alias.name
            if name == "*":
                self._found(node.lineno, f"imports * from {module} (names the check cannot see)")
            elif is_dunder(name):
                self._found(node.lineno, f"imports `{name}` from {module}")
            elif module in self.rules.libraries and name.startswith("_"):
                self._found(node.lineno, f"imports a private name `{name}` from {module}")
            elif module in self.rules.libraries and not self.rules.libraries[module].allows(name):
                self._found(node.lineno, f"imports {name} from {module}")

    def _attribute(self, value: ast.AST | None, attribute: str, changes: bool, line: int) -> None:
        """The rules for ``value.attribute`` (read, or changed when ``changes``)."""
        targets = self._resolve(value)
        if attribute.startswith("_") and not self._private_allowed(value, attribute, changes, targets):
            if is_dunder(attribute):
                self._found(line, f"{'changes' if changes else 'reads'} `{attribute}`")
            else:
                self._found(line, f"{'changes' if changes else 'reads'} a private attribute `{attribute}`")
        if attribute in INTERPRETER_ATTRIBUTES:
            self._found(line, f"reads `{attribute}` ({INTERPRETER_ATTRIBUTES[attribute]})")
        for target in targets:
            if target is PERHAPS:
                if attribute in self.rules.perhaps_denied:
                    self._found(line, f"uses `{attribute}` of a name imported from a lab module (a module's internals)")
                continue
            library = self.rules.libraries.get(target.name)
            if library and not attribute.startswith("_") and not library.allows(attribute):
                self._found(line, f"uses {target.name}.{attribute}")
        if changes and (rooted := self._rooted(value)):
            self._found(line, f"changes {'.'.join((*rooted, attribute))}")

    def _rooted(self, value: ast.AST | None) -> tuple[str, ...]:
        """``value`` as a dotted path from the module it starts at (``torch.Tensor``), or ()
        when it does not start at a module: what changing one of its attributes changes."""
        chain = []
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        modules = [t for t in self._resolve(value) if t is not PERHAPS] if isinstance(value, ast.Name) else []
        return (modules[0].name, *reversed(chain)) if modules else ()

    def _private_allowed(self, value: ast.AST | None, attribute: str, changes: bool,
                         targets: frozenset[Module]) -> bool:
        if is_dunder(attribute):  # a module's dunders are its machinery (__dict__, __spec__, __init__)
            return (not changes and attribute in READABLE_DUNDER_ATTRIBUTES
                    and all(target is PERHAPS for target in targets))
        if targets and all(t.own and t is not PERHAPS for t in targets):
            return True  # a private name of one of the lab's modules
        return (isinstance(value, ast.Name) and attribute in self.own_private
                and (value.id in self.receivers or value.id in self.classes))

    def _module_as_value(self, node: ast.AST, parent: ast.AST | None, scope: ast.AST, line: int) -> None:
        """A module is only ever an attribute's base, or bound to a name of a module or a
        function, which then is the module: passed to a function, kept in an object or a class
        (a class's names are its attributes), it could be read where no name shows it is torch."""
        modules = [t for t in self._resolve(node) if t is not PERHAPS]
        if not modules:
            return
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        bound_to_names = ((isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) for t in parent.targets))
                          or (isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name)))
        if bound_to_names and parent.value is node and not isinstance(scope, ast.ClassDef):
            return
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in NAMED_LOOKUPS
                and parent.args and parent.args[0] is node):
            return  # getattr(torch, "name") is judged as torch.name
        self._found(line, f"uses the module {modules[0].name} as a value")

    def _name(self, node: ast.Name, parent: ast.AST | None, scope: ast.AST, line: int) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        name = node.id
        if is_dunder(name):
            if name not in READABLE_DUNDER_NAMES:
                self._found(line, f"uses `{name}`")
            return
        self._module_as_value(node, parent, scope, line)
        if name not in BUILTIN_NAMES or name in self.aliases or self._function_local(name, scope):
            return
        if name == "type":
            self._type(node, parent, line)
        if name in ALLOWED_BUILTINS:
            return
        called = isinstance(parent, ast.Call) and parent.func is node
        if name in NAMED_LOOKUPS:
            if not called:
                self._found(line, f"passes {name} around as a value (an attribute looked up by a computed name)")
        else:
            self._found(line, f"calls {name}" if called else f"uses the built-in `{name}`")

    def _call(self, node: ast.Call, scope: ast.AST, line: int) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in NAMED_LOOKUPS and not self._function_local(function.id, scope):
            self._named_lookup(node, function.id, line)
        elif isinstance(function, ast.Attribute) and function.attr == "type" and node.args and stringy(node.args[0]):
            self._found(line, "calls .type() with a name in a string (that imports the name)")

    def _type(self, node: ast.Name, parent: ast.AST | None, line: int) -> None:
        """The built-in ``type``: only ``type(x)``, whose class is only named or compared. Called with a
        name, bases and a namespace it makes a class with any dunder method (``__torch_dispatch__``,
        ``__del__``), and so does the class of a class (``type(type(x))``, ``type(x).mro()[0]``)."""
        call = isinstance(parent, ast.Call) and parent.func is node
        if not call:
            self._found(line, "uses the built-in `type` as a value (called, it makes classes)")
        elif len(parent.args) != 1 or isinstance(parent.args[0], ast.Starred) or parent.keywords:
            self._found(line, "creates a class with type (called with other than one argument)")
        else:
            self._class_kept(parent, self.parent[id(parent)], line)

    def _class_kept(self, node: ast.AST, parent: ast.AST | None, line: int) -> None:
        """``node`` gives an object's class (``type(x)``, ``x.__class__``): it may be named, compared,
        formatted or tested against, nothing more (called, or through its methods, it leads to
        ``type`` itself, which makes classes)."""
        named = (isinstance(parent, ast.Attribute) and parent.value is node and isinstance(parent.ctx, ast.Load)
                 and parent.attr in ("__name__", "__qualname__"))
        tested = (isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name)
                  and parent.func.id in CLASS_READERS)
        if not (named or tested or isinstance(parent, (ast.Compare, ast.FormattedValue))):
            self._found(line, "uses an object's class beyond its name (a class's class makes classes)")

    def _stream(self, node: ast.Attribute, parent: ast.AST | None, line: int) -> None:
        """``sys.stdout`` and ``sys.stderr`` are only written to (``print(..., file=sys.stderr)``,
        ``sys.stdout.write``): below them lie the raw files the grader opened."""
        if node.attr not in ("stdout", "stderr") or not any(t.name == "sys" for t in self._resolve(node.value)):
            return
        printed = isinstance(parent, ast.keyword) and parent.arg == "file"
        written = (isinstance(parent, ast.Attribute) and parent.attr in ("write", "flush")
                   and isinstance(self.parent[id(parent)], ast.Call) and self.parent[id(parent)].func is parent)
        if not (printed or written):
            self._found(line, f"uses sys.{node.attr} other than to write to it (below it lies a raw file)")

    def _named_lookup(self, node: ast.Call, function: str, line: int) -> None:
        """``getattr(obj, name)`` and its kin: judged as ``obj.name`` for every name the source
        spells out; a name computed at run time could be anything."""
        arguments = node.args
        names = None
        if len(arguments) >= 2 and not node.keywords and not any(isinstance(a, ast.Starred) for a in arguments):
            names = self._spelled_out(arguments[1])
        if names is None:
            receiver = len(arguments) >= 2 and isinstance(arguments[0], ast.Name) and arguments[0].id in self.receivers
            if not (receiver and public_prefix(arguments[1])):  # getattr(self, f"W_{kind}") is the student's own
                self._found(line, f"{function} with a computed name")
            return
        for name in sorted(names):
            self._attribute(arguments[0], name, function in ("setattr", "delattr"), line)
