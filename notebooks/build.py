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
        "from stacklab.lab.tables import gpt2_like_table, read_table, table_figures, table_scores\n\n"
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
        "# The Lab: train and watch in the notebook\n\n"
        "`stacklab.train(..., live=True)` shows a progress bar and redraws the curves and the "
        "task's pattern figure as it trains. `stacklab.notebook.Lab` is a panel with the "
        "stack, every setting, Train and Stop; it trains in a thread, so other cells run "
        "meanwhile."),
    new_code_cell("import stacklab\n\nrun = stacklab.train(task=\"reverse\", live=True)"),
    new_code_cell(
        "from stacklab.notebook import Lab\n\n"
        "lab = Lab(task=\"shift\", steps=300)\n"
        "lab"),
    new_markdown_cell(
        "Press Train in the panel, or drive it from code (the same thing the buttons do):"),
    new_code_cell(
        "lab.train()\n"
        "lab.wait()\n"
        "print(lab.status, lab.run.step, lab.run.final)"),
    new_markdown_cell("A run trained in the app opens here by its key, and back (`run=KEY` in the app's link):"),
    new_code_cell("again = stacklab.open_run(lab.run.key)\nagain.final == lab.run.final"),
]


def write(name: str, cells) -> None:
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(notebook, HERE / name)


if __name__ == "__main__":
    write("encodings.ipynb", ENCODINGS)
    write("table-from-a-file.ipynb", TABLE)
    write("lab.ipynb", LAB)
