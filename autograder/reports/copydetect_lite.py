"""copydetect's fingerprints and comparison, imported without matplotlib.

copydetect imports matplotlib.pyplot at its top (a third of a second of every grading run) only to
draw the HTML reports the kit never asks it for. While copydetect is imported, stand-ins take
matplotlib's and pyplot's places; copydetect keeps its stand-in, which imports the real pyplot if it
is ever used. Every other importer gets the real modules.
"""

import importlib
import sys
import types


class Deferred(types.ModuleType):
    """A module imported when one of its attributes is first asked for."""

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def _import_copydetect() -> None:
    if "matplotlib" in sys.modules:
        importlib.import_module("copydetect")
        return
    stand_ins = {"matplotlib": Deferred("matplotlib"), "matplotlib.pyplot": Deferred("matplotlib.pyplot")}
    stand_ins["matplotlib"].pyplot = stand_ins["matplotlib.pyplot"]  # `import matplotlib.pyplot as plt`
    sys.modules.update(stand_ins)
    try:
        importlib.import_module("copydetect")
    finally:
        for name in stand_ins:
            del sys.modules[name]


_import_copydetect()

from copydetect.detector import CodeFingerprint, compare_files  # noqa: E402  (imported above)
from copydetect.utils import filter_code, get_token_coverage, winnow  # noqa: E402

__all__ = ["CodeFingerprint", "compare_files", "filter_code", "get_token_coverage", "winnow"]
