"""The classroom link (`stacklab.serve.links.share`): built from an experiment, read back by the
app's own URL parsing, the address students can reach, the QR code and the projector's
figure; `stacklab share`; and the pages (AppTest): the share panel, the student view and
``view=present``."""

from __future__ import annotations

import struct
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as strategies
from streamlit.testing.v1 import AppTest

from stacklab import StackError
from stacklab.lab.tasks import TASKS
from stacklab.serve.links import addresses, qr, share
from stacklab.serve.links.experiment import DEFAULT, HIDEABLE, from_query
from stacklab.serve.links.link_table import LINK_VALUES
from stacklab.serve.links.addresses import share_address
from stacklab.serve.links.projector import present_figure
from stacklab.serve.links.share import ALL_PINS, check_base_url, classroom_link, experiment_of_link

KEY = "0123456789abcdef0123456789abcdef"
BASE = "http://10.0.0.5:8501"
APP = str(Path(__file__).parent.parent / "app.py")

# --- the link --------------------------------------------------------------------------


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("pins", [ALL_PINS, (), ("task", "steps", "layers")])
def test_every_task_preset_round_trips_through_the_apps_parser(task, pins):
    experiment = replace(DEFAULT.with_task_preset(task), seed=7, lr=0.0123, eval_lengths="32,16")
    link = classroom_link(experiment, BASE + "/", pinned=pins, run_key=KEY)
    assert link.startswith(f"{BASE}/train?task={task}&")
    back, run_key, problems = experiment_of_link(link)
    assert (back, run_key, problems) == (replace(experiment, hide=tuple(pins)), KEY, [])
    assert f"run={KEY}" in link and ("hide=" in link) == bool(pins)


@given(stack=strategies.text(max_size=300), seed=strategies.integers(0, 2**31 - 1))
def test_any_stack_text_round_trips(stack, seed):
    """Newlines, &, #, +, %, = and any Unicode in a stack come back as typed."""
    experiment = replace(DEFAULT, stack=stack, seed=seed)
    back, _, problems = experiment_of_link(classroom_link(experiment, BASE, pinned=("stack",)))
    assert (back, problems) == (replace(experiment, hide=("stack",)), [])


def test_the_link_leaves_out_what_follows_from_the_task():
    assert classroom_link(DEFAULT, BASE) == f"{BASE}/train?task=reverse&hide=" + ",".join(HIDEABLE)
    custom = replace(DEFAULT.with_task_preset("shift"), stack="linear(4)", steps=123)
    query = dict(parse_qsl(urlsplit(classroom_link(custom, BASE, pinned=())).query))
    assert query == {"task": "shift", "stack": "linear(4)", "steps": "123"}
    assert classroom_link(DEFAULT, BASE, pinned=("steps", "task"), page="build") == \
        f"{BASE}/?task=reverse&hide=task,steps"  # pins in the app's order


def test_the_link_as_a_page_opens_it_is_the_same_experiment():
    """The link's query given to the real app (AppTest): its session holds that experiment
    and keeps the link's values in its address."""
    experiment = replace(DEFAULT.with_task_preset("modular"), seed=11, weight_decay=0.5)
    link = classroom_link(experiment, BASE, pinned=("seed", "stack"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(dict(parse_qsl(urlsplit(link).query)))
    at.run()
    assert not at.exception and not at.warning
    assert at.session_state["experiment"] == replace(experiment, hide=("stack", "seed"))


@pytest.mark.parametrize("call, code, words", [
    (lambda: classroom_link(DEFAULT, BASE, pinned=("stack", "colour")), "E_ARG", "'colour'"),
    (lambda: classroom_link(DEFAULT, "10.0.0.5:8501"), "E_VALUE", "http://HOST:PORT"),
    (lambda: classroom_link(DEFAULT, "ftp://h/"), "E_VALUE", "not the address"),
    (lambda: classroom_link(DEFAULT, "http://h:99999"), "E_VALUE", "not the address"),
    (lambda: classroom_link(DEFAULT, "http://h/?x=1"), "E_VALUE", "not the address"),
    (lambda: classroom_link(DEFAULT, BASE, run_key="../etc"), "E_VALUE", "not a run key"),
    (lambda: classroom_link(replace(DEFAULT, steps=50_000), BASE), "E_ARG", "steps='50000'"),
    (lambda: classroom_link(replace(DEFAULT, stack="x" * 9000), BASE), "E_VALUE", "at most 8,000"),
    (lambda: classroom_link(DEFAULT, BASE, page="catalogue"), "E_VALUE", "page 'catalogue'"),
])
def test_what_no_link_can_carry_is_a_stack_error(call, code, words):
    with pytest.raises(StackError) as caught:
        call()
    assert caught.value.code == code and words in str(caught.value) and caught.value.hint


def test_base_urls_keep_their_path_and_lose_the_trailing_slash():
    assert check_base_url(" https://lab.example.org/stacklab/ ") == "https://lab.example.org/stacklab"
    assert check_base_url("http://[fe80::1]:8501") == "http://[fe80::1]:8501"


def test_view_values_and_everything_pinned():
    assert LINK_VALUES["view"].parse("present") == ("present", None)
    assert "not one of present" in LINK_VALUES["view"].parse("huge")[1]
    assert share.pins_everything(replace(DEFAULT, hide=ALL_PINS))
    assert not share.pins_everything(replace(DEFAULT, hide=ALL_PINS[:-1]))


# --- the address students can reach ----------------------------------------------------


@pytest.mark.parametrize("listen, host, lan, base, warned", [
    ("127.0.0.1", "127.0.0.1:8501", "10.0.0.5", "http://127.0.0.1:8501", "127.0.0.1 only"),
    ("localhost", None, None, "http://localhost:8501", "localhost only"),
    ("::1", "[::1]:8501", None, "http://[::1]:8501", "::1 only"),
    ("0.0.0.0", "127.0.0.1:8501", "10.0.0.5", "http://10.0.0.5:8501", None),
    ("", "localhost:8501", "10.0.0.5", "http://10.0.0.5:8501", None),  # Streamlit's default
    (None, "10.1.2.3:8501", "10.0.0.5", "http://10.1.2.3:8501", None),  # as the teacher came
    ("0.0.0.0", "lab.school.org", None, "http://lab.school.org", None),
    ("192.168.1.20", "127.0.0.1:8501", "10.0.0.5", "http://192.168.1.20:8501", None),
    ("0.0.0.0", "127.0.0.1:8501", None, "http://127.0.0.1:8501", "no address on a network"),
])
def test_the_address_students_can_reach(listen, host, lan, base, warned):
    address = share_address(listen, host, port=8501, lan=lan)
    assert address.base == base
    if warned is None:
        assert address.warning is None and address.fix is None
    else:
        assert warned in address.warning and address.fix


def test_a_server_on_loopback_says_the_command_that_fixes_it():
    address = share_address("127.0.0.1", "127.0.0.1:8501")
    assert address.fix == "make run HOST=0.0.0.0"
    assert "--server.address 0.0.0.0" in address.warning


def test_this_machines_network_address_is_not_loopback():
    found = addresses.lan_address()
    assert found is None or not addresses.is_loopback(found)


def test_the_qr_code_is_a_png_of_the_links_symbol():
    import segno

    link = classroom_link(DEFAULT, BASE, run_key=KEY)
    png = qr.qr_png(link, scale=4)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    side = (segno.make(link, error="m", micro=False).symbol_size(scale=4, border=4))
    assert (width, height) == side
    assert qr.qr_png(link + "x", scale=4) != png


def commented_preset(chars: int) -> str:
    """The preset of task position with a teacher's notes above it, ``chars`` long."""
    stack, step = TASKS["position"].preset(16), 0
    note = "# step {}: each position gets its own row of the table\n"
    while len(stack) + len(note.format(step)) + 2 <= chars:
        stack, step = note.format(step) + stack, step + 1
    return stack + "\n#" + "x" * (chars - len(stack) - 2)


def test_a_link_longer_than_a_qr_code_holds_is_an_e_value():
    """A QR code at error level M holds 2,331 bytes: a 2,144-character link fits, the link
    of a commented preset of 2,144 characters does not, and says so as a `StackError`."""
    experiment = DEFAULT.with_task_preset("position")
    fits = classroom_link(replace(experiment, stack=commented_preset(1200)), BASE)
    fits += "#" * (2144 - len(fits))  # made 2,144 long by a fragment, which is not sent
    assert len(fits) == 2144 and qr.qr_png(fits)[:4] == b"\x89PNG"
    link = classroom_link(replace(experiment, stack=commented_preset(2144)), BASE)
    with pytest.raises(StackError) as caught:
        qr.qr_png(link)
    assert caught.value.code == "E_VALUE" and f"{len(link):,} characters" in str(caught.value)
    assert "as text" in caught.value.hint


# --- the projector's figure ------------------------------------------------------------


def test_the_projector_figure_is_large_square_and_leaves_the_original_alone():
    import torch

    from stacklab.lab.figures.heatmaps import positional_attention_heatmap

    original = positional_attention_heatmap(torch.eye(16), "n1")
    shown = present_figure(original)
    assert original.layout.width is None and original.layout.font.size is None
    layout, margin = shown.layout, shown.layout.margin
    assert layout.width - margin.l - margin.r == layout.height - margin.t - margin.b  # square
    for axis in (layout.xaxis, layout.yaxis):
        assert axis.tickfont.size >= 18 and axis.title.font.size >= 18
    colorbar = shown.data[0].colorbar
    assert colorbar.tickfont.size >= 18 and colorbar.title.font.size >= 18
    assert layout.title.font.size >= 24 and "T = 16" in layout.title.text


def test_a_long_title_wraps_at_spaces_on_the_projector():
    import torch

    from stacklab.lab.figures.heatmaps import rows_alone_heatmap

    shown = present_figure(rows_alone_heatmap(torch.eye(8), "table&amp;"))
    lines = shown.layout.title.text.split("<br>")
    assert len(lines) >= 2 and all(len(line) <= 48 for line in lines)
    assert shown.layout.margin.t >= 40 + 36 * len(lines)


# --- stacklab share ------------------------------------------------------------------------


def test_cli_share_prints_the_classroom_link(cli):
    code, out, err = cli("share", "--task", "reverse", "--host", "http://10.0.0.5:8501")
    assert (code, err) == (0, "")
    assert out == f"{BASE}/train?task=reverse&hide={','.join(HIDEABLE)}\n"
    code, out, _ = cli("share", "--task", "shift", "--seed", "3", "--steps", "300", "--pin",
                       "task,seed", "--run", KEY, "--host", "http://10.0.0.5:8501/")
    assert out == f"{BASE}/train?task=shift&steps=300&seed=3&hide=task,seed&run={KEY}\n"
    assert experiment_of_link(out.strip())[0] == replace(
        DEFAULT.with_task_preset("shift"), steps=300, seed=3, hide=("task", "seed"))


def test_cli_share_of_a_run_prints_the_short_class_link_and_its_qr_code(cli, tmp_path):
    """issue 35: with every control pinned, a run's link is the run alone, as the share
    dialog gives it (not the experiment with a 200-character ``hide=``), and its QR code is
    the dialog's: the same scale, a small symbol."""
    import segno

    code, out, _ = cli("share", "--task", "reverse", "--run", KEY, "--qr",
                       str(tmp_path / "qr.png"), "--host", BASE)
    assert (code, out) == (0, f"{BASE}/train?run={KEY}\n")  # not in this machine's store
    assert len(out.strip()) - len(BASE) <= 60
    png = (tmp_path / "qr.png").read_bytes()
    assert png == qr.qr_png(out.strip()) and qr.QR_SCALE == 10
    side = segno.make(out.strip(), error="m", micro=False).symbol_size(scale=10, border=4)
    assert struct.unpack(">II", png[16:24]) == side
    assert side[0] <= (37 + 8) * 10  # version 5 at most (the link with hide= took version 11)
    code, out, _ = cli("share", "--task", "reverse", "--run", KEY[:8], "--host", BASE)
    assert out == f"{BASE}/train?run={KEY[:8]}\n"
    code, _, err = cli("share", "--task", "reverse", "--qr", str(tmp_path / "no" / "qr.png"),
                       "--host", BASE)
    assert code == 2 and "cannot write" in err


def test_cli_share_reads_a_stack_file_and_pins_nothing_on_request(cli, tmp_path):
    stack = tmp_path / "stack.txt"
    stack.write_text("embedding(16, 32)\npos_embed(16)\nlinear(16)\n")
    code, out, _ = cli("share", str(stack), "--task", "reverse", "--input", "B,16",
                       "--pin", "none", "--page", "explore", "--host", "https://lab.example.org")
    assert code == 0 and out.startswith("https://lab.example.org/explore?task=reverse&stack=")
    assert "hide=" not in out
    experiment, _, problems = experiment_of_link(out.strip())
    assert experiment.stack == stack.read_text() and not problems


def test_cli_share_errors(cli):
    code, _, err = cli("share", "--task", "reverse", "--host", "10.0.0.5")
    assert code == 1 and "E_VALUE" in err and "http://HOST:PORT" in err
    code, _, err = cli("share", "--task", "reverse", "--steps", "50000", "--host", BASE)
    assert code == 1 and "E_ARG" in err and "steps='50000'" in err and "using" not in err
    code, _, err = cli("share", "--task", "reverse", "--pin", "stack,nope", "--host", BASE)
    assert code == 1 and "'nope'" in err
    code, out, err = cli("share", "--task", "reverse", "--host", "http://127.0.0.1:8501")
    assert code == 0 and out.startswith("http://127.0.0.1:8501/train?") and "HOST=0.0.0.0" in err
    code, _, err = cli("share", "--host", BASE)
    assert code == 2 and "--task" in err


# --- the pages (AppTest) -------------------------------------------------------------------


def app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def texts(at) -> str:
    return " ".join(e.value for kind in ("info", "success", "warning", "error", "caption",
                                         "markdown") for e in getattr(at, kind))


def wait_for_finished(at, timeout=90.0) -> None:
    deadline = time.monotonic() + timeout
    while "Status: **finished**" not in texts(at):
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.2)
        at.run()


def popovers(at) -> list[str]:
    """The labels of the page's popovers (the share panel is one)."""
    found, nodes = [], [at.main]
    while nodes:
        node = nodes.pop()
        if getattr(node, "type", "") == "popover":
            found.append(node.proto.popover.label)
        nodes.extend(getattr(node, "children", {}).values())
    return found


def open_share_panel(at) -> None:
    at.session_state["train_share"] = True  # the popover beside Train, opened
    at.run()


def share_link(at) -> str:
    [link] = [c.value for c in at.code if c.value.startswith("http")]
    return link


@pytest.fixture
def listening_on(monkeypatch):
    """Set Streamlit's ``server.address`` for one test."""
    from streamlit import config

    def listen(address):
        before = config.get_option("server.address")
        config.set_option("server.address", address)
        monkeypatch.undo = lambda: config.set_option("server.address", before)
        return address

    yield listen
    monkeypatch.undo()


def test_the_share_panel_gives_the_link_and_then_its_run(listening_on, cli, tmp_path):
    listening_on("0.0.0.0")
    teacher = app(task="position", steps="60", seed="41")
    teacher.switch_page("views/train.py").run()
    open_share_panel(teacher)
    before = share_link(teacher)
    assert f"hide={','.join(HIDEABLE)}" in before and "run=" not in before
    assert "Press Train first" in texts(teacher) and not teacher.warning
    assert teacher.get("image")  # the QR code
    teacher.multiselect(key="train_share_pins").set_value(["task", "steps"]).run()
    assert share_link(teacher).endswith("hide=task,steps")
    teacher.button(key="train_train").click().run()
    wait_for_finished(teacher)
    key = teacher.query_params["run"]
    link = share_link(teacher)
    assert link.endswith(f"hide=task,steps&run={key}")
    assert experiment_of_link(link)[0] == replace(from_query(
        {"task": "position", "steps": "60", "seed": "41"})[0], hide=("task", "steps"))
    assert teacher.metric[0].value == "1"  # this session
    teacher.multiselect(key="train_share_pins").set_value(list(HIDEABLE)).run()
    short = share_link(teacher)
    base = short.split("/train?")[0]
    assert short == f"{base}/train?run={key[:8]}"  # every control pinned: the run alone
    # issue 35: the command line gives the same link, and the same QR code
    code, out, _ = cli("share", "--task", "position", "--run", key, "--qr",
                       str(tmp_path / "qr.png"), "--host", base)
    assert (code, out) == (0, short + "\n")
    assert (tmp_path / "qr.png").read_bytes() == teacher.session_state["train_share_qr"][1]
    teacher.multiselect(key="train_share_pins").set_value(["task", "steps"]).run()
    student = app(**dict(parse_qsl(urlsplit(link).query)))
    student.switch_page("views/train.py").run()
    teacher.run()
    assert teacher.metric[0].value == "2"


def test_a_server_on_loopback_warns_with_the_command_that_fixes_it(listening_on):
    listening_on("127.0.0.1")
    at = app(task="position")
    at.switch_page("views/train.py").run()
    open_share_panel(at)
    assert "listens on 127.0.0.1 only" in at.warning[0].value
    assert "make run HOST=0.0.0.0" in [c.value for c in at.code]


def test_a_link_too_long_for_a_qr_code_is_shown_as_text_and_the_run_status_stays():
    """Issue 28: a commented preset's link is longer than a QR code holds; the share panel
    shows the link with a note instead of the code, and the run's status below it stays,
    on every rerun while the panel is open."""
    stack = commented_preset(2144)
    at = app(task="position", steps="30", seed="47", stack=stack, input="B,16",
             input_dtype="int64")
    at.switch_page("views/train.py").run()
    open_share_panel(at)
    assert not at.exception
    link = share_link(at)
    assert len(link) > 2336 and not at.get("image")  # past what a QR code holds
    assert "more than a QR code holds" in texts(at) and "copy it" in texts(at)
    assert "No run yet" in texts(at)
    at.button(key="train_train").click().run()
    wait_for_finished(at)
    at.run()
    assert not at.exception and "Status: **finished**" in texts(at)
    # issue 30: once the run exists the class link names it alone, so even this stack's
    # link fits a QR code (before issue 30 the note stayed: the link carried the stack)
    assert share_link(at).endswith(f"/train?run={at.query_params['run'][:8]}")
    assert "more than a QR code holds" not in texts(at) and at.get("image")


def teachers_run(task="position", steps="60", seed="43") -> tuple[str, str]:
    """A teacher trains on one server and shares the whole experiment: (link, key)."""
    teacher = app(task=task, steps=steps, seed=seed)
    teacher.switch_page("views/train.py").run()
    teacher.button(key="train_train").click().run()
    wait_for_finished(teacher)
    open_share_panel(teacher)
    return share_link(teacher), teacher.query_params["run"]


def test_a_student_on_the_teachers_link_sees_the_shared_run_with_nothing_to_press():
    link, key = teachers_run()
    student = app(**dict(parse_qsl(urlsplit(link).query)))
    student.switch_page("views/train.py").run()
    assert not student.exception and student.query_params["run"] == key
    assert "The shared run" in student.info[0].value and "teacher's link" in student.info[0].value
    assert not [b for b in student.button if b.key in ("train_train", "train_stop")]
    assert "Share with the class" not in popovers(student)
    assert "Status: **finished**" in texts(student)
    [pins] = [c.value for c in student.caption if "Set by the link" in c.value]
    assert "eval_lengths" not in pins and not pins.rstrip().endswith("=")
    assert "target_accuracy = " in pins
    # the pattern figure as a still picture first (on screen before plotly loads), the
    # interactive chart one switch away; the curves stay a chart
    charts = [c.proto.id for c in student.get("plotly_chart")]
    assert len(charts) == 1, charts
    [still] = [m.value for m in student.markdown if "data:image/svg+xml," in m.value]
    assert still.startswith("<img ") and 'alt="Each row' in still
    student.toggle(key="train_pattern_hover").set_value(True).run()
    assert len(student.get("plotly_chart")) == 2 and not student.exception
    student.switch_page("views/build.py").run()
    assert "Read-only" in student.info[0].value and "shared run" in student.info[0].value
    assert not [t for t in student.text_area if t.key == "build_stack"]
    student.switch_page("views/explore.py").run()
    assert not student.exception
    page = texts(student)
    assert "The shared run, trained by the teacher's link: task **position**" in page
    assert "Your latest run" not in page and "not training it" in page


def test_a_link_that_pins_some_controls_keeps_train_but_not_as_the_main_action():
    link, key = teachers_run(seed="44")
    query = dict(parse_qsl(urlsplit(link).query))
    query["hide"] = "task,steps"
    student = app(**query)
    student.switch_page("views/train.py").run()
    assert student.button(key="train_train").proto.type == "secondary"
    assert "the link you opened" in texts(student)
    student.number_input(key="train_seed").set_value(45).run()  # their own experiment now
    assert student.button(key="train_train").proto.type == "primary"


def test_view_present_puts_the_pattern_figure_first_and_large():
    _, key = teachers_run(seed="46")
    at = app(task="position", steps="60", seed="46", run=key, view="present")
    at.switch_page("views/train.py").run()
    assert not at.exception and at.query_params["view"] == "present"
    charts = at.get("plotly_chart")
    import json

    first = json.loads(charts[0].proto.spec)  # the first chart on the page: the projector's
    assert first["layout"]["xaxis"]["tickfont"]["size"] >= 18
    assert len(charts) == 2  # the curves below; the pattern figure is not drawn twice
    assert any(m.value.startswith("## ") for m in at.markdown)  # the score, large
    at.switch_page("views/explore.py").run()
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["width"] > 700
    bad = app(task="position", view="huge")
    assert "view='huge' is not one of present" in bad.warning[0].value
    bad.switch_page("views/train.py").run()
    assert "view" not in bad.query_params


# --- the class (SPEC §22): students follow the teacher's step -----------------------------


def test_students_follow_the_teachers_step_within_one_poll():
    """A teacher and five browserless students, each polling the class as a page does
    (every POLL seconds): when the teacher moves to step 3, every student reads step 3
    within one poll interval; a student's move is refused."""
    import threading
    import time

    from stacklab.serve.classroom.classes import Classes

    POLL = 0.05
    classes = Classes(ttl_seconds=60)
    opened = classes.open("why_positions")
    seen: dict[int, float] = {}
    stop = threading.Event()

    def student(number: int) -> None:
        while not stop.is_set():
            view = classes.follow(opened.id)
            if view is not None and view.step == 3 and number not in seen:
                seen[number] = time.monotonic()
            time.sleep(POLL)

    students = [threading.Thread(target=student, args=(n,)) for n in range(5)]
    for thread in students:
        thread.start()
    for step in (1, 2):
        classes.move(opened.id, opened.token, step)
        time.sleep(POLL)
    assert not seen  # nobody is ahead of the teacher
    moved = time.monotonic()
    assert classes.move(opened.id, opened.token, 3).step == 3
    time.sleep(POLL * 3)
    stop.set()
    for thread in students:
        thread.join()
    assert sorted(seen) == list(range(5))
    assert max(seen.values()) - moved <= POLL * 2  # one poll, and the scheduler's slack
    with pytest.raises(StackError, match="only the teacher's session"):
        classes.move(opened.id, "a student's guess", 0)
    assert opened.token not in opened.id and len(opened.id) == 8  # the link names the id only


def test_a_class_ends_when_its_teacher_is_gone_for_its_ttl():
    from stacklab.serve.classroom.classes import Classes

    now = [0.0]
    classes = Classes(ttl_seconds=30, clock=lambda: now[0])
    opened = classes.open("why_positions")
    now[0] = 25
    assert classes.heartbeat(opened.id, opened.token)  # the teacher's page ran
    now[0] = 50
    assert classes.follow(opened.id).lesson == "why_positions"  # a student left and rejoined
    now[0] = 56
    assert classes.follow(opened.id) is None and len(classes) == 0
    with pytest.raises(StackError, match="has ended"):
        classes.move(opened.id, opened.token, 1)
    other = classes.open("x")
    with pytest.raises(StackError, match="not a lesson step"):
        classes.move(other.id, other.token, -1)


# --- the short class link (SPEC §22) ------------------------------------------------------


def test_the_class_link_names_the_run_alone_and_fits_a_small_qr_code():
    import segno

    from stacklab.serve.links.share import class_link, resolve_key, short_key

    other = KEY[:8] + "f" * 24
    link = class_link("http://192.168.100.200:8501", KEY, known=[KEY])
    assert link == f"http://192.168.100.200:8501/train?run={KEY[:8]}"
    assert len(link.split(":8501", 1)[1]) <= 60
    code = segno.make(link, error="m", micro=False)
    assert code.version <= 4 and code.symbol_size(scale=1, border=0)[0] <= 33
    # a start another run shares is not used: the whole key then
    assert short_key(KEY, [KEY, other]) == KEY and KEY in class_link(BASE, KEY, known=[KEY, other])
    assert class_link(BASE, KEY, known=[KEY], pinned=("task",)).endswith("&hide=task")
    assert resolve_key(KEY[:8], [KEY]) == (KEY, None)
    assert "start of 2 runs" in resolve_key(KEY[:8], [KEY, other])[1]
    assert "not on this server" in resolve_key("abcdef12", [KEY])[1]
    assert "not a run key" in resolve_key("2f79", [KEY])[1]


def test_run_alone_pins_everything_and_compare_takes_the_key_starts_the_app_shows():
    link = experiment_of_link(f"{BASE}/train?run={KEY[:8]}")
    assert link[0].hide == tuple(HIDEABLE) and link[1] == KEY[:8] and link[2] == []
    assert experiment_of_link(f"{BASE}/train?run={KEY}&hide=task")[0].hide == ("task",)
    from stacklab.serve.links.link_table import parse_compare

    assert parse_compare("2f79848c,78248499") == (["2f79848c", "78248499"], None)
    assert "is not a run key" in parse_compare("2f79,78248499")[1]


def test_present_mode_on_induction_shows_the_best_heads_attention_then_the_head_grid():
    """issue 30: for induction, present mode's first figure is the best head's attention
    pattern on the fixed 0-1 scale; the head-score grid is one step away; no settings."""
    import json

    _, key = teachers_run(task="induction", steps="40", seed="48")
    at = app(run=key, view="present")
    at.switch_page("views/train.py").run()
    assert not at.exception and not at.number_input and not at.title
    first = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "best induction head" in first["layout"]["title"]["text"]
    assert first["data"][0]["zmin"] == 0 and first["data"][0]["zmax"] == 1
    assert first["layout"]["title"]["text"].count("<br>") <= 1
    at.button(key="present_next").click().run()
    nxt = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "Head scores" in nxt["layout"]["title"]["text"] or "head" in nxt["layout"]["title"]["text"].lower()
    at.button(key="present_leave").click().run()
    assert "view" not in at.query_params


def test_a_class_presented_from_loopback_says_no_phone_can_open_it_and_how_to_fix_it(
        listening_on):
    """Issue 42: the present panel's QR code is marked unreachable, and the exact command
    that serves the room stands beside it; served for the room, neither shows."""
    from test_app import lesson_page

    listening_on("127.0.0.1")
    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    assert not teacher.exception
    assert "No phone can open this link" in teacher.warning[0].value
    assert "listens on 127.0.0.1 only" in teacher.warning[0].value
    assert "make run HOST=0.0.0.0" in [c.value for c in teacher.code]
    captions = " ".join(i.caption for e in teacher.get("image") for i in e.proto.imgs)
    assert "Unreachable: no phone can open this QR code" in captions
    listening_on("0.0.0.0")
    teacher.run()
    captions = " ".join(i.caption for e in teacher.get("image") for i in e.proto.imgs)
    assert not teacher.warning and "Scan to follow" in captions and "Unreachable" not in captions


def test_make_run_prints_the_link_students_open_or_that_none_can():
    """Issue 42: ``make run`` says, as it starts, the link for the room (or that the server
    listens on this machine only, and the command that serves the room)."""
    import subprocess

    from stacklab.serve.links.addresses import lan_address

    root = Path(__file__).parent.parent
    for host, said in (("127.0.0.1", "no phone can open it. For a classroom: make run HOST="
                        "0.0.0.0 PORT=8601"),
                       ("0.0.0.0", f"students open http://{lan_address()}:8601")):
        planned = subprocess.run(["make", "-n", "run", f"HOST={host}", "PORT=8601"], cwd=root,
                                 capture_output=True, text=True, check=True).stdout
        note = next(line for line in planned.splitlines() if "serving_note" in line)
        printed = subprocess.run(note, shell=True, cwd=root, capture_output=True, text=True)
        if lan_address() is None and host == "0.0.0.0":
            said = "no network address found"
        assert said in printed.stdout, (planned, printed)
