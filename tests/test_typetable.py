"""The committed Go type table: drift against the real sources, and the generator's parsing rules.

The drift test needs the Go sources checked out side by side in one directory (`api/` for
k8s.io/api, `apimachinery/` for k8s.io/apimachinery, `lws/` for sigs.k8s.io/lws at the pinned
versions), named by the DS_GO_SOURCES environment variable; see `tools/typetable_gen.py`.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tools import goparse, typetable_gen

TABLE_PATH = typetable_gen.default_output()


def test_committed_table_matches_the_go_sources() -> None:
    source_dir = os.environ.get("DS_GO_SOURCES")
    if not source_dir:
        pytest.skip(
            "DS_GO_SOURCES is not set: no Go sources to regenerate the type table from"
            " (docs/CONTRIBUTING.md, What skips)"
        )
    src = Path(source_dir)
    missing = [name for name in ("api", "apimachinery", "lws") if not (src / name).is_dir()]
    if missing:
        pytest.fail(f"DS_GO_SOURCES={src} lacks {missing}")
    regenerated = typetable_gen.render_table(src)
    committed = TABLE_PATH.read_text(encoding="utf-8")
    assert regenerated == committed, (
        "hooks/gocompat/typetable.json is out of date: run "
        f"`python -m tools.typetable_gen --src {src}` and commit the result"
    )


def test_committed_table_is_sorted_one_type_per_line() -> None:
    lines = TABLE_PATH.read_text(encoding="utf-8").splitlines()
    type_lines = [line for line in lines if line.startswith('"') and '": [' in line]
    names = [json.loads(line.split(": ", 1)[0]) for line in type_lines]
    assert names == sorted(names)
    table = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert sorted(table["types"]) == names
    assert table["root"] in table["types"]


# --- the generator on a small synthetic source tree --------------------------------------------

LWS_TYPES = """\
package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

/* A block comment with a brace { and a backtick ` inside. */

// LeaderWorkerTemplate is the root.
type LeaderWorkerTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// Template is a comment with a `quoted` word.
	Template corev1.Pod `json:"template"`
	Size *int32 `json:"size,omitempty" protobuf:"varint,1,opt,name=size"`
	Labels, Notes map[string]Mode `json:",omitempty"`
	Mode Mode `json:"mode,omitempty"`
	Raw []byte `json:"raw"`
	Skipped string `json:"-"`
	Dash string `json:"-,"`
	hidden string
	NoTag bool
	Stamp metav1.Time `json:"stamp,omitempty,omitzero"`
	Values []Alias `json:"values"`
}

type (
	Mode string
	Alias = int64
)

func (l *LeaderWorkerTemplate) Helper() map[string]struct{} { return nil }
"""

CORE_TYPES = """\
package v1

type Pod struct {
	Name string `json:"name"`
	Spec PodSpec `json:"spec,omitempty"`
}

type PodSpec struct {
	Extra *Pod `json:"extra,omitempty"`
}
"""

META_TYPES = """\
package v1

type TypeMeta struct {
	Kind string `json:"kind,omitempty"`
}

type Time struct {
	seconds int64
}

func (t Time) MarshalJSON() ([]byte, error) { return nil, nil }
"""


def _write_tree(root: Path, *, extra_core: str = "") -> Path:
    files = {
        "lws/go.mod": "module sigs.k8s.io/lws\n\nrequire (\n\tk8s.io/api v0.1.2\n"
        "\tk8s.io/apimachinery v0.1.2\n)\n",
        "lws/api/leaderworkerset/v1/types.go": LWS_TYPES,
        "api/core/v1/types.go": CORE_TYPES + extra_core,
        "apimachinery/pkg/apis/meta/v1/types.go": META_TYPES,
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_generator_records_fields_in_order_with_flags(tmp_path: Path) -> None:
    table = json.loads(typetable_gen.render_table(_write_tree(tmp_path)))
    assert table["pins"] == {"k8s.io/api": "v0.1.2", "k8s.io/apimachinery": "v0.1.2"}
    assert table["types"]["leaderworkerset/v1.LeaderWorkerTemplate"] == [
        ["", "meta/v1.TypeMeta", "inline"],
        ["template", "core/v1.Pod", ""],
        ["size", "*int32", "omitempty"],
        ["Labels", "map[string]string", "omitempty"],
        ["Notes", "map[string]string", "omitempty"],
        ["mode", "string", "omitempty"],
        ["raw", "bytes", ""],
        ["-", "string", ""],
        ["NoTag", "bool", ""],
        ["stamp", "time", "omitempty,omitzero"],
        ["values", "[]int64", ""],
    ]
    assert table["types"]["core/v1.PodSpec"] == [["extra", "*core/v1.Pod", "omitempty"]]
    assert sorted(table["types"]) == [
        "core/v1.Pod",
        "core/v1.PodSpec",
        "leaderworkerset/v1.LeaderWorkerTemplate",
        "meta/v1.TypeMeta",
    ]


def test_generator_refuses_unknown_json_methods(tmp_path: Path) -> None:
    root = _write_tree(tmp_path)
    core = root / "api/core/v1/types.go"
    custom = (
        "\ntype Custom string\n\nfunc (c Custom) MarshalText() ([]byte, error) { return nil, nil }"
    )
    text = core.read_text(encoding="utf-8").replace("Name string", "Name Custom")
    core.write_text(text + custom + "\n", encoding="utf-8")
    with pytest.raises(typetable_gen.GenerationError, match="own JSON methods"):
        typetable_gen.render_table(root)


def test_generator_check_mode_reports_drift(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "src")
    out = tmp_path / "table.json"
    assert typetable_gen.main(["--src", str(root), "--out", str(out)]) == 0
    assert typetable_gen.main(["--src", str(root), "--out", str(out), "--check"]) == 0
    out.write_text(out.read_text(encoding="utf-8").replace('"size"', '"sise"'), encoding="utf-8")
    assert typetable_gen.main(["--src", str(root), "--out", str(out), "--check"]) == 1


def test_tokenizer_inserts_semicolons_like_go() -> None:
    tokens = goparse.tokenize("type A struct {\n\tB int // c\n}\nvar x = struct\n{}\n")
    texts = [token.text for token in tokens]
    assert texts == [
        *("type", "A", "struct", "{", "B", "int", ";", "}", ";"),
        *("var", "x", "=", "struct", "{", "}", ";"),
    ]
