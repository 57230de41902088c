"""describe: attention sites on every axis, with reasons and costs, from the IR only."""
# ruff: noqa: E501  (the pinned catalog table keeps one site per line)

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attngraph import load_spec, loads_spec
from attngraph.analysis.axes import AXES
from attngraph.analysis.describe import describe, to_dict
from attngraph.analysis.formats import axes_table, render

SPECS = Path(__file__).resolve().parent.parent / "specs"

#: (site, axes in AXES order, cost) per catalog spec, pinned after review.
CATALOG = {
    'bahdanau_translation': [
        ('dec/ctx', ('soft', 'content', 'external', 'global', 'single-head', 'recurrent', 'explicit'), 'O(T·N·d) with d = 64'),
    ],
    'glimpse_hard': [
        ('ram/g', ('hard', 'location', 'external', 'local', 'single-head', 'recurrent', 'explicit'), 'O(T·k·s²) with k = 2, s = 16, T = 3'),
        ('ram/next', ('hard', 'location', 'external', 'global', 'single-head', 'recurrent', 'implicit'), 'O(T·N·d) with d = 64, N = 16, T = 3'),
    ],
    'glimpse_soft': [
        ('z', ('soft', 'content', 'self', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 64, N = 16'),
    ],
    'global_attention': [
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 32'),
    ],
    'global_context': [
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 48'),
    ],
    'graph_attention': [
        ('h', ('soft', 'content', 'self', 'local', 'multi-head', 'not recurrent', 'explicit'), 'O(N²·d) with d = 32'),
        ('logits', ('soft', 'content', 'self', 'local', 'multi-head', 'not recurrent', 'implicit'), 'O(N²·d) with d = 4'),
    ],
    'image_self_attention': [
        ('y', ('soft', 'content', 'self', 'global', 'multi-head', 'not recurrent', 'explicit'), 'O(N²·d) with d = 48, N = 36'),
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 48, N = 36'),
    ],
    'intra_attention': [
        ('y', ('soft', 'content', 'self', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N²·d) with d = 32'),
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 32'),
    ],
    'kvq_attention': [
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(M·N·d) with d = 32, M = 1'),
    ],
    'local_attention': [
        ('y', ('soft', 'content', 'self', 'local', 'single-head', 'not recurrent', 'explicit'), 'O(N·w·d) with d = 32, w = 5'),
        ('z', ('soft', 'content', 'external', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 32'),
    ],
    'location_attention': [
        ('z', ('soft', 'location', 'self', 'global', 'single-head', 'not recurrent', 'explicit'), 'O(N·d) with d = 32'),
    ],
    'luong_local_p': [
        ('dec/ctx', ('soft', 'content+location', 'external', 'local', 'single-head', 'recurrent', 'explicit'), 'O(T·N·d) with d = 32'),
    ],
    'luong_translation': [
        ('dec/ctx', ('soft', 'content', 'external', 'global', 'single-head', 'recurrent', 'explicit'), 'O(T·N·d) with d = 32'),
    ],
    'memory_network': [
        ('ntm/read', ('soft', 'content+location', 'external', 'global', 'single-head', 'recurrent', 'explicit'), 'O(T·N·d) with d = 16, N = 16'),
    ],
    'multihead_attention': [
        ('z', ('soft', 'content', 'external', 'global', 'multi-head', 'not recurrent', 'explicit'), 'O(M·N·d) with d = 32, M = 1'),
    ],
    'transformer_encoder': [
        ('enc/a', ('soft', 'content', 'self', 'global', 'multi-head', 'not recurrent', 'implicit'), 'O(2·N²·d) with d = 32'),
    ],
}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_spec_is_described_as_pinned(name: str) -> None:
    """Each catalog spec has exactly the pinned sites, axis values and costs."""
    path = SPECS / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the catalog")
    d = describe(load_spec(path))
    got = [(s.id, tuple(s.axes[k].value for k in AXES), str(s.cost)) for s in d.sites]
    assert got == CATALOG[name]


def test_every_catalog_spec_describes_with_reasons() -> None:
    """Every spec under specs/ describes; every site has a non-empty reason on every axis."""
    paths = sorted(SPECS.glob("*.yaml"))
    for path in paths:
        d = describe(load_spec(path))
        for s in d.sites:
            assert set(s.axes) == set(AXES), path.name
            assert all(s.axes[k].reason for k in AXES), path.name


# -- small inline specs: the contrasts the literature draws ------------------------

BASE = """
attngraph: 1
name: {name}
dims: {{d: 16}}
inputs: {{v: {{type: vectors, dim: d}}}}
nodes:
  x: {{kind: items, from: v}}
{nodes}
outputs: {{{outputs}}}
"""


def spec(nodes: str, outputs: str = "z: z", name: str = "t") -> str:
    """A one-input spec with items x and the given (indented) nodes."""
    return BASE.format(name=name, nodes=nodes, outputs=outputs)


INTRA = """  q: {kind: queries, from: x}
  k: {kind: keys, from: x}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s%s}
  z: {kind: readout, weights: p, values: x}
"""


def one_site(text: str):  # noqa: ANN201
    """The only site of a spec's description."""
    d = describe(loads_spec(text))
    assert len(d.sites) == 1
    return d.sites[0]


def test_intra_attention_is_self_global_and_quadratic() -> None:
    """Queries and keys from the same items make self-attention of cost O(N²·d)."""
    s = one_site(spec(INTRA % ""))
    assert s.axes["source"].value == "self"
    assert s.axes["source"].reason == "queries and keys both derive from items 'x'"
    assert s.axes["reach"].value == "global"
    assert str(s.cost) == "O(N²·d) with d = 16"
    assert s.formula == "q·k/√d"


def test_window_makes_intra_attention_local() -> None:
    """A window mask k gives 'local: window k' and cost O(N·w·d), w = 2k+1."""
    s = one_site(spec(INTRA % ", mask: {window: 3}"))
    assert s.axes["reach"] == s.axes["reach"].__class__(
        "local", "window 3: items within distance 3 either side of the query (mask of 'p')")
    assert str(s.cost) == "O(N·w·d) with d = 16, w = 7"


def test_learned_query_is_external_and_linear() -> None:
    """A learned query vector is external and scores N items once: O(N·d)."""
    s = one_site(spec("""  s: {kind: scorer, fn: additive, query: {learned: d}, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
""", "z: z, attention: p"))
    assert s.axes["source"].value == "external"
    assert s.axes["basis"].reason == "scores depend on key content via fn additive"
    assert s.axes["exposure"].reason == "weights 'p' are the declared output 'attention'"
    assert str(s.cost) == "O(N·d) with d = 16"
    assert s.params == {"s": 16 * 16 * 2 + 16 + 16 + 16}


def test_heads_are_counted() -> None:
    """heads: 4 on queries/keys/values gives a multi-head site with 4 heads."""
    s = one_site(spec("""  q: {kind: queries, from: x, heads: 4}
  k: {kind: keys, from: x, heads: 4}
  vv: {kind: values, from: x, heads: 4}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: vv}
"""))
    assert (s.heads, s.axes["heads"].value) == (4, "multi-head")
    assert s.axes["heads"].reason == "4 heads score and read out in parallel, merged by concat"
    assert s.axes["exposure"].value == "implicit"


def test_categorical_policy_is_hard() -> None:
    """Weights sampled by a categorical policy are hard, named with the estimator."""
    s = one_site(spec("""  s: {kind: scorer, fn: mlp, key: x}
  pick: {kind: policy, scores: s}
  z: {kind: readout, weights: pick, values: x}
"""))
    assert s.axes["hardness"].value == "hard"
    assert s.axes["hardness"].reason == (
        "weights are sampled by policy 'pick' (categorical, REINFORCE)")
    assert s.axes["source"].value == "self"


def test_location_scorer_is_location_based() -> None:
    """fn location scores positions, not content."""
    s = one_site(spec("""  s: {kind: scorer, fn: location, key: x, max_len: 10}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
"""))
    assert s.axes["basis"].value == "location"


def test_names_and_comments_do_not_change_the_description() -> None:
    """Renaming the spec and adding a title and comments leaves the description unchanged."""
    a = to_dict(describe(loads_spec(spec(INTRA % ""))))
    b = to_dict(describe(loads_spec(
        "# Bahdanau recurrent hard attention\n" + spec(INTRA % "", name="hard_recurrent")
        .replace("nodes:", "title: recurrent hard multi-head\nnodes:"))))
    a.pop("name"), b.pop("name")
    assert a == b


def test_formats() -> None:
    """text is aligned, json round-trips with stable keys, markdown has an axes table."""
    d = describe(loads_spec(spec(INTRA % "")))
    text = render(d, "text")
    rows = [ln for ln in text.splitlines() if ln.split()[:1] and ln.split()[0] in AXES]
    assert len({ln.index(ln.split()[1]) for ln in rows}) == 1
    data = json.loads(render(d, "json"))
    assert list(data) == sorted(data)
    assert data["sites"][0]["axes"]["source"]["value"] == "self"
    assert "| axis | value | why |" in render(d, "markdown")


def test_axes_table_has_a_row_per_site() -> None:
    """axes_table gives a header, a rule and one row per site of each graph."""
    g1 = loads_spec(spec(INTRA % ""))
    g2 = loads_spec(spec(INTRA % ", mask: {window: 2}", name="loc"))
    lines = axes_table([g1, g2]).splitlines()
    assert lines[0] == "| spec | site | scorer | " + " | ".join(AXES) + " | cost |"
    assert len(lines) == 4
    assert "| local |" in lines[3]


def test_cli_describe_json(tmp_path: Path, cli) -> None:
    """`attngraph describe --format json` prints the description as JSON."""
    p = tmp_path / "s.yaml"
    p.write_text(spec(INTRA % ""), encoding="utf-8")
    res = cli("describe", p, "--format", "json", code=0)
    assert json.loads(res.output)["sites"][0]["cost"]["expr"] == "O(N²·d)"


def test_describe_and_diff_do_not_import_torch(tmp_path: Path) -> None:
    """describe, axes_table and diff run without importing torch."""
    p = tmp_path / "s.yaml"
    p.write_text(spec(INTRA % ""), encoding="utf-8")
    code = (
        "import sys\n"
        "from attngraph import load_spec\n"
        "from attngraph.analysis.describe import describe\n"
        "from attngraph.analysis.formats import axes_table, render\n"
        "from attngraph.analysis.diff import diff, render_diff\n"
        f"g = load_spec({str(p)!r})\n"
        "render(describe(g), 'text'); axes_table([g]); render_diff(diff(g, g), 'json')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pointer_is_a_site() -> None:
    """Weights that are the result (a pointer network's distribution over its inputs)
    make a site of their own, placed on every axis, with the loop's cost factor."""
    from pathlib import Path

    from attngraph.analysis.axes import find_sites
    from attngraph.frontend import load_spec

    spec = Path(__file__).resolve().parent.parent / "mechanisms" / "pointer_network.yaml"
    sites = find_sites(load_spec(spec))
    assert [s.form for s in sites] == ["pointer"]
    site = sites[0]
    assert site.axes["exposure"].value == "explicit"
    assert site.axes["recurrence"].value == "recurrent"
    assert site.cost.expr == "O(T·N·d)"
