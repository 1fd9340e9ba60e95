"""A worker's files: the view of the file system it gets (:func:`enter_view`: its submission's copy,
scratch, Python and its libraries, at the same paths as outside), Landlock's rules for the same paths
(:func:`restrict_files`), and the proof, made in the worker before student code runs, that nothing
outside is in reach (:func:`prove_files_confined`)."""

from __future__ import annotations

import ctypes
import functools
import os
import pwd
import sys
from typing import TYPE_CHECKING

from landlock import Ruleset  # imported here, once in the zygote, not in every worker (8 ms each)
from landlock.plumbing import FSAccess

from autograder.harness.syscalls import (MNT_DETACH, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY,
                                         MS_REC, MS_REMOUNT, mount, pivot_root, umount2)

if TYPE_CHECKING:
    from autograder.harness.sandbox import Confinement

# The device nodes a worker may open; everything else under /dev stays out of its view.
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the kit's autograder/: the worker's own code


def named_roots() -> set[str]:
    """What a worker may read besides its submission, by the names Python uses: Python, its packages, the
    system's libraries and the worker's own code (the kit's ``autograder/``, no checks)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             "/usr/lib", "/usr/lib64", "/lib", "/lib64", PACKAGE}
    return roots | {path for path in sys.path if path.endswith("site-packages")}


@functools.cache  # the same for every worker: computed once, in the zygote
def read_roots() -> list[str]:
    """:func:`named_roots`, resolved: the folders the view holds and Landlock allows."""
    return sorted(os.path.realpath(r) for r in named_roots() if os.path.exists(r))


@functools.cache
def links_to_roots() -> list[str]:
    """The symbolic links on the way to :func:`named_roots` (a ``.venv`` linked from elsewhere, a home in a
    linked folder), every hop of a chain: the view makes them again, at the same paths, or Python could not
    find by its own names a module it has not imported yet (``torch.optim``'s first step imports
    ``torch._dynamo``). Read as the kernel walks a path: a link's target continues the walk from its folder."""
    links = set()
    for named in named_roots():
        path, ahead, hops = "/", named.split("/")[::-1], 0
        while ahead and hops <= 40:  # the kernel's own limit on links in one path
            part = ahead.pop()
            if part in ("", "."):
                continue
            if part == "..":
                path = os.path.dirname(path)  # ``path`` holds no link: its parent is its folder's
                continue
            following = os.path.join(path, part)
            if not os.path.islink(following):
                path = following
                continue
            links.add(following)
            hops += 1
            target = os.readlink(following)
            path = "/" if os.path.isabs(target) else path
            ahead.extend(target.split("/")[::-1])
    return sorted(links)


def outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def enter_view(confinement: Confinement) -> None:
    """Make the root a tmpfs holding only what the worker needs, at the same paths as outside."""
    view = confinement.view
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host
    mount("tmpfs", view, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")

    def bind(source: str, writable: bool = False, device: bool = False) -> None:
        target = view + source
        if os.path.isdir(source):
            os.makedirs(target, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            open(target, "a").close()
        mount(source, target, None, MS_BIND | MS_REC)
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if device else MS_NODEV) | (0 if writable else MS_RDONLY)
        mount(None, target, None, flags)

    for root in outermost([*read_roots(), confinement.submission]):
        bind(root)
    # Scratch is a small tmpfs of its own: it vanishes with the namespace, and its size and file
    # count are capped (the file size limit caps one file, not how many).
    os.makedirs(view + confinement.scratch, mode=0o755, exist_ok=True)
    mount("tmpfs", view + confinement.scratch, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={confinement.limits.scratch_bytes},nr_inodes={confinement.limits.scratch_files},mode=0700" +
          (f",uid={confinement.uid},gid={confinement.uid}" if confinement.uid is not None else ""))
    for device in DEVICES:
        if os.path.exists(device):
            bind(device, device=True)
    os.makedirs(view + "/proc", mode=0o555)
    mount("proc", view + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # this namespace's processes only
    # Python's paths may go through links, and the loader's are links to /usr on merged-/usr systems (/lib and
    # /lib64 are roots, so among links_to_roots; /bin is not). Made last: a folder made in the view after them
    # could follow one out of it.
    for link in sorted({*links_to_roots(), *(["/bin"] if os.path.islink("/bin") else [])}):
        if not os.path.lexists(view + link):
            os.makedirs(os.path.dirname(view + link), mode=0o755, exist_ok=True)
            os.symlink(os.readlink(link), view + link)
    old = view + "/.old-root"
    os.mkdir(old)
    pivot_root(view, old)
    os.chdir("/")
    umount2("/.old-root", MNT_DETACH)
    os.rmdir("/.old-root")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def restrict_files(readable: list[str], writable: list[str]) -> None:
    # landlock 1.0.0.dev5 takes a call as failed whenever ctypes' errno is not 0, not when it returns
    # -1: a mount that failed just before (without root) would make every Landlock call "fail".
    ctypes.set_errno(0)
    ruleset = Ruleset()
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    for path in [*readable, "/proc"]:
        if os.path.exists(path):
            ruleset.allow(path, rules=read if os.path.isdir(path) else FSAccess.READ_FILE | FSAccess.EXECUTE)
    for device in DEVICES:
        if os.path.exists(device):
            ruleset.allow(device, rules=FSAccess.READ_FILE | FSAccess.WRITE_FILE)
    for path in writable:
        ruleset.allow(path, rules=FSAccess.all() if os.path.isdir(path) else FSAccess.all_file())
    ruleset.apply()


def outside_folders(confinement: Confinement) -> list[str]:
    """Folders a worker must not see into: the grader's home, the kit's folder (checks, reference
    solution), and those holding its own copy and scratch (another submission's copy, the judge's files)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    return [home, os.path.dirname(PACKAGE), os.path.dirname(confinement.submission),
            os.path.dirname(confinement.scratch)]


def prove_files_confined(confinement: Confinement, outside: list[str], own_view: bool) -> None:
    """Raise unless, now, every folder of ``outside`` lists nothing but a way to what the worker may
    read (or cannot be listed), and no file can be made in them, in its copy or at the root, nor its
    copy's mode changed. Without root, only a view of its own counts: under the grader's own user id,
    Landlock alone leaves the grader's files' modes, its Unix sockets and its processes in reach."""
    if confinement.uid is None and not own_view:
        raise PermissionError("without root, only a file system view of its own (a user namespace) confines a "
                              "worker: Landlock alone leaves chmod, the grader's sockets and its processes in reach")
    allowed = [*read_roots(), *links_to_roots(), confinement.submission, confinement.scratch]
    for folder in outside:
        try:
            seen = set(os.listdir(folder))
        except OSError:
            seen = set()
        ways_in = {os.path.relpath(path, folder).split(os.sep)[0] for path in allowed
                   if path.startswith(folder.rstrip("/") + "/")}
        if seen - ways_in:
            raise PermissionError(f"a worker could list {folder}")
    for folder in {*outside, confinement.submission, "/"}:
        try:
            made = os.open(os.path.join(folder, ".confinement-probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            continue
        os.close(made)
        os.unlink(os.path.join(folder, ".confinement-probe"))
        raise PermissionError(f"a worker could write in {folder}")
    try:
        os.chmod(confinement.submission, 0o755)
    except OSError:
        return
    raise PermissionError(f"a worker could change the mode of {confinement.submission}")
