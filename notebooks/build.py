"""Write the theme notebooks from their cells (run: .venv/bin/python notebooks/build.py).

Kept as code so a change to a notebook is a readable diff; the tour is edited as a
notebook. Outputs are not stored: the test suite executes every notebook top to bottom.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

ENCODINGS = [
    new_markdown_cell(
        "# Position encodings side by side\n\n"
        "The same task, the same figures and the same numbers for every encoding people "
        "teach: a learned table, the sinusoid, rotary (RoPE), ALiBi, a learned relative "
        "bias, and none. `shift` with causal attention: each position reads its left "
        "neighbour. Trained at T = 16, evaluated at 32: does the rule carry past the "
        "trained length?"),
    new_code_cell(
        "import stacklab\n"
        "from stacklab import figures\n\n"
        "HEAD = \"embedding(16, 64)\\n\"\n"
        "TAIL = \"layer_norm()\\nlinear(128)\\nrelu()\\nlinear(16)\"\n"
        "STACKS = {\n"
        "    \"learned\": HEAD + \"pos_embed(64)\\nattention(4, causal=true)\\n\" + TAIL,\n"
        "    \"sinusoidal\": HEAD + \"sin_pos(64)\\nattention(4, causal=true)\\n\" + TAIL,\n"
        "    \"rope\": HEAD + 'attention(4, causal=true, position=\"rope\")\\n' + TAIL,\n"
        "    \"alibi\": HEAD + 'attention(4, causal=true, position=\"alibi\")\\n' + TAIL,\n"
        "    \"none\": HEAD + \"attention(4, causal=true)\\n\" + TAIL,\n"
        "}\n"
        "for name, source in STACKS.items():\n"
        "    net = stacklab.resolve(source, [\"B\", 16], input_dtype=\"int64\")\n"
        "    print(f\"{name:>10}: {net.param_count:,} parameters\")"),
    new_markdown_cell("Train each one (a few seconds apiece) and evaluate it at 16 and 32:"),
    new_code_cell(
        "runs = {name: stacklab.train(source, task=\"shift\", steps=400, seed=0,\n"
        "                             eval_lengths=\"16,32\")\n"
        "        for name, source in STACKS.items()}\n"
        "for name, run in runs.items():\n"
        "    past = run.length_generalization[\"32\"][\"per_position\"][16:]\n"
        "    print(f\"{name:>10}: at T=16 {run.final['accuracy']:.2f}, \"\n"
        "          f\"past T at 32 {sum(past) / len(past):.2f}\")"),
    new_markdown_cell(
        "A learned table has nothing past its trained rows; RoPE and ALiBi score positions "
        "by their distance, so the rule carries on. Accuracy per position at each length:"),
    new_code_cell("figures.length_generalization_plot(runs[\"learned\"].length_generalization, 16)"),
    new_code_cell("figures.length_generalization_plot(runs[\"rope\"].length_generalization, 16)"),
    new_markdown_cell(
        "RoPE has no table. What it has instead: the score each key-minus-query offset gets, "
        "per head, with the tokens averaged out."),
    new_code_cell(
        "from stacklab import analysis\n\n"
        "name, weights, by_offset = analysis.attention_without_table(runs[\"rope\"])\n"
        "figures.offset_scores_plot(by_offset, name, \"rope\")"),
    new_markdown_cell("Every run's scores side by side, as `stacklab compare` writes them:"),
    new_code_cell(
        "for name, run in runs.items():\n"
        "    metrics = run.metrics()\n"
        "    pattern = (next(iter(metrics[\"position_tables\"].values()))[\"scores\"][\"pattern\"]\n"
        "               if metrics[\"position_tables\"] else metrics[\"attention_by_position\"][\"pattern\"])\n"
        "    print(f\"{name:>10}: {pattern['name']} {pattern['value']:.2f} (at init {pattern['init']:.2f})\")"),
]

TABLE = [
    new_markdown_cell(
        "# A position table from a file\n\n"
        "Any `[rows, D]` table trained elsewhere, saved with safetensors (or `np.save`), gets "
        "every figure and score that needs only the table. Here a synthetic table with the "
        "character of GPT-2's learned `wpe` stands in for the real one (nothing is "
        "downloaded); with the real file it is `read_table(\"model.safetensors\", \"wpe\")`."),
    new_code_cell(
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "from safetensors.torch import save_file\n"
        "from stacklab.lab.reports.table_file import gpt2_like_table, read_table, table_figures, table_scores\n\n"
        "path = Path(tempfile.mkdtemp()) / \"gpt2-like.safetensors\"\n"
        "save_file({\"wpe\": gpt2_like_table()}, str(path))\n"
        "table = read_table(path, \"wpe\")\n"
        "table.shape"),
    new_code_cell(
        "scores = table_scores(table)\n"
        "for name, value in scores.items():\n"
        "    if isinstance(value, float):\n"
        "        print(f\"{name:>24}: {value:.3f}\")"),
    new_markdown_cell(
        "Neighbouring rows point the same way and the similarity fades with distance "
        "(monotonicity), the same at every offset (translation invariance):"),
    new_code_cell(
        "drawn = {figure.title: figure for figure in table_figures(table, \"wpe\")}\n"
        "drawn[\"Cosine by distance\"].figure"),
    new_code_cell("drawn[\"Cosine similarity of the rows\"].figure"),
    new_code_cell("drawn[\"PCA of the rows (3D)\"].figure"),
    new_markdown_cell("Files that are not a table say so, with a fix:"),
    new_code_cell(
        "import stacklab\n\n"
        "try:\n"
        "    read_table(path, \"wte\")\n"
        "except stacklab.StackError as err:\n"
        "    print(err)"),
]

LAB = [
    new_markdown_cell(
        "# The panel: train and watch in the notebook\n\n"
        "`stacklab.train(..., live=True)` shows a progress bar and redraws the curves and the "
        "task's pattern figure as it trains. `stacklab.notebook.Panel` is a panel with the "
        "stack, every setting, Train and Stop; it trains in a thread, so other cells run "
        "meanwhile."),
    new_code_cell("import stacklab\n\nrun = stacklab.train(task=\"reverse\", live=True)"),
    new_code_cell(
        "from stacklab.notebook import Panel\n\n"
        "panel = Panel(task=\"shift\", steps=300)\n"
        "panel"),
    new_markdown_cell(
        "Press Train in the panel, or drive it from code (the same thing the buttons do):"),
    new_code_cell(
        "panel.train()\n"
        "panel.wait()\n"
        "print(panel.status, panel.run.step, panel.run.final)"),
    new_markdown_cell("A run trained in the app opens here by its key, and back (`run=KEY` in the app's link):"),
    new_code_cell("again = stacklab.open_run(panel.run.key)\nagain.final == panel.run.final"),
]

INDUCTION = [
    new_markdown_cell(
        "# The induction head: two layers, every head\n\n"
        "The `induction` task: a random prefix of L distinct tokens, the same L tokens again, "
        "then padding. L is drawn per sequence (4 to T/2), and at each position of the second "
        "copy the label is the token that comes next. Because L changes, no fixed offset "
        "finds the answer. Two attention layers on the residual stream can:\n\n"
        "1. a **previous-token head** (layer 1): each position t looks at t-1 and adds "
        "*which token came before me* to its own vector;\n"
        "2. an **induction head** (layer 2): at a position holding token A, it looks for the "
        "position whose previous token was A (the one just after A's first occurrence, "
        "t-L+1) and reads the token there, which is the answer.\n\n"
        "The second head's search uses what the first one wrote, so one layer is not enough. "
        "This is the circuit [Olsson et al. (2022)](https://arxiv.org/abs/2209.11895) found in "
        "language models. The preset: "
        "two attention lines and a linear head, nothing else."),
    new_code_cell(
        "import stacklab\n"
        "from stacklab import figures\n"
        "from stacklab.lab.measure.head_scores import largest\n"
        "from stacklab.lab.tasks import get_task\n\n"
        "PRESET = get_task(\"induction\").preset(16)\n"
        "print(PRESET)"),
    new_markdown_cell(
        "Train it (the preset's 300 steps, a few seconds). `eval_lengths` also evaluates the "
        "trained model at T = 8 and 12, for the comparison with `repeat` further down."),
    new_code_cell(
        "run = stacklab.train(task=\"induction\", seed=0, eval_lengths=\"8,12,16\")\n"
        "print(f\"step {run.step}: held-out accuracy {run.final['accuracy']:.3f}\")"),
    new_markdown_cell(
        "## Attention by layer and head\n\n"
        "Every head's attention weights on one held-out sequence: a row per attention layer, "
        "a panel per head, the query position down the side and the key along the bottom. "
        "Look for a line **just below the diagonal** in layer 1 (t looks at t-1), and in "
        "layer 2 a line **L-1 places left of the diagonal** in the second copy (t looks at "
        "t-L+1). Each panel's title gives that head's scores."),
    new_code_cell(
        "drawn = {figure.key: figure for figure in figures.run_figures(run)}\n"
        "drawn[\"heads_attention\"].figure"),
    new_markdown_cell(
        "## Head scores\n\n"
        "The same as numbers, layer by head, trained beside init. `previous_token` is a head's "
        "mean weight from t to t-1; `induction` its mean weight from each position of the "
        "second copy to t-L+1. At init every head spreads its weight over all the positions "
        "it may see, so both start small."),
    new_code_cell("drawn[\"head_scores\"].figure"),
    new_markdown_cell(
        "Every head's scores (`run.head_scores()`, the `attention` entry of "
        "`run.metrics()`, as `metrics.json` stores it), and the head that does each job. The "
        "other layer's best shows that each job belongs to one layer. In a run this short the "
        "first layer's heads may share the previous-token job (each puts part of its weight "
        "on t-1, about twice what it did at init) while the second layer's induction heads "
        "are already sharp: layer 2 reads the sum of what all four wrote, so the job can be "
        "split."),
    new_code_cell(
        "scores = run.head_scores()\n"
        "for node, entry in scores.items():\n"
        "    for h, head in enumerate(entry[\"heads\"]):\n"
        "        print(f\"layer {entry['layer']} ({node}) head {h}: \" + \", \".join(\n"
        "            f\"{name} {score['value']:.2f} (init {score['init']:.2f})\"\n"
        "            for name, score in head.items()))\n\n\n"
        "def best_head(layer: int, score: str) -> tuple[int, float]:\n"
        "    \"\"\"The head of attention layer `layer` with the largest `score`, and that score.\"\"\"\n"
        "    heads = next(entry[\"heads\"] for entry in scores.values() if entry[\"layer\"] == layer)\n"
        "    h = max(range(len(heads)), key=lambda h: heads[h][score][\"value\"])\n"
        "    return h, heads[h][score][\"value\"]\n\n\n"
        "print()\n"
        "for job, layer, other, score in ((\"previous-token\", 1, 2, \"previous_token\"),\n"
        "                                 (\"induction\", 2, 1, \"induction\")):\n"
        "    h, value = best_head(layer, score)\n"
        "    print(f\"{job} head: layer {layer}, head {h} ({score} {value:.2f}; \"\n"
        "          f\"the best in layer {other}: {best_head(other, score)[1]:.2f})\")"),
    new_markdown_cell(
        "## The control: one attention layer\n\n"
        "The same preset with its first attention line taken out. The one attention left can "
        "look back by offset (the position table tells it where it is), but the offset "
        "changes with L, and nothing before it has written *my previous token was A* for it "
        "to search. Look for a lower accuracy and no head with a high induction score."),
    new_code_cell(
        "ONE_LAYER = PRESET.replace(\"attention(4, causal=true)\\n\", \"\", 1)\n"
        "one = stacklab.train(ONE_LAYER, task=\"induction\", seed=0)\n"
        "for name, trained in ((\"two attention layers\", run), (\"one attention layer\", one)):\n"
        "    print(f\"{name}: accuracy {trained.final['accuracy']:.2f}, \"\n"
        "          f\"best induction score {largest(trained.head_scores(), 'induction'):.2f}\")"),
    new_markdown_cell(
        "## `repeat`: the same copy with a shortcut\n\n"
        "`repeat` fixes L at T/2, so the answer is always T/2-1 places back: one attention "
        "layer learns that offset from the position table (its preset is the one-layer stack) "
        "and scores as well as the induction heads at T = 16. At another length the offset is "
        "wrong: at T = 8 the answer is 3 places back, not 7. The induction heads look the "
        "answer up by content, so they hold. (At T = 8 and 12 `induction`'s copies are 4 to "
        "T/2 long, lengths it trained on; `repeat` saw only L = 8.) Both at T = 16, evaluated "
        "at 8, 12 and 16 (`length_generalization` in the metrics):"),
    new_code_cell(
        "repeat = stacklab.train(task=\"repeat\", seed=0, eval_lengths=\"8,12,16\",\n"
        "                        target_accuracy=0.99)  # stop once it has learned the offset\n"
        "by_length = {name: trained.metrics()[\"length_generalization\"]\n"
        "             for name, trained in ((\"repeat\", repeat), (\"induction\", run))}\n"
        "for length in (\"8\", \"12\", \"16\"):\n"
        "    print(f\"at T={length}: \" + \", \".join(\n"
        "        f\"{name} {found[length]['accuracy']:.2f}\" for name, found in by_length.items()))"),
    new_markdown_cell(
        "## Which position encoding?\n\n"
        "The previous-token head must know which position is just before its own: position "
        "information. The same two layers with each encoding: a learned table, the sinusoid, "
        "rotary (RoPE) and ALiBi inside both attentions, and none (causal attention alone, "
        "which leaks a little position: a position can tell how many came before it). Short "
        "runs, 150 steps each (half the preset's), so the table shows which learn the circuit "
        "fastest rather than where each ends up."),
    new_code_cell(
        "HEAD = \"embedding(16, 64)\\n\"\n"
        "TAIL = \"linear(15)\"\n"
        "CAUSAL = \"attention(4, causal=true)\\n\"\n"
        "STACKS = {\n"
        "    \"learned\": HEAD + \"pos_embed(32)\\n\" + 2 * CAUSAL + TAIL,\n"
        "    \"sinusoidal\": HEAD + \"sin_pos(32)\\n\" + 2 * CAUSAL + TAIL,\n"
        "    \"rope\": HEAD + 2 * 'attention(4, causal=true, position=\"rope\")\\n' + TAIL,\n"
        "    \"alibi\": HEAD + 2 * 'attention(4, causal=true, position=\"alibi\")\\n' + TAIL,\n"
        "    \"none\": HEAD + 2 * CAUSAL + TAIL,\n"
        "}\n"
        "encoded = {name: stacklab.train(source, task=\"induction\", seed=0, steps=150)\n"
        "           for name, source in STACKS.items()}\n"
        "print(f\"{'encoding':>10}  {'accuracy':>8}  {'induction (init)':>16}\")\n"
        "for name, trained in encoded.items():\n"
        "    heads = trained.head_scores()\n"
        "    print(f\"{name:>10}  {trained.final['accuracy']:>8.2f}  \"\n"
        "          f\"{largest(heads, 'induction'):>9.2f} ({largest(heads, 'induction', 'init'):.2f})\")"),
    new_markdown_cell(
        "Longer runs and more seeds show more (a seed's luck counts for a lot in 150 steps). "
        "From a shell, with each stack above saved to a file:\n\n"
        "```\n"
        "stacklab train --task induction --steps 1000 --eval-lengths 8,12,16 --out runs/induction\n"
        "stacklab sweep --task induction --stack learned.txt --stack rope.txt --stack none.txt "
        "--seeds 0-2 --steps 1000 --out sweeps/induction\n"
        "```\n\n"
        "The sweep writes `results.csv` and `comparison.html`, every figure of every run "
        "side by side."),
]


def write(name: str, cells) -> None:
    path = HERE / name
    # a cell that has not changed keeps the id it has in the file, so rewriting every
    # notebook changes only the ones whose cells changed
    before = nbformat.read(path, as_version=4).cells if path.exists() else []
    for cell, old in zip(cells, before):
        if (cell.cell_type, cell.source) == (old.cell_type, old.source):
            cell.id = old.id
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(notebook, path)


if __name__ == "__main__":
    write("encodings.ipynb", ENCODINGS)
    write("table-from-a-file.ipynb", TABLE)
    write("lab.ipynb", LAB)
    write("induction.ipynb", INDUCTION)
