"""The command line: output, exit status 0/1/2, and no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

STEM = "embedding(500, 16)\npos_embed(32)\nlinear(4)\n"


@pytest.fixture
def stem_file(tmp_path):
    path = tmp_path / "stem.stack"
    path.write_text(STEM)
    return path


def test_resolve_file_prints_the_report(cli, stem_file, golden):
    code, out, err = cli("resolve", str(stem_file), "--input", "B,12",
                         "--input-dtype", "int64")
    assert code == 0 and err == ""
    golden("reference_stem.out", out)


def test_resolve_stdin(cli, golden):
    code, out, _ = cli("resolve", "-", "--input", "B,6,4",
                       stdin=b"pos_embed(64)\nlinear(8)\n")
    assert code == 0
    golden("reference_296.out", out)


def test_resolve_json(cli, stem_file):
    code, out, _ = cli("resolve", str(stem_file), "--input", "B,12", "--input-dtype",
                       "int64", "--json")
    data = json.loads(out)
    assert code == 0 and data["param_count"] == 8_580 and len(data["nodes"]) == 3


def test_stack_error_exits_1_with_the_message_on_stderr(cli, tmp_path, golden):
    path = tmp_path / "bad.stack"
    path.write_text("embedding(500, 16)\npos_embed(8)\n")
    code, out, err = cli("resolve", str(path), "--input", "B,12", "--input-dtype", "int64")
    assert (code, out) == (1, "")
    assert err.startswith("E_CONSTRAINT at line 2, col 1 (n1 pos_embed)")
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, words", [
    (["resolve", "nowhere.stack", "--input", "B,12"], "cannot read"),
    (["resolve", "-"], "--input"),
    (["resolve", "-", "--input", "B,12", "--dtype", "int8"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_usage_errors_exit_2(cli, argv, words):
    code, _, err = cli(*argv)
    assert code == 2 and words in err and "usage:" in err


@pytest.mark.parametrize("data, code_words", [
    (b"\xff\xfe\x00binary", "not UTF-8"),
    (b"", "empty"),
    (b"relu()\n" * 10, None),
])
def test_odd_stdin(cli, data, code_words):
    code, _, err = cli("resolve", "-", "--input", "B,4", stdin=data)
    if code_words is None:
        assert code == 0
    else:
        assert code == 1 and "E_PARSE" in err and code_words in err


def test_malformed_input_shape_is_a_stack_error(cli, stem_file):
    code, _, err = cli("resolve", str(stem_file), "--input", "B,,12")
    assert code == 1 and err.startswith("E_SHAPE")


def test_ops_lists_the_catalog(cli, golden):
    code, out, _ = cli("ops")
    assert code == 0
    golden("ops.out", out)
    code, out, _ = cli("ops", "--json")
    names = {op["name"] for op in json.loads(out)}
    assert {"pos_embed", "embedding", "attention"} <= names


def test_docs_writes_the_reference(cli, tmp_path):
    code, _, err = cli("docs", "--out", str(tmp_path / "docs"))
    assert code == 0 and "wrote" in err
    committed = Path(__file__).parent.parent / "docs" / "ops"
    for page in committed.glob("*.md"):
        assert (tmp_path / "docs" / page.name).read_text() == page.read_text()


def test_docs_leaves_other_files_alone(cli, tmp_path):
    (tmp_path / "README.md").write_text("mine")
    (tmp_path / "retired_op.md").write_text(Path(__file__).parent.parent.joinpath(
        "docs", "ops", "relu.md").read_text())  # a page an earlier version generated
    assert cli("docs", "--out", str(tmp_path))[0] == 0
    assert (tmp_path / "README.md").read_text() == "mine"
    assert not (tmp_path / "retired_op.md").exists()


def test_byte_order_mark_and_subcommand_usage(cli):
    code, out, _ = cli("resolve", "-", "--input", "B,12,16",
                       stdin="\ufeffpos_embed(32)\n".encode())
    assert code == 0 and "Parameters: 512" in out
    code, _, err = cli("resolve", "missing.stack", "--input", "B,12")
    assert code == 2 and err.startswith("usage: stacklab resolve")


def test_console_script_and_module_entry_points(tmp_path):
    """Both real entry points, as a user runs them: one process each."""
    bin_dir = Path(sys.executable).parent
    for command in ([str(bin_dir / "stacklab")], [sys.executable, "-m", "stacklab"]):
        done = subprocess.run([*command, "resolve", "-", "--input", "B,12", "--input-dtype",
                               "int64"], input=b"embedding(500, 16)\npos_embed(8)\n",
                              capture_output=True, timeout=120)
        assert done.returncode == 1
        assert b"E_CONSTRAINT" in done.stderr and b"Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "stacklab", "resolve", "-", "--input", "B,12",
                           "--input-dtype", "int64"], input=STEM.encode(), capture_output=True,
                          timeout=120)
    assert done.returncode == 0 and b"Parameters: 8,580" in done.stdout


def test_the_usage_text_names_every_flag_of_every_command():
    """The usage in `stacklab.cli`'s docstring stays complete as settings are added."""
    import re

    import stacklab.cli
    from stacklab.cli.flags import make_parser

    usage = stacklab.cli.__doc__
    commands = make_parser()._subparsers._group_actions[0].choices
    for name, command in commands.items():
        assert f"stacklab {name}" in usage
        flags = [a.option_strings[-1] for a in command._actions if a.option_strings]
        missing = [flag for flag in flags if flag != "--help"
                   and not re.search(re.escape(flag) + r"(?![\w-])", usage)]  # --seed: not --seeds
        assert not missing, f"{name}: {missing}"


def test_resolve_prints_a_branching_stack_with_its_inputs_column(cli, tmp_path, golden):
    from stacklab.ops.add import PRE_LN_BLOCK

    path = tmp_path / "pre_ln.stack"
    path.write_text(PRE_LN_BLOCK + "\n")
    code, out, err = cli("resolve", str(path), "--input", "B,64", "--input-dtype", "int64")
    assert code == 0 and err == ""
    golden("pre_ln_block.out", out)
    code, out, _ = cli("resolve", str(path), "--input", "B,64", "--input-dtype", "int64", "--json")
    assert code == 0 and json.loads(out)["nodes"][4]["reads"] == {"a": "x0", "b": "h1"}


def test_ops_shows_reference_arguments(cli):
    code, out, _ = cli("ops", "--json")
    add = next(op for op in json.loads(out) if op["name"] == "add")
    assert add["signature"] == "add(a, b)" and add["shape"] == "a[..., D], b[..., D] -> out[..., D]"


# -- every documented form of every flag (issue 29: `--target-accuracy none` was refused) --

import re  # noqa: E402

# What a flag's help documents as a value it takes: an example ("e.g. 16,32,64"), the
# words for off ("empty or none: ...", "none: ..."), or listed forms ("a range or a list:
# 0-4, or 0,1,2").
_EXAMPLE = re.compile(r"e\.g\. (\S+?)[,;)]?(?:\s|$)")
_OFF = re.compile(r"(?:^|; )(empty or none|none): ")
_LISTED = re.compile(r"or a list: (\S+), or (\S+?)[ ;(]")


def documented_forms(help_text: str) -> list[str]:
    """The values ``help_text`` shows a flag taking, as a user would type them."""
    help_text = " ".join(help_text.split())
    forms = [match.group(1) for match in _EXAMPLE.finditer(help_text)]
    for match in _OFF.finditer(help_text):
        forms += ["", "none"] if match.group(1) == "empty or none" else ["none"]
    for match in _LISTED.finditer(help_text + " "):
        forms += list(match.groups())
    return forms


def _documented():
    """``(command, flag, form)`` for every form the help of every flag documents, its
    choices included."""
    from stacklab.cli.flags import make_parser

    commands = make_parser()._subparsers._group_actions[0].choices
    for command, parser in commands.items():
        for action in parser._actions:
            if not action.option_strings or action.help in (None, "==SUPPRESS=="):
                continue
            flag = action.option_strings[-1]
            for form in dict.fromkeys([*documented_forms(action.help), *(action.choices or ())]):
                yield command, flag, form


DOCUMENTED = list(_documented())


def test_the_help_texts_document_the_forms_a_user_reads():
    """The parse of the help finds what `--help` shows (a parser that found nothing would
    make the next test pass on nothing)."""
    found = {(command, flag): [] for command, flag, _ in DOCUMENTED}
    for command, flag, form in DOCUMENTED:
        found[(command, flag)].append(form)
    assert found[("train", "--target-accuracy")] == ["", "none"]
    assert found[("train", "--eval-lengths")] == ["16,32,64"]
    assert found[("sweep", "--seeds")] == ["0-4", "0,1,2"]
    assert found[("resolve", "--input")] == ["B,12"]
    assert found[("share", "--pin")] == ["none"]
    assert found[("share", "--host")] == ["http://10.0.0.5:8501"]
    assert found[("train", "--device")] == ["auto", "cpu", "cuda", "mps"]


def _run_form(command: str, flag: str, form: str, tmp_path, cli):
    """Run ``command`` with ``flag form`` as far as it goes without training: the whole
    command for resolve and share; for train and sweep every check they make before they
    train (the run planned, the seeds read). The error, or None."""
    from stacklab import StackError
    from stacklab.cli import sweep
    from stacklab.cli.flags import config_from, make_parser
    from stacklab.lab.train.trainer import Trainer

    stack = tmp_path / "stem.stack"
    stack.write_text(STEM)
    given = [flag, form] if flag not in ("--json", "--full") else [flag]
    base = {"resolve": [str(stack), "--input", "B,12", "--input-dtype", "int64"],
            "train": ["--task", "reverse", "--out", str(tmp_path / "r")],
            "sweep": ["--task", "reverse", "--stack", str(stack), "--out", str(tmp_path / "s")],
            "share": ["--task", "reverse", "--host", "http://10.0.0.5:8501"]}[command]
    argv = [command, *base, *given]
    if command in ("resolve", "share"):
        code, _, err = cli(*argv)
        return None if code == 0 else err
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
        if command == "sweep":
            sweep._seeds(args.seeds, parser)
        config = config_from(args)
        if config.device not in (None, "auto", "cpu"):  # a device this machine may lack
            return None if config.filled().device == config.device else "device"
        Trainer(None, config)  # the run as `train` plans it before its first step
    except (SystemExit, StackError) as err:
        return str(err) or "usage error"
    return None


@pytest.mark.parametrize("command, flag, form", [
    case for case in DOCUMENTED if case[0] in ("train", "sweep", "share", "resolve")
    and not (case[1] == "--input-dtype")  # a dtype choice, not an example: the stem takes ids
])
def test_every_documented_form_of_every_flag_works(command, flag, form, tmp_path, cli):
    assert _run_form(command, flag, form, tmp_path, cli) is None


def test_train_with_target_accuracy_none_trains_every_step(cli, tmp_path):
    """The help's "none: train every step", run: every step is taken although the run
    reaches its accuracy long before (the preset would stop there)."""
    code, _, err = cli("train", "--task", "position", "--steps", "60", "--target-accuracy",
                       "none", "--out", str(tmp_path / "r"))
    assert code == 0, err
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["step"] == 60 and run["config"]["target_accuracy"] is None
