"""A fake Metacontroller CompositeController for DisaggregatedSetRoleScalers (no children).

Each run syncs every scaler in the store: customize (the owning set by name), collect `related`
as the answer asks (hook version v1, as the captured controller used), sync, and write the
returned status plus `observedGeneration` when it changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from hooks import api
from hooks.core import scalers
from hooks.wire import answers, envelope
from tests.sim.metacontroller import SCALER_TYPE, collect_related, controller_object, wire
from tests.sim.store import FakeClock, Store, object_key

VERSION = "v1"


@dataclass
class FakeRoleScalerController:
    store: Store
    clock: FakeClock

    def run(self, tick: int) -> None:
        del tick
        for scaler in self.store.select(SCALER_TYPE):
            controller = controller_object(
                name="disaggregatedsetrolescaler-controller",
                version=VERSION,
                parent_resource=api.SCALER_PLURAL,
                hooks_path="/rolescaler",
            )
            customize_body = wire({"controller": controller, "parent": scaler})
            customized = scalers.customize(envelope.parse_scaler_customize_request(customize_body))
            rules = wire(answers.render_answer(customized.answer))["relatedResources"]
            body = {
                "controller": controller,
                "parent": scaler,
                "children": {},
                "related": collect_related(self.store, rules, version=VERSION),
                "finalizing": False,
            }
            result = scalers.sync(
                envelope.parse_scaler_sync_request(wire(body)), now=self.clock.iso()
            )
            response = wire(answers.render_answer(result.answer))
            if response["children"]:
                raise AssertionError(
                    f"the RoleScaler sync returned children: {response['children']}"
                )
            status = {**response["status"], "observedGeneration": scaler["metadata"]["generation"]}
            # Metacontroller runs this controller too: its name is the status's field manager.
            self.store.write_status(object_key(scaler), status, actor="metacontroller")
