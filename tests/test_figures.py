"""Figures of SPEC §9, checked by their data (no browser): real short training runs, no mocks."""

from __future__ import annotations

import base64
import dataclasses

import html
import json
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from stacklab import analysis, figures
from stacklab.lab.reports.html import report_html
from stacklab.lab.train.trainer import train

# The modular preset with a comment that needs escaping in HTML.
MODULAR_SOURCE = ("# modular <b>&</b> \"stripes\"\nembedding(8, 32)\npos_embed(64)\nlinear(128)\n"
                  "relu()\nlinear(8)")
T = 32  # modular's default trained length


@pytest.fixture(scope="module")
def modular():
    run = train(MODULAR_SOURCE, task="modular", steps=150)
    assert run.status == "finished"
    return run


@pytest.fixture(scope="module")
def reverse():
    run = train(task="reverse", steps=60)  # attention after the table; T = 16, max_len = 32
    assert run.status == "finished"
    return run


@pytest.fixture(scope="module")
def long_table():
    """A run whose position table has 2048 rows, only the first 32 trained."""
    run = train("embedding(8, 16)\npos_embed(2048)\nlinear(8)", task="modular", steps=45)
    assert run.status == "finished"
    return run


@pytest.fixture(scope="module")
def modular_figures(modular):
    return figures.run_figures(modular)


def shape_positions(fig: go.Figure, kind: str) -> list[float]:
    """x of the vertical lines (``kind="x"``) or y of the horizontal ones (``"y"``)."""
    out = []
    for shape in fig.layout.shapes:
        if shape.type != "line":
            continue
        if kind == "x" and shape.x0 == shape.x1 and shape.xref == "x":
            out.append(shape.x0)
        if kind == "y" and shape.y0 == shape.y1 and shape.yref == "y":
            out.append(shape.y0)
    return out


def annotation_text(fig: go.Figure) -> str:
    return " ".join(a.text for a in fig.layout.annotations)


# --- similarity heatmaps ----------------------------------------------------------------


def test_cosine_heatmap_is_symmetric_with_unit_diagonal_and_marks_T(modular):
    fig = figures.similarity_heatmap(modular.table("n1"), "cosine", trained_len=T)
    z = fig.data[0].z
    assert z.shape == (64, 64) and z.dtype == np.float32
    np.testing.assert_allclose(z, z.T, atol=1e-6)
    np.testing.assert_allclose(z.diagonal(), 1.0, atol=1e-5)
    assert fig.data[0].zmin == -1 and fig.data[0].zmax == 1
    assert shape_positions(fig, "x") == [T - 0.5] and shape_positions(fig, "y") == [T - 0.5]
    assert f"T = {T}" in annotation_text(fig)
    assert "cosine" in fig.data[0].hovertemplate


def test_modular_cosine_heatmap_has_stripes_every_8_rows(modular):
    z = figures.similarity_heatmap(modular.table("n1")).data[0].z[:T, :T]
    eight_apart = np.mean([z[i, i + 8] for i in range(T - 8)])
    others = np.mean([z[i, i + k] for i in range(T - 8) for k in range(1, 8)])
    assert eight_apart > 0.8 > others + 0.5


def test_dot_heatmap_holds_the_dot_products(modular):
    table = modular.table("n1")
    fig = figures.similarity_heatmap(table, "dot")
    np.testing.assert_allclose(fig.data[0].z, (table @ table.T).numpy(), rtol=1e-5, atol=1e-5)
    assert fig.data[0].zmid is None and fig.data[0].zmin == -fig.data[0].zmax
    assert shape_positions(fig, "x") == []  # no trained_len given, nothing marked
    with pytest.raises(ValueError, match="cosine"):
        figures.similarity_heatmap(table, "euclid")


def test_2048_row_heatmap_is_zoomed_exact_and_compact(long_table):
    table = long_table.table("n1")  # (2048, 16)
    fig = figures.similarity_heatmap(table, trained_len=T)
    assert len(fig.to_json()) < 1_000_000
    z = fig.data[0].z
    assert z.shape == (384, 384)  # the first 384 rows, one real pair per cell
    np.testing.assert_allclose(z, analysis.similarity(table[:384]).numpy(), atol=1e-5)
    assert "zoomed on rows 0-383 of 2,048" in fig.layout.title.text
    assert shape_positions(fig, "x") == [T - 0.5]


@pytest.mark.parametrize("rows", [1024, 2048])
def test_long_periodic_tables_keep_their_stripes(rows):
    """Finding 3: block-averaging took a period-8 table's contrast from 0.366 to 0.127 at
    1,024 rows and 0.028 at 2,048, and a random table's diagonal to 0.33."""
    generator = torch.Generator().manual_seed(0)
    period = torch.randn(8, 16, generator=generator)
    table = period.repeat(rows // 8, 1) + 0.8 * torch.randn(rows, 16, generator=generator)
    z = np.asarray(figures.similarity_heatmap(table).data[0].z)
    n = z.shape[0]
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    contrast = z[(distance % 8 == 0) & (distance > 0)].mean() - z[distance % 8 != 0].mean()
    exact = analysis.similarity(table[:n]).numpy()
    expected = (exact[(distance % 8 == 0) & (distance > 0)].mean()
                - exact[distance % 8 != 0].mean())
    assert contrast == pytest.approx(expected, abs=1e-5) and contrast > 0.3
    random = figures.similarity_heatmap(torch.randn(rows, 16, generator=generator)).data[0].z
    np.testing.assert_allclose(np.diagonal(np.asarray(random)), 1.0, atol=1e-5)


# --- query-key and snapshots ------------------------------------------------------------


def test_query_key_heatmap_shows_positional_attention(reverse, modular):
    fig = figures.query_key_heatmap(reverse, "n1")
    expected = analysis.positional_attention(reverse, "n1").numpy()
    assert np.allclose(np.asarray(fig.data[0].z), expected, atol=1e-5)
    assert np.allclose(expected.sum(1), 1.0, atol=1e-5)
    assert figures.query_key_heatmap(modular, "n1") is None  # modular's preset has no attention
    weights, sequences = analysis.attention_map(reverse)
    measured = figures.attention_heatmap(weights, sequences)
    assert np.allclose(np.asarray(measured.data[0].z).sum(1), 1.0, atol=1e-4)
    assert f"{sequences} held-out sequences" in measured.layout.title.text
    assert analysis.attention_map(modular) is None


def test_snapshot_heatmaps_frames_and_slider_follow_the_snapshots(modular):
    snapshots = modular.snapshots["n1"]
    fig = figures.snapshot_heatmaps(modular, "n1")
    count = min(len(snapshots), figures.MAX_FRAMES)
    assert len(fig.frames) == count
    steps = [step.label for step in fig.layout.sliders[0].steps]
    assert steps == [frame.name for frame in fig.frames]
    snapshot_steps = {str(step) for step, _ in snapshots}
    assert set(steps) <= snapshot_steps
    assert steps[0] == "0" and steps[-1] == str(snapshots[-1][0])
    assert [int(s) for s in steps] == sorted(int(s) for s in steps)
    np.testing.assert_allclose(fig.frames[-1].data[0].z,
                               analysis.similarity(snapshots[-1][1]).numpy(), atol=1e-5)
    labels = [button.label for button in fig.layout.updatemenus[0].buttons]
    assert any("Play" in label for label in labels) and any("Pause" in label for label in labels)
    assert shape_positions(fig, "x") == [T - 0.5]


def test_snapshot_heatmaps_of_a_2048_row_table_stay_compact(long_table):
    many = [(i, table) for i, (_, table) in enumerate(long_table.snapshots["n1"] * 3)]
    assert len(many) > figures.MAX_FRAMES
    fig = figures.snapshot_heatmaps(dataclasses.replace(long_table, snapshots={"n1": many}),
                                    "n1", kind="dot")
    assert len(fig.frames) == figures.MAX_FRAMES  # frames were thinned
    assert len(fig.to_json()) < 2_000_000
    side = fig.frames[0].data[0].z.shape[0]
    assert side * side * len(fig.frames) <= figures.ANIMATION_CELLS
    limits = {fig.data[0].zmin, -fig.data[0].zmax}
    assert len(limits) == 1  # one fixed colour scale for every frame


# --- per-row plots ----------------------------------------------------------------------


def test_grad_norm_plot_is_exactly_zero_past_T(modular):
    fig = figures.grad_norm_plot(modular.row_grad_norm["n1"], T)
    y = fig.data[0].y
    assert len(y) == 64
    assert (y[T:] == 0).all() and (y[:T] > 0).all()
    assert shape_positions(fig, "x") == [T - 0.5]
    assert f"rows ≥ {T} got exactly zero gradient" in annotation_text(fig)


def test_drift_plot_without_weight_decay_leaves_untrained_rows(modular):
    fig = figures.drift_plot(modular.row_drift("n1"), T)
    y = fig.data[0].y
    assert (y[T:] == 0).all() and (y[:T] > 0).all()
    assert shape_positions(fig, "x") == [T - 0.5]
    assert "never moved" in annotation_text(fig)


def test_drift_plot_with_weight_decay_says_untrained_rows_move():
    run = train(MODULAR_SOURCE, task="modular", steps=20, weight_decay=0.5)
    assert (run.row_grad_norm["n1"][T:] == 0).all()
    fig = figures.drift_plot(run.row_drift("n1"), T, weight_decay=0.5)
    assert (fig.data[0].y[T:] > 0).all()
    assert "weight decay 0.5" in annotation_text(fig) and "no gradient" in annotation_text(fig)


# --- PCA, length probe, learned vs sinusoidal, curves -----------------------------------


@pytest.mark.parametrize("dims", [2, 3])
def test_pca_plot_titles_give_explained_variance(modular, dims):
    table = modular.table("n1")
    fig = figures.pca_plot(table, trained_len=T, dims=dims)
    explained = analysis.pca(table, dims, fit_rows=T).explained
    axes = ([fig.layout.xaxis, fig.layout.yaxis] if dims == 2 else
            [fig.layout.scene.xaxis, fig.layout.scene.yaxis, fig.layout.scene.zaxis])
    for i, axis in enumerate(axes):
        assert axis.title.text == f"PC{i + 1} ({explained[i].item():.1%} of variance)"
    line, trained, untrained = fig.data
    assert line.mode == "lines" and len(line.x) == 64  # consecutive positions joined
    assert list(trained.customdata) == list(range(T))
    assert list(untrained.customdata) == list(range(T, 64))
    assert trained.marker.symbol != untrained.marker.symbol
    assert list(trained.marker.color) == list(range(T))  # coloured by position
    expected = analysis.pca(table, dims, fit_rows=T).coords.numpy()
    np.testing.assert_allclose(trained.x, expected[:T, 0], atol=1e-5)
    with pytest.raises(ValueError):
        figures.pca_plot(table, dims=4)


def test_pca_plot_of_modular_repeats_every_8_rows(modular):
    trained = figures.pca_plot(modular.table("n1"), trained_len=T).data[1]
    xy = np.stack([trained.x, trained.y], axis=1)
    assert np.abs(xy[:-8] - xy[8:]).max() < 0.2 * np.abs(xy).max()


def test_length_probe_plot_has_one_point_per_position_and_a_cliff(modular):
    probe = analysis.length_probe(modular)
    fig = figures.length_probe_plot(probe)
    baseline, trained = fig.data
    assert probe.probe_len == 64 and len(trained.y) == probe.probe_len
    np.testing.assert_allclose(trained.y, probe.accuracy.numpy())
    np.testing.assert_allclose(baseline.y, probe.baseline.numpy())
    assert shape_positions(fig, "x") == [T - 0.5]
    assert probe.inside > 0.9 and probe.beyond < 0.5  # the cliff
    assert probe.baseline_inside < 0.3  # with the tables at init, the positions are lost
    assert "inside T: 1.00" in annotation_text(fig) and "past T" in annotation_text(fig)


def test_learned_vs_sinusoidal_compares_same_size_tables(modular):
    table = modular.table("n1")
    fig = figures.learned_vs_sinusoidal(table, T)
    learned, sinusoidal = fig.data
    assert learned.z.shape == sinusoidal.z.shape == (T, T)
    np.testing.assert_allclose(learned.z, analysis.similarity(table[:T], "centred").numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(
        sinusoidal.z, analysis.similarity(analysis.sinusoidal_table(T, 32), "centred").numpy(),
        atol=1e-5)
    assert "resemblance r = " in fig.layout.title.text
    assert learned.xaxis != sinusoidal.xaxis  # side by side


def test_training_curves_follow_history(modular):
    fig = figures.training_curves(modular.history, modular.train_loss)
    names = [trace.name for trace in fig.data]
    assert names == ["training loss (one batch)", "held-out loss", "held-out accuracy"]
    assert isinstance(fig, figures.SharedFigure)  # every watcher's page shows the same one
    history_steps = [entry["step"] for entry in modular.history]
    assert list(fig.data[1].x) == history_steps
    assert list(fig.data[2].y) == pytest.approx([e["accuracy"] for e in modular.history])
    assert len(fig.data[0].x) == len(modular.train_loss)
    assert fig.layout.yaxis.type == "log"
    without = figures.training_curves(modular.history)
    assert [trace.name for trace in without.data] == names[1:]
    for drawn in (fig, without):  # drawn without plotly's check: what it would make of it
        assert go.Figure(drawn.to_dict()).to_dict() == drawn.to_dict()
    fig.update_yaxes(title_text="changed", row=2, col=1)  # its subplot grid is there
    assert fig.layout.yaxis2.title.text == "changed"



def test_a_shared_figure_hands_out_one_dict_until_it_changes(reverse):
    from stacklab.lab.figures import plotly_private
    from stacklab.lab.figures.style import with_used_template

    fresh = figures.training_curves(reverse.history, reverse.train_loss)
    fig = figures.shared(fresh)
    assert isinstance(fig, go.Figure) and fig.to_dict() == fresh.to_dict()
    if plotly_private.WATCHES_CHANGES:
        assert fig.to_dict() is fig.to_dict()  # no deep copy per page that shows it
    else:  # the public fallback keeps nothing that a change could leave stale
        assert fig.to_dict() is not fig.to_dict() and fig.to_dict() == fig.to_dict()
    twin = go.Figure(fresh)
    changes = [lambda f: f.update_layout(title_text="changed"),
               lambda f: setattr(f.layout.title, "text", "set"),
               lambda f: f.add_trace(go.Scatter(x=[1], y=[2])),
               lambda f: setattr(f.data[0], "name", "renamed"),
               lambda f: f.update_yaxes(range=[0, 2], row=2, col=1),
               lambda f: setattr(f, "data", f.data[:2]),
               lambda f: f.add_vline(x=3),
               lambda f: figures.fit_title(f, 200)]
    for change in changes:
        change(fig)
        change(twin)
        assert fig.to_dict() == with_used_template(twin.to_dict())
    with fig.batch_update():
        fig.layout.height = 300
    assert fig.to_dict()["layout"]["height"] == 300
    fig.frames = [go.Frame(data=[go.Scatter(x=[0], y=[0])])]
    fig.frames[0].name = "first"  # plotly does not watch frames: never kept
    assert fig.to_dict()["frames"][0]["name"] == "first"


def test_figures_read_back_from_json_are_shared_and_equal_the_drawn_ones(reverse):
    drawn = figures.run_figures(reverse)
    back = figures.figures_from_json(json.loads(json.dumps(figures.figures_json(reverse))))
    assert all(isinstance(f.figure, figures.SharedFigure) for f in back)
    from stacklab.lab.figures.style import with_used_template

    assert [json.loads(f.figure.to_json()) for f in back] == [  # the template's unused kinds left out
        with_used_template(json.loads(f.figure.to_json())) for f in drawn]

# --- everything for a run, and the HTML report ------------------------------------------


def test_run_figures_lists_what_applies(modular_figures, reverse):
    titles = [f.title for f in modular_figures]
    assert titles == ["Training curves", "Cosine similarity of the rows", "Cosine by distance",
                      "Dot-product similarity of the rows", "Similarity during training",
                      "Gradient per row", "Drift from initialisation", "PCA of the rows (2D)",
                      "PCA of the rows (3D)", "Length probe", "Learned vs sinusoidal"]
    for title, caption, figure, *_ in modular_figures:
        assert isinstance(figure, go.Figure) and figure.layout.title.text
        assert caption.endswith(".") and caption.count(". ") <= 3, caption
    assert "every 8 rows" in modular_figures[1].caption  # the task's pattern
    assert modular_figures[1].score.startswith("period contrast ")
    probe = dict((f.title, f) for f in modular_figures)["Length probe"]
    assert "inside T" in probe.caption and "initial values" in probe.caption
    reverse_titles = [f.title for f in figures.run_figures(reverse)]
    assert {"Attention by position alone", "Attention on held-out data"} <= set(reverse_titles)


def test_run_figures_without_a_position_table_shows_only_curves():
    run = train("embedding(8, 32)\nsin_pos(64)\nlinear(8)", task="modular", steps=5)
    assert [f.title for f in figures.run_figures(run)] == ["Training curves"]


def test_report_html_is_self_contained(modular, modular_figures):
    page = report_html(modular)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("* plotly.js v") == 1  # the library, inlined once
    assert "<script src=" not in page  # nothing fetched from the network
    assert page.count('class="plotly-graph-div"') == len(modular_figures)
    assert html.escape(MODULAR_SOURCE) in page and "<b>&</b>" not in page
    assert html.escape(modular.network.table()) in page
    assert f"{modular.final['accuracy']:.1%}" in page and f"{modular.final['loss']:.4f}" in page
    for title, caption, *_ in modular_figures:
        assert f"<h2>{html.escape(title)}</h2>" in page and html.escape(caption) in page
    assert modular.task.description in page


def _refuse(constant: str):
    raise ValueError(f"{constant} in a figure's JSON")


def _not_finite(node, path: str = ""):
    """Where a trace holds a value that is not a finite number: a null in its arrays
    (plotly writes NaN and infinity as null) or a NaN or infinity in a typed array."""
    if isinstance(node, dict):
        if "bdata" in node and np.dtype(node["dtype"]).kind == "f":
            values = np.frombuffer(base64.b64decode(node["bdata"]), dtype=node["dtype"])
            if not np.isfinite(values).all():
                yield path
        for name, value in node.items():
            yield from _not_finite(value, f"{path}.{name}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _not_finite(value, f"{path}[{index}]")
    elif node is None:
        yield path


def test_figures_serialize_to_plain_json(modular_figures):
    for drawn in modular_figures:
        # json.loads accepts NaN and Infinity unless told not to: plotly.js chokes on them
        found = json.loads(drawn.figure.to_json(), parse_constant=_refuse)
        traces = found["data"] + [trace for frame in found.get("frames", [])
                                  for trace in frame["data"]]
        assert not list(_not_finite(traces)), (drawn.key, list(_not_finite(traces))[:3])


# --- figures named by key ---------------------------------------------------------------


def test_every_figure_a_task_or_page_names_is_in_the_catalog():
    from stacklab.lab.figures import drawing
    from stacklab.lab.tasks import TASKS

    keys = [spec.key for spec in figures.FIGURES]
    assert len(set(keys)) == len(keys) and all(re.fullmatch(r"[a-z0-9_]+", key) for key in keys)
    named = {task.pattern_figure for task in TASKS.values()}
    named |= {drawing.PATTERN_FALLBACK, drawing.PATTERN_WITHOUT_TABLE}
    named |= {spec.aligns_with for spec in figures.FIGURES if spec.aligns_with}
    root = Path(__file__).parent.parent
    sources = [*root.glob("views/*.py"), *root.glob("parts/**/*.py"), *root.glob("ui/*.py"),
               *(root / "lib").rglob("*.py")]
    for path in sources:  # a key a page or the library names in code
        named |= set(re.findall(r"figure_spec\(\s*[\"'](\w+)[\"']", path.read_text()))
    for key in named:
        assert figures.figure_spec(key).key == key
    with pytest.raises(KeyError, match="no figure 'Cosine similarity of the rows'.*cosine"):
        figures.figure_spec("Cosine similarity of the rows")  # a title is not a key


def test_stored_figures_keep_their_keys_and_older_ones_get_theirs_by_title(reverse):
    drawn = figures.figures_json(reverse)
    stored = json.loads(json.dumps(drawn))  # as figures.json holds them
    back = figures.figures_from_json(stored)
    fresh = figures.run_figures(reverse)
    assert [(f.key, f.title, f.caption, f.score, f.skipped) for f in back] == [
        (f.key, f.title, f.caption, f.score, f.skipped) for f in fresh]
    assert [f.key for f in back][:2] == ["training_curves", "cosine"]
    pattern, = figures.figures_from_json(stored, "pattern")
    assert pattern.key == reverse.task.pattern_figure == "attention_by_position"
    # figures.json of an older version: [title, caption, json, score], no key
    older = {"pattern": stored["pattern"][:4],
             "nodes": {node: [entry[:4] for entry in entries]
                       for node, entries in stored["nodes"].items()}}
    described = [(f.key, f.title, f.caption, f.score, f.skipped) for f in back]
    assert [(f.key, f.title, f.caption, f.score, f.skipped)
            for f in figures.figures_from_json(older)] == described
    assert any(skipped for *_, skipped in described)  # reverse has no spare rows: no probe
    assert figures.figures_from_json(older, "pattern")[0].key == "attention_by_position"
    older["nodes"]["n1"][1][0] = "A title since renamed"
    assert figures.figures_from_json(older) is None  # so its reader draws them from the run


# -- Explore that leads (issue 29) ---------------------------------------------------------


def test_every_figure_declares_its_group_once_in_the_catalog():
    assert {spec.group for spec in figures.FIGURES} == set(figures.GROUPS)
    with pytest.raises(TypeError):  # a figure without a group is refused where it is declared
        figures.FigureSpec("x", "X", lambda ctx: "", lambda ctx: go.Figure())


def test_arrange_leads_with_the_tasks_figure_and_lists_a_skipped_one_once(reverse):
    drawn = figures.run_figures(reverse)
    arranged = figures.arrange(drawn, reverse.task.pattern_figure)
    assert arranged.lead.key == "attention_by_position" and arranged.lead.score
    assert list(arranged.groups) == [g for g in figures.GROUPS if g in arranged.groups]
    grouped = [f.key for found in arranged.groups.values() for f in found]
    assert "attention_by_position" not in grouped  # drawn once, first
    assert {f.key for f in drawn if not f.skipped} == {*grouped, arranged.lead.key}
    skipped = [f for f in drawn if f.skipped]
    assert [title for title, _ in arranged.not_drawn] == [f.title for f in skipped]
    assert all(not reason.startswith("Skipped") for _, reason in arranged.not_drawn)
    # a task whose own figure was not drawn leads with the cosine map
    assert figures.arrange(drawn, "rows_alone").lead.key == "cosine"


def test_animations_open_on_their_last_frame(modular, reverse):
    for fig in (figures.snapshot_heatmaps(modular, "n1"),
                figures.attention_snapshot_heatmaps(reverse, "n1")):
        np.testing.assert_allclose(fig.data[0].z, fig.frames[-1].data[0].z)
        assert fig.layout.sliders[0].active == len(fig.frames) - 1
        play = fig.layout.updatemenus[0].buttons[0]
        assert "Play" in play.label and play.args[1]["fromcurrent"] is False  # from step 0


def test_head_titles_are_one_short_line_each_with_room_above_every_row(reverse):
    grid = next(f for f in figures.run_figures(reverse) if f.key == "heads_attention").figure
    titles = [a.text for a in grid.layout.annotations if a.text]
    heads = sum(node.args["heads"] for node in reverse.network.nodes if node.spec.name == "attention")
    assert len(titles) == heads >= 2 and all("<br>" in t for t in titles)
    assert max(len(line) for t in titles for line in t.split("<br>")) <= 24
    # the top margin holds the wrapped title and the head titles under it
    assert grid.layout.margin.t >= 40 + 24 + 3 * 16 and grid.layout.title.yanchor == "top"


def test_run_names_say_task_encoding_and_key(reverse):
    from stacklab.lab.reports.names import file_name, run_name

    name = run_name(reverse)
    assert name == f"reverse-learned-{reverse.key[:8]}"
    assert file_name(name, "report.html") == f"{name}-report.html"


def test_report_html_leads_like_explore_and_lists_what_was_not_drawn(reverse):
    page = report_html(reverse)
    lead = page.index("<h2>Attention by position alone</h2>")
    assert lead < page.index("<div class='group'>The pattern</div>")
    assert page.count("Not drawn for this run") == 1 and page.count("Not drawn:") == 0
    assert page.count("* plotly.js v") == 1


def test_a_long_runs_training_loss_is_drawn_at_a_bounded_number_of_steps(modular):
    """issue 35: the curves of a run followed live are sent at each poll; a loss at every
    one of 20,000 steps would make them 200 KB. At most CURVE_POINTS, first and last kept."""
    from stacklab.lab.figures.curves import CURVE_POINTS

    losses = [(step, 1.0 / step) for step in range(1, 20_001)]
    fig = figures.training_curves(modular.history, losses)
    steps = list(fig.data[0].x)
    assert len(steps) <= CURVE_POINTS and steps[0] == 1 and steps[-1] == 20_000
    assert list(fig.data[0].y) == pytest.approx([1.0 / step for step in steps])
    assert len(fig.to_json()) < 30_000


def test_a_shared_figure_sends_its_templates_defaults_only_for_its_kinds_of_trace():
    """issue 35: the theme's template has defaults for ten kinds of trace; a figure of
    lines sends only those for lines (a third of its bytes less at each poll)."""
    import plotly.io as pio

    from stacklab.lab.figures.style import with_used_template

    template = go.layout.Template(data={"scatter": [go.Scatter(marker=dict(size=9))],
                                        "table": [go.Table()], "heatmap": [go.Heatmap()]},
                                  layout=dict(colorway=["#111111"]))
    plain = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout=dict(template=template))
    shared = figures.shared(plain)
    sent = shared.to_dict()["layout"]["template"]
    assert list(sent["data"]) == ["scatter"] and sent["layout"]["colorway"] == ["#111111"]
    assert go.Figure(shared.to_dict()).to_dict() == with_used_template(plain.to_dict())
    full = pio.to_json(plain, validate=False)
    assert len(pio.to_json(shared, validate=False)) < len(full)
    assert with_used_template({"data": []}) == {"data": []}  # no template: as it is
