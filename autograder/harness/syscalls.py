"""The Linux system calls the sandbox needs that Python 3.11 lacks (unshare, mount, pivot_root, capset,
prctl), through ctypes, in one place, with their constants."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = 155  # x86_64 and the generic table agree on none; x86_64 is what the kit runs on
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST = 63


libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def prctl(option: int, value: int) -> None:
    check(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc.mount(encode(source), target.encode(), encode(kind), flags, encode(data)), f"mount {target}")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def pivot_root(new_root: str, put_old: str) -> None:
    check(libc.syscall(SYS_PIVOT_ROOT, new_root.encode(), put_old.encode()), "pivot_root")


def umount2(target: str, flags: int) -> None:
    check(libc.umount2(target.encode(), flags), f"umount {target}")
