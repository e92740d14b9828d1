"""A fake LeaderWorkerSet controller: each LWS's status follows its spec.replicas.

Groups (replicas) exist as soon as the spec asks for them (`status.replicas` and
`updatedReplicas` follow `spec.replicas` at once: a rendered LWS never changes its template, so
every group is up to date). The status also has what the real controller writes beside the
counts: `hpaPodSelector` and the Available and Progressing conditions (whose lastTransitionTime
moves only when they flip); the hooks read none of it.

A group becomes ready `delay` ticks after it was created; a rule with `delay=None` never becomes
ready, and `cap` limits how many groups of a matching LWS are ready (partial readiness). Scaling
down removes the newest groups first. Rules can be swapped during a run to inject or clear
faults; the first matching rule wins, else the default delay applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hooks import api
from tests.sim.store import Store

JsonObject = dict[str, Any]
LWS_TYPE = f"{api.LWS_KIND}.{api.LWS_API_VERSION}"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


@dataclass(frozen=True, slots=True)
class Readiness:
    """How the groups of matching LWS become ready; selectors left None match anything."""

    delay: int | None = 0
    cap: int | None = None
    image: str | None = None
    revision: str | None = None
    name: str | None = None
    slice_index: int | None = None
    role: str | None = None

    def matches(self, lws: JsonObject) -> bool:
        labels = lws["metadata"].get("labels") or {}
        if self.name is not None and lws["metadata"]["name"] != self.name:
            return False
        if self.revision is not None and labels.get(api.LABEL_REVISION) != self.revision:
            return False
        if self.slice_index is not None and labels.get(api.LABEL_SLICE) != str(self.slice_index):
            return False
        if self.role is not None and labels.get(api.LABEL_ROLE) != self.role:
            return False
        return self.image is None or self.image in images_of(lws)


def images_of(lws: JsonObject) -> set[str]:
    """Container images of both pod templates of an LWS."""
    template = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    found = set()
    for key in ("leaderTemplate", "workerTemplate"):
        pod = template.get(key) or {}
        for container in pod.get("spec", {}).get("containers", []):
            found.add(container.get("image", ""))
    return found


@dataclass
class FakeLWSController:
    """Reconciles every LWS status in the store once per run."""

    store: Store
    default_delay: int = 0
    rules: list[Readiness] = field(default_factory=list)
    groups: dict[str, list[int]] = field(default_factory=dict)
    """LWS uid -> the tick each existing group was created at, oldest first."""

    def rule_for(self, lws: JsonObject) -> Readiness:
        for rule in self.rules:
            if rule.matches(lws):
                return rule
        return Readiness(delay=self.default_delay)

    def pending(self) -> bool:
        """True while some LWS status will still change without any other write."""
        for lws in self.store.iter_type(LWS_TYPE):
            groups = self.groups.get(lws["metadata"]["uid"])
            wanted = lws.get("spec", {}).get("replicas", 1)
            if groups is None or len(groups) != wanted:
                return True
            rule = self.rule_for(lws)
            eventual = 0 if rule.delay is None else len(groups)
            if rule.cap is not None:
                eventual = min(eventual, rule.cap)
            if (lws.get("status") or {}).get("readyReplicas", 0) != eventual:
                return True
        return False

    def run(self, tick: int) -> None:
        live = set()
        for lws in list(self.store.iter_type(LWS_TYPE)):
            uid = lws["metadata"]["uid"]
            live.add(uid)
            wanted = lws.get("spec", {}).get("replicas", 1)
            groups = self.groups.setdefault(uid, [])
            if wanted > len(groups):
                groups.extend([tick] * (wanted - len(groups)))
            del groups[wanted:]
            ready = self._ready_count(lws, self.rule_for(lws), tick)
            previous = lws.get("status") or {}
            name = lws["metadata"]["name"]
            status = {
                **previous,
                "replicas": wanted,
                "readyReplicas": ready,
                "updatedReplicas": wanted,
                "hpaPodSelector": f"{LWS_NAME_LABEL}={name},{api.LWS_WORKER_INDEX_LABEL}=0",
                "conditions": self._conditions(previous, available=ready >= wanted),
            }
            key = (LWS_TYPE, lws["metadata"].get("namespace", ""), name)
            self.store.write_status(key, status, actor="lws-controller")
        for uid in set(self.groups) - live:
            del self.groups[uid]

    def _conditions(self, previous: JsonObject, *, available: bool) -> list[JsonObject]:
        """Available and Progressing, as the real controller words them."""
        before = {item.get("type"): item for item in previous.get("conditions") or []}
        conditions = []
        for condition_type, status, reason, message in (
            ("Available", available, "AllGroupsReady", "All replicas are ready"),
            ("Progressing", not available, "GroupsProgressing", "Replicas are progressing"),
        ):
            text = "True" if status else "False"
            old = before.get(condition_type)
            since = old["lastTransitionTime"] if old and old.get("status") == text else None
            conditions.append(
                {
                    "type": condition_type,
                    "status": text,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": since or self.store.clock.iso(),
                }
            )
        return conditions

    def _ready_count(self, lws: JsonObject, rule: Readiness, tick: int) -> int:
        if rule.delay is None:
            return 0
        groups = self.groups.get(lws["metadata"]["uid"], [])
        ready = sum(1 for created in groups if created + rule.delay <= tick)
        return ready if rule.cap is None else min(ready, rule.cap)
