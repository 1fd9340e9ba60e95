"""Where in a submission an exception happened, as a worker tells the judge: the submission's frames, named
relative to its folder, and the exception in one line."""

from __future__ import annotations

import os
import traceback


def describe_exception(exc: BaseException, placed: bool = False) -> str:
    """``Type: message``; with ``placed`` (the caller says the file and line), a syntax error's text
    without the "(file, line N)" its str() appends."""
    if placed and isinstance(exc, SyntaxError) and exc.msg:
        return f"{type(exc).__name__}: {exc.msg}"[:2000]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:2000]


def student_frames(exc: BaseException, root: str) -> list[traceback.FrameSummary]:
    """The traceback's frames in the submission's files, named relative to it ("module.py")."""
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.realpath(frame.filename)
        if path.startswith(root + os.sep):
            frame.filename = os.path.relpath(path, root)
            frames.append(frame)
    return frames


def innermost_student_code(exc: BaseException, root: str):
    tb, code = exc.__traceback__, None
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(root + os.sep):
            code = tb.tb_frame.f_code
        tb = tb.tb_next
    return code


def failing_line(exc: BaseException, root: str) -> tuple[str, int]:
    """The submission's file and line where ``exc`` happened (a syntax error names its own)."""
    if isinstance(exc, SyntaxError) and exc.filename and \
            os.path.realpath(exc.filename).startswith(root + os.sep):
        return os.path.relpath(os.path.realpath(exc.filename), root), exc.lineno or 0
    frames = student_frames(exc, root)
    return (frames[-1].filename, frames[-1].lineno or 0) if frames else ("", 0)

