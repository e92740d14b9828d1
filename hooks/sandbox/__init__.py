"""The sandbox, for people trying the hooks: `python -m hooks sandbox` runs a real control plane
on 127.0.0.1 (etcd, kube-apiserver, the garbage collector, Metacontroller and the hook server,
with the kit installed) and plays the LeaderWorkerSet controller, until Ctrl-C. The cluster tests
and the benchmarks run on the same code. A front end of its own: it may use `hooks.cli`, nothing
below imports it, and the hook server never does (pyproject.toml's import contracts).
"""
