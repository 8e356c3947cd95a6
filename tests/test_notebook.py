"""The tour notebook runs top to bottom on the CPU."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

TOUR = Path(__file__).parent.parent / "notebooks" / "tour.ipynb"


def test_tour_notebook_runs_top_to_bottom(tmp_path):
    notebook = nbformat.read(TOUR, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    text = "".join(out.get("text", "") for out in outputs)
    assert "Parameters: 8,580" in text
    assert "rows >= 16 exactly zero: True" in text
    plots = [out for out in outputs if "application/vnd.plotly.v1+json" in out.get("data", {})]
    assert len(plots) >= 5
