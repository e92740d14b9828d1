"""A fake autoscaler: writes a scaler's spec.replicas at chosen ticks, as an HPA does via /scale.

A write aimed at a scaler that does not exist yet waits until it does (an HPA retries). Every
value written is remembered, so the driver can check that the DisaggregatedSet hook never
overwrites what the autoscaler decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hooks import api
from tests.sim.store import Store

SCALER_TYPE = f"{api.SCALER_KIND}.{api.API_VERSION}"


@dataclass
class FakeHPA:
    store: Store
    namespace: str
    plan: dict[int, dict[str, int]] = field(default_factory=dict)
    """tick -> scaler name -> replicas to write."""
    waiting: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    """scaler name -> the last value this autoscaler wrote."""
    log: list[tuple[int, str, int]] = field(default_factory=list)
    """(tick, scaler name, replicas) of every write."""

    def scale(self, *, tick: int, scaler: str, replicas: int) -> None:
        self.plan.setdefault(tick, {})[scaler] = replicas

    def pending(self, tick: int) -> bool:
        return bool(self.waiting) or any(at >= tick for at in self.plan)

    def run(self, tick: int) -> None:
        self.waiting.update(self.plan.pop(tick, {}))
        for name in sorted(self.waiting):
            key = (SCALER_TYPE, self.namespace, name)
            scaler = self.store.get(key)
            if scaler is None:
                continue
            replicas = self.waiting.pop(name)
            scaler.setdefault("spec", {})["replicas"] = replicas
            self.store.update(scaler, actor="hpa")
            self.written[name] = replicas
            self.log.append((tick, name, replicas))
