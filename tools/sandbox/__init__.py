"""The sandbox and the cluster harness: `python -m tools.sandbox`, run from a checkout, starts a
real control plane on 127.0.0.1 (etcd, kube-apiserver, the garbage collector, Metacontroller and
the hook server, with the kit installed) and plays the LeaderWorkerSet controller, until Ctrl-C.
The cluster tests and the benchmarks run on the same code. Not part of the wheel: it needs the
cluster-test programs and a checkout's kit; the shipped package never imports it.
"""
