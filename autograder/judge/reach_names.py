"""What the names of one module of a submission are bound to, for the internals scan
(:mod:`autograder.judge.internals`): which scope each node runs in, where each name is bound, the modules
a name or an attribute chain may be (through aliases, and what the lab's other modules export), and the
strings a name spells out. No rule lives here.
"""

from __future__ import annotations

import ast
import builtins
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from autograder.judge.reach_rules import RECEIVERS, REGISTERS, Rules


@dataclass(frozen=True)
class Module:
    """What a name may hold: a module, by its import name; ``own`` for the lab's modules."""

    name: str
    own: bool = False


# A name imported from a lab module whose source was not scanned: it may be a module.
PERHAPS = Module("?", own=True)

BUILTIN_NAMES = frozenset(dir(builtins))
FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)



def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _walk(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.AST | None, ast.AST]]:
    """Every node with its parent and the scope it runs in (the module, a class body, a function
    or a comprehension): defaults, decorators, annotations and a comprehension's first iterable
    run in the enclosing scope. Iterative: a deep expression cannot exhaust the scan's stack."""
    scope_of: dict[int, ast.AST] = {id(tree): tree}
    stack: list[tuple[ast.AST, ast.AST | None, ast.AST]] = [(tree, None, tree)]
    while stack:
        node, parent, scope = stack.pop()
        scope_of[id(node)] = scope
        yield node, parent, scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                     *filter(None, (arguments.vararg, arguments.kwarg))]
            outside = [*getattr(node, "decorator_list", ()), *arguments.defaults, *filter(None, arguments.kw_defaults),
                       *(a.annotation for a in every if a.annotation), *filter(None, [getattr(node, "returns", None)])]
            body = node.body if isinstance(node.body, list) else [node.body]
            children = [(child, scope) for child in outside] + [(child, node) for child in (*every, *body)]
        elif isinstance(node, ast.ClassDef):
            children = [(child, scope) for child in (*node.decorator_list, *node.bases, *node.keywords)]
            children += [(child, node) for child in node.body]
        elif isinstance(node, COMPREHENSIONS):
            children = [(child, node) for child in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.comprehension):
            first = isinstance(parent, COMPREHENSIONS) and parent.generators[0] is node
            children = [(node.target, scope), (node.iter, scope_of[id(parent)] if first else scope)]
            children += [(test, scope) for test in node.ifs]
        elif isinstance(node, ast.arg):
            children = []  # its annotation runs in the enclosing scope, visited there
        else:
            children = [(child, scope) for child in ast.iter_child_nodes(node)]
        stack.extend((child, node, child_scope) for child, child_scope in reversed(children))

class Names:
    """One module's tree and what its names are bound to: the modules a name or an attribute chain may
    be, the submission's own private names, the strings a name spells out. The rules
    (:class:`autograder.judge.internals._Facts`) ask it."""

    def __init__(self, tree: ast.Module, own: frozenset[str],
                 exports: Mapping[str, Mapping[str, frozenset[Module]]] | None, rules: Rules):
        self.tree, self.own, self.exports, self.rules = tree, own, exports, rules
        self.nodes = list(_walk(tree))
        self.parent = {id(node): parent for node, parent, _ in self.nodes}
        self.scope_of = {id(node): scope for node, _, scope in self.nodes}
        self.locals: dict[int, set[str]] = defaultdict(set)  # function scope -> names bound in it
        self.sites: dict[str, list[ast.AST]] = defaultdict(list)  # name -> where it is bound, anywhere
        declared: dict[int, set[str]] = defaultdict(set)  # scope -> names declared global or nonlocal
        for node, parent, scope in self.nodes:
            for name in bound_names(node):
                target_scope = scope
                if isinstance(parent, ast.NamedExpr):  # := in a comprehension binds in the function around it
                    while isinstance(target_scope, COMPREHENSIONS):
                        target_scope = self.scope_of[id(target_scope)]
                self.locals[id(target_scope)].add(name)
                self.sites[name].append(node)
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                declared[id(scope)].update(node.names)
        for scope_id, names in declared.items():
            self.locals[scope_id] -= names
        self.classes = {name for name, sites in self.sites.items() if all(isinstance(s, ast.ClassDef) for s in sites)}
        self.receivers = {name for name in RECEIVERS if self.sites[name]
                          and all(isinstance(s, ast.arg) for s in self.sites[name])}
        self.own_private = self._own_private()
        self.resolved: dict[int, frozenset[Module]] = {}
        self.aliases = self._aliases()
        self.constants = self._constant_tuples()
        self.found: set[tuple[int, str]] = set()

    # -- what names are -------------------------------------------------------------------------
    def _own_private(self) -> set[str]:
        """Private names the submission gives its own objects: ``self._x = ...``, a class body's
        ``_x``, ``self.register_buffer("_x", ...)``."""
        names, owners = set(), self.receivers | self.classes
        for node, _, scope in self.nodes:
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
                    and node.value.id in owners):
                names.add(node.attr)
            elif isinstance(scope, ast.ClassDef):
                names.update(bound_names(node))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REGISTERS
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
        return {name for name in names if name.startswith("_") and not is_dunder(name)}

    def _aliases(self) -> dict[str, frozenset[Module]]:
        """Names bound to modules: by import, or by assigning a module (``x = torch``). A name
        is a module's wherever it is used (conservative: a parameter of that name too)."""
        aliases: dict[str, frozenset[Module]] = {}
        binders = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)
        bindings = [node for node, _, _ in self.nodes if isinstance(node, binders)]
        changed = True
        while changed:
            changed = False
            for node in bindings:
                for name, targets in self._binds_modules(node, aliases):
                    if not targets <= aliases.get(name, frozenset()):
                        aliases[name] = aliases.get(name, frozenset()) | targets
                        changed = True
        return aliases

    def _binds_modules(self, node: ast.AST,
                       aliases: Mapping[str, frozenset[Module]]) -> Iterator[tuple[str, frozenset[Module]]]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                yield name, frozenset({self._module(alias.name if alias.asname else name)})
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                target = self._step(self._module(node.module), alias.name) if alias.name != "*" else None
                if target:
                    yield alias.asname or alias.name, target
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = self._resolve(node.value, aliases)
            if targets:
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Name):
                        yield target.id, targets

    def _module(self, name: str) -> Module:
        return Module(name, own=name in self.own)

    def _step(self, module: Module, attribute: str) -> frozenset[Module]:
        """What ``module.attribute`` may be, as far as it is a module."""
        if module is PERHAPS:
            return frozenset({PERHAPS}) if attribute in self.rules.submodule_names else frozenset()
        if module.own:
            if self.exports is None or module.name not in self.exports:
                return frozenset({PERHAPS})
            return frozenset(self.exports[module.name].get(attribute, frozenset()))
        library = self.rules.libraries.get(module.name)
        if library and attribute in library.submodules:
            return frozenset({Module(f"{module.name}.{attribute}")})
        return frozenset()

    def _resolve(self, expr: ast.AST | None,
                 aliases: Mapping[str, frozenset[Module]] | None = None) -> frozenset[Module]:
        """The modules ``expr`` (a name or an attribute chain) may be. Once the aliases are
        known, results are kept per node: every link of a long chain is asked about."""
        memo = self.resolved if aliases is None else {}
        aliases = self.aliases if aliases is None else aliases
        chain = []
        while isinstance(expr, ast.Attribute) and id(expr) not in memo:
            chain.append(expr)
            expr = expr.value
        if id(expr) in memo:
            targets = memo[id(expr)]
        elif isinstance(expr, ast.Name):
            targets = aliases.get(expr.id, frozenset())
        else:
            targets = frozenset()
        for link in reversed(chain):
            targets = frozenset().union(*(self._step(target, link.attr) for target in targets))
            memo[id(link)] = targets
        return targets

    def exported(self) -> dict[str, frozenset[Module]]:
        """The names of this module that may hold modules, for its siblings to import (every
        alias, not only the module-level ones: a function's ``global`` reaches the module too)."""
        return dict(self.aliases)

    def _constant_tuples(self) -> dict[str, frozenset[str]]:
        """Module-level names bound once, to a tuple of strings: ``_NAMES = ("W_query", ...)``."""
        constants = {}
        for name, sites in self.sites.items():
            if len(sites) != 1 or name in BUILTIN_NAMES:
                continue
            site, parent = sites[0], self.parent[id(sites[0])]
            if isinstance(parent, ast.Assign):
                single = parent.targets == [site]
            else:
                single = isinstance(parent, ast.AnnAssign) and parent.target is site and parent.value is not None
            values = strings(parent.value, tuples_only=True) if single else None
            if values is not None and self.parent[id(parent)] is self.tree:
                constants[name] = values
        return constants

    def _spelled_out(self, expr: ast.AST) -> frozenset[str] | None:
        """The strings ``expr`` can be, when the source spells all of them out: a literal, or a
        name bound only to literals or by loops over a literal tuple or a constant one."""
        if isinstance(expr, ast.Constant):
            return frozenset({expr.value}) if isinstance(expr.value, str) else None
        if not isinstance(expr, ast.Name) or expr.id in BUILTIN_NAMES or not self.sites.get(expr.id):
            return None
        values: set[str] = set()
        for site in self.sites[expr.id]:
            parent = self.parent[id(site)]
            if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.target is site:
                iterated = (self.constants.get(parent.iter.id) if isinstance(parent.iter, ast.Name)
                            else strings(parent.iter, tuples_only=False))
            elif (isinstance(parent, ast.Assign) and parent.targets == [site]
                  and isinstance(parent.value, ast.Constant) and isinstance(parent.value.value, str)):
                iterated = frozenset({parent.value.value})
            else:
                iterated = None
            if iterated is None:
                return None
            values |= iterated
        return frozenset(values)

    def _function_local(self, name: str, scope: ast.AST) -> bool:
        """Whether ``name`` used in ``scope`` is a function's local (or a closure's): then it is
        never the built-in of that name (an unbound local raises, it does not fall back)."""
        while scope is not self.tree:
            if isinstance(scope, FUNCTION_SCOPES) and name in self.locals.get(id(scope), ()):
                return True
            scope = self.scope_of[id(scope)]
        return False


def is_docstring(parent: ast.AST | None) -> bool:
    """Whether a string constant whose parent is ``parent`` stands alone as a statement: a docstring."""
    return isinstance(parent, ast.Expr)


def bound_names(node: ast.AST) -> Iterator[str]:
    """The names a node binds in the scope it runs in."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.alias) and node.name != "*":
        yield node.asname or node.name.split(".")[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


def public_prefix(expr: ast.AST) -> bool:
    """Whether the string ``expr`` builds starts with a literal that is not private (``f"W_{kind}"``,
    ``"W_" + kind``, ``"W_{}".format(kind)``): no dunder or private name can come out of it."""
    while isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        expr = expr.left
    if isinstance(expr, ast.JoinedStr) and expr.values:
        expr = expr.values[0]
    elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format"
          and isinstance(expr.func.value, ast.Constant)):
        expr = ast.Constant(expr.func.value.value.split("{")[0] if isinstance(expr.func.value.value, str) else None)
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value[:1] not in ("", "_")


def stringy(expr: ast.AST) -> bool:
    """Whether ``expr`` is a string the source writes or builds (a literal, an f-string, a sum)."""
    literal = isinstance(expr, ast.Constant) and isinstance(expr.value, str)
    return literal or isinstance(expr, (ast.JoinedStr, ast.BinOp))


def strings(expr: ast.AST, tuples_only: bool) -> frozenset[str] | None:
    """The strings of a literal tuple (or list or set, unless ``tuples_only``) of string literals."""
    kinds = (ast.Tuple,) if tuples_only else (ast.Tuple, ast.List, ast.Set)
    if not isinstance(expr, kinds):
        return None
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in expr.elts):
        return None
    return frozenset(e.value for e in expr.elts)

