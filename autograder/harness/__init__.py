"""The boundary between the judge and student code: the judge's side (:mod:`.remote`), the worker
and zygote that run student code, their confinement (:mod:`.sandbox`, :mod:`.cgroup`) and the
format of what crosses (:mod:`.codec`).
"""
