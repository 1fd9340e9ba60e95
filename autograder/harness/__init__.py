"""The boundary between the judge and student code: the judge's side (:mod:`.remote`), the processes
it starts (:mod:`.processes`) and what a check sent and got (:mod:`.recording`); the worker and zygote
that run student code, their confinement (:mod:`.sandbox`, :mod:`.cgroup`) and the format of what
crosses (:mod:`.codec`).
"""
