"""Where the scan's tables (``autograder.judge.reach_rules.LIBRARIES``) are out of date for the running
Python and torch: a module or metaclass an allowed module holds that is neither allowed (as one of
LIBRARIES) nor denied, a declared name the module no longer has, a submodule that is not a module.

Imports nothing but the kit's scan, so that ``python tests/library_tables.py`` checks the standard
library's tables under another Python, with a stand-in torch (``tests/test_internals.py`` runs it
under each Python the README names): it prints the gaps of the modules not of torch as JSON.
"""

from __future__ import annotations

import importlib
import json
import types

from autograder.judge.reach_rules import LIBRARIES


def gaps(name: str) -> list[str]:
    library = LIBRARIES[name]
    module = importlib.import_module(name)
    held = {attribute: getattr(module, attribute) for attribute in dir(module) if not attribute.startswith("_")}
    found = []
    for attribute, value in held.items():
        if isinstance(value, types.ModuleType) and library.allows(attribute) and f"{name}.{attribute}" not in LIBRARIES:
            found.append(f"{name}.{attribute} is a module, neither allowed nor denied")
        if isinstance(value, type) and issubclass(value, type) and library.allows(attribute):
            found.append(f"{name}.{attribute} is a metaclass (it makes classes with any dunder), allowed")
    lazy = set(getattr(module, "_lazy_modules", ()))  # torch loads these on first use (torch.onnx)
    for attribute in sorted((library.denied | (library.only or frozenset())) - set(held) - lazy):
        found.append(f"{name}.{attribute} is declared but does not exist")
    for attribute in sorted(library.submodules):
        if not isinstance(held.get(attribute), types.ModuleType):
            found.append(f"{name}.{attribute} is declared a submodule but is not a module")
    return found


if __name__ == "__main__":
    print(json.dumps({name: gaps(name) for name in LIBRARIES if name.partition(".")[0] != "torch"}))
