"""How long `kubectl ds` takes to start, beside `kubectl` itself and a bare Python.

Each command runs `--runs` times in a row (after one warm-up run), and the table shows the median
and the fastest wall time: the fastest is what the code costs, the median what a loaded machine
adds. The second table lists what one `kubectl ds --help` imports, from a fresh interpreter.

    python bench/plugin_startup.py [--runs 20]

Needs the package installed (`kubectl-ds` on PATH beside this Python) and `kubectl` on PATH.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

PLUGIN = str(Path(sysconfig.get_path("scripts")) / "kubectl-ds")

COMMANDS: tuple[tuple[str, Sequence[str]], ...] = (
    ("python -c pass", (sys.executable, "-c", "pass")),
    ("kubectl rollout --help", ("kubectl", "rollout", "--help")),
    ("kubectl ds --help", (PLUGIN, "--help")),
    ("kubectl ds rollout undo --help", (PLUGIN, "rollout", "undo", "--help")),
    ("kubectl ds plan ...", (PLUGIN, "plan", "--old", "a=2,b=1", "--target", "a=2,b=1")),
)

PROBE = """
import sys
before = set(sys.modules)
import hooks.kubectl.plugin
loaded = set(sys.modules) - before
for name in ("hooks.api.models", "pydantic", "yaml", "flask", "gunicorn", "hooks.server"):
    print(name, name in loaded)
print("modules", len(loaded), "of them hooks.*", sum(m.startswith("hooks") for m in loaded))
"""


def _seconds(command: Sequence[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if shutil.which("kubectl") is None or not Path(PLUGIN).exists():
        print("needs kubectl on PATH and the package installed (kubectl-ds)", file=sys.stderr)
        return 1
    print(f"{'command':34} {'median s':>9} {'fastest s':>10}")
    for label, command in COMMANDS:
        _seconds(command)
        times = [_seconds(command) for _ in range(args.runs)]
        print(f"{label:34} {statistics.median(times):9.3f} {min(times):10.3f}")
    print()
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    print("what `import hooks.kubectl.plugin` loads:")
    print(done.stdout, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
