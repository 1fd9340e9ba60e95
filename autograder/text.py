"""Student-written text (exception messages, printed output, file and folder names), made
harmless where it lands.

A student controls every character of an exception message and of a folder name. Raw, they
could rewrite the instructor's terminal (ANSI/OSC escapes: erase a line, fake a progress
bar, set the window title, write the clipboard), reorder what a reader sees (bidirectional
overrides), run script in a browser (raw HTML in Markdown), or a formula in a spreadsheet (a
CSV cell starting with ``=``). Each sink has its function here, all built on :func:`printable`;
HTML pages pass every value through it too (Jinja's ``finalize``) before escaping ``<>&"'``.

A file or folder name that is not UTF-8 reaches Python with each undecodable byte as a lone
surrogate (U+DC80-U+DCFF, ``surrogateescape``); :func:`printable` shows such a byte as ``\\xff``,
as ``os.fsencode(name).decode("utf-8", "backslashreplace")`` would, so every sink shows the name
alike and none fails to encode it.
"""

from __future__ import annotations

import re
import unicodedata

# Kept as they are: line breaks and tabs. Everything else that is not printable is shown as
# an escape (\x1b, \u202e), so the reader sees that it was there.
_KEEP = {"\n", "\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with control and format characters (C0, C1, DEL, bidi overrides, zero-width
    marks, line and paragraph separators; lone surrogates, a name's bytes that are not UTF-8 as
    ``\\xff``) spelled out as escapes: safe on a terminal, in a log and in any UTF-8 file."""
    return "".join(_escape(c) if c not in _KEEP and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
                   else c for c in text)


def relation_sentence(relation: str) -> str:
    """The line a failed check's message ends with when its values relate simply to the expected ones
    (the judge appends it; the feedback leaves it out where the same diagnosis was already explained)."""
    return f"\nSeen from the values: {relation}."


def still_running(module: str, where: str, waited: float, timeout: float) -> str:
    """What `make check` prints while a call into student code has not answered yet."""
    return f"{module}.py still running ({where}), {waited:.0f} s of {timeout:g} s"


# Under make, a failing check's exit status makes make end with its own "*** [...] Error 1" line, which GNU
# make prints for any failing recipe (docs/design.md: "make check's last lines").
MAKE_ERROR_NOTE = 'Not every check passes yet: make reports that as "Error 1" below (a failing exit status, for ' \
                  'scripts and CI); nothing crashed.'


def one_line(text: str) -> str:
    """:func:`printable`, with line breaks and tabs escaped too (a progress line, a CSV status)."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def markdown_block(text: str) -> str:
    """A fenced code block showing ``text`` literally: no HTML, link or emphasis is interpreted,
    and the fence is longer than any run of backticks inside."""
    text = printable(text)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


def markdown_span(text: str) -> str:
    """An inline code span showing ``text`` (one line) literally."""
    text = one_line(text)
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(text: str) -> str:
    """A cell a spreadsheet shows as text: one line, and no formula (a leading ``=``, ``+``,
    ``-``, ``@``, after any spaces, is quoted with an apostrophe, as OWASP recommends)."""
    text = one_line(text)
    return "'" + text if text.lstrip()[:1] in ("=", "+", "-", "@") else text
