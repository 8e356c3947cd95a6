"""Formatting a resolved network: the text report, a dict, a DataFrame and HTML."""

from __future__ import annotations

import html

from .resolved import ResolvedNetwork as Network
from .nodes import is_chain
from .shapes import format_shape

COLUMNS = ("index", "name", "operation", "input shapes", "output shapes")
INPUTS_COLUMN = "inputs"  # only in a branching network's report: what each row reads


def is_branching(network: Network) -> bool:
    """Whether some node reads anything but the line above (the first: the network input)."""
    return not is_chain(network.nodes)


def columns(network: Network) -> tuple[str, ...]:
    """The report's columns: a branching network's gain ``inputs`` last."""
    return (*COLUMNS, INPUTS_COLUMN) if is_branching(network) else COLUMNS


def header(network: Network) -> str:
    """``Network: [B, 12] -> [B, 12, 4]  dtype=float32  input_dtype=int64``."""
    text = (f"Network: {format_shape(network.input_shape)} -> "
            f"{format_shape(network.output_shape)}  dtype={network.dtype}")
    if network.input_dtype != network.dtype:
        text += f"  input_dtype={network.input_dtype}"
    return text


def rows(network: Network) -> list[tuple[str, ...]]:
    """One row of cells per node, for `columns`."""
    cells = [(str(node.index), node.name, node.op, node.input_cell(), node.output_cell())
             for node in network.nodes]
    if is_branching(network):
        cells = [(*row, node.reads_text) for row, node in zip(cells, network.nodes)]
    return cells


def footer(network: Network) -> list[str]:
    """``Parameters: N`` and the kept requirements."""
    return [f"Parameters: {network.param_count:,}"] + [f"Requires: {r.text}"
                                                       for r in network.requires]


def network_table(network: Network) -> str:
    """Left-aligned columns, each as wide as its widest cell plus two spaces; no trailing spaces."""
    names = columns(network)
    table = [names, *rows(network)]
    widths = [max(len(row[i]) for row in table) + 2 for i in range(len(names))]
    lines = [header(network)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths)]
        lines.append("".join(cells) + row[-1])
    return "\n".join([*lines, "", *footer(network)])


def network_dict(network: Network) -> dict:
    return {
        "input_shape": list(network.input_shape),
        "output_shape": list(network.output_shape),
        "dtype": network.dtype,
        "input_dtype": network.input_dtype,
        "param_count": network.param_count,
        "param_bytes": network.param_bytes,
        "requires": [{"dim": r.dim, "max" if r.operator == "<=" else "divisor": r.bound,
                      "node": r.node, "text": r.text} for r in network.requires],
        "nodes": [
            {
                "index": node.index,
                "name": node.name,
                "op": node.op,
                "identity": node.spec.identity,
                "line": node.call.span.line,
                "args": dict(node.args),
                "inputs": {port: list(shape) for port, shape in node.inputs},
                "outputs": {port: list(shape) for port, shape in node.outputs},
                # the node each input port reads; None: the network input
                "reads": {port: read for (port, _), read in zip(node.inputs, node.reads)},
                "params": {key: list(shape) for key, shape in node.params},
                "param_count": node.param_count,
            }
            for node in network.nodes
        ],
        "source": network.source,
    }


def network_dataframe(network: Network):
    import pandas as pd

    frame = pd.DataFrame(rows(network), columns=list(columns(network)))
    frame["index"] = frame["index"].astype(int)
    frame["parameters"] = [node.param_count for node in network.nodes]
    return frame


def network_html(network: Network) -> str:
    """A small HTML table for notebooks, with the same header and footer as the text report."""
    esc = html.escape
    head = "".join(f"<th style='text-align:left'>{esc(c)}</th>"
                   for c in (*columns(network), "parameters"))
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'><code>{esc(cell)}</code></td>"
                         for cell in row)
        + f"<td style='text-align:right'>{node.param_count:,}</td></tr>"
        for row, node in zip(rows(network), network.nodes)
    )
    foot = "<br>".join(esc(line) for line in footer(network))
    return (f"<div class='stacklab-network'><p><code>{esc(header(network))}</code></p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p>{foot}</p></div>")


INPUT_ID = '"(input)"'  # not a node name: names are identifiers


def _dot_text(*lines: str) -> str:
    """``lines`` as one quoted Graphviz string (quotes and backslashes escaped), one line each."""
    return '"' + "\\n".join(line.replace("\\", "\\\\").replace('"', '\\"') for line in lines) + '"'


def network_dot(network: Network) -> str:
    """The network as a Graphviz graph: a box per node (its name and its call as written),
    the input on top, and on each edge the shape that flows along it. A chain is a
    straight line; a branching stack shows its residual connections.

    >>> from stacklab import resolve
    >>> print(resolve("embedding(500, 16)\\nlinear(4)", "B,12", input_dtype="int64").dot())
    digraph stack {
      graph [rankdir=TB, nodesep=0.3, ranksep=0.35];
      node [shape=box, style="rounded,filled", fillcolor="#f5f7fa", color="#8a94a6", fontname="monospace", fontsize=11];
      edge [fontname="monospace", fontsize=10, color="#8a94a6"];
      "(input)" [label="input", shape=ellipse, fillcolor="#ffffff"];
      "n0" [label="n0\\nembedding(500, 16)"];
      "n1" [label="n1\\nlinear(4)"];
      "(input)" -> "n0" [label=" [B, 12]"];
      "n0" -> "n1" [label=" [B, 12, 16]"];
    }
    """
    lines = ["digraph stack {",
             "  graph [rankdir=TB, nodesep=0.3, ranksep=0.35];",
             '  node [shape=box, style="rounded,filled", fillcolor="#f5f7fa", color="#8a94a6", '
             'fontname="monospace", fontsize=11];',
             '  edge [fontname="monospace", fontsize=10, color="#8a94a6"];',
             f'  {INPUT_ID} [label="input", shape=ellipse, fillcolor="#ffffff"];']
    for node in network.nodes:
        lines.append(f"  {_dot_text(node.name)} [label={_dot_text(node.name, node.call.call_source)}];")
    for node in network.nodes:
        for read, (_, shape) in zip(node.reads, node.inputs):
            source = INPUT_ID if read is None else _dot_text(read)
            lines.append(f"  {source} -> {_dot_text(node.name)} "
                         f"[label={_dot_text(' ' + format_shape(shape))}];")
    return "\n".join(lines + ["}"])
