"""A class's votes (issue 36, peer instruction): the vote store's bounds and forged votes
(`stacklab.serve.classroom.votes` through `Classes`), the CSV that names no student, and the pages:
a following student's prediction as a vote, the teacher's projector, the class summary."""

from __future__ import annotations

import csv
import io

import pytest

from stacklab.core.errors import StackError
from stacklab.serve.classroom.classes import Classes
from stacklab.serve.classroom.votes import (FOLLOWING_SECONDS, MAX_VOTERS, VOTES_PER_SECOND, by_step,
                                  votes_csv)

CHOICES = ("below 0.9", "at least 0.9")


_ROOM: dict = {}  # the room's classes and class id, and the identities it issued


@pytest.fixture
def room(clock):
    """A class on step 2 of ``positions`` whose teacher opened its vote, and its clock."""
    classes = Classes(ttl_seconds=3600, clock=clock)
    opened = classes.open("positions", 2)
    classes.open_vote(opened.id, opened.token, CHOICES)
    _ROOM.clear()
    _ROOM.update(classes=classes, id=opened.id)
    return classes, opened, clock


def counts(classes, opened) -> tuple[int, ...]:
    return classes.tally(opened.id, opened.token).latest.counts


def voter(n: int) -> str:
    """Student ``n``'s voter identity, issued by the room's class as its page gets one (each
    student on a phone of its own: an address each)."""
    if n not in _ROOM:
        _ROOM[n] = _ROOM["classes"].issue_voter(_ROOM["id"], f"10.0.{n // 250}.{n % 250}")
    return _ROOM[n]


def test_each_session_votes_once_and_its_last_vote_counts(room):
    classes, opened, clock = room
    assert classes.follow(opened.id).round == 1 and classes.follow(opened.id).voting
    assert classes.vote(opened.id, voter(1), 2, CHOICES[0]) == 1
    classes.vote(opened.id, voter(2), 2, CHOICES[1])
    clock.now += 0.4
    classes.vote(opened.id, voter(1), 2, CHOICES[1])  # changed before the reveal
    assert counts(classes, opened) == (0, 2)
    classes.open_vote(opened.id, opened.token, CHOICES)  # the teacher's page again: no reset
    assert counts(classes, opened) == (0, 2)


@pytest.mark.parametrize("forge, says", [
    (lambda c, o: c.vote(o.id, voter(9), 2, "half of it"), "'half of it' is not a choice"),
    (lambda c, o: c.vote(o.id, voter(9), 1, CHOICES[0]), "step 1 is not the class's current"),
    (lambda c, o: c.vote(o.id, voter(9), "2", CHOICES[0]), "is not the class's current"),
    (lambda c, o: c.vote("00000000", voter(9), 2, CHOICES[0]), "class '00000000' has ended"),
    (lambda c, o: c.vote(o.id, "x", 2, CHOICES[0]), "not a voter this server issued"),
    (lambda c, o: c.vote(o.id, "<script>" * 3, 2, CHOICES[0]), "not a voter this server"),
    (lambda c, o: c.vote(o.id, "session-000009", 2, CHOICES[0]), "not a voter this server"),
    (lambda c, o: c.vote(o.id, voter(9)[:-2] + "AA", 2, CHOICES[0]), "not a voter this"),
    (lambda c, o: c.vote(o.id, voter(9), 2, ["a list"]), "is not a choice"),
    (lambda c, o: c.reveal(o.id, "a student's guess"), "only the teacher's session"),
    (lambda c, o: c.vote_again(o.id, "a student's guess"), "only the teacher's session"),
    (lambda c, o: c.tally(o.id, "a student's guess"), "only the teacher's session"),
    (lambda c, o: c.outcome(o.id, o.token, 0.93, "something else"), "is not a choice of step 2"),
    (lambda c, o: c.open_vote(o.id, o.token, ("one",)) and c.move(o.id, o.token, 3)
     and c.open_vote(o.id, o.token, ("one",)), "2 to 8 different choices"),
])
def test_a_forged_vote_is_refused_with_a_code_a_place_and_a_fix_and_counts_nothing(room, forge,
                                                                                  says):
    classes, opened, _ = room
    classes.vote(opened.id, voter(1), 2, CHOICES[0])
    with pytest.raises(StackError) as refused:
        forge(classes, opened)
    err = refused.value
    assert err.code == "E_VALUE" and says in err.message and err.hint, err
    assert err.place.startswith(("class ", "step ", "the vote")) or "teacher" in err.message
    assert classes.rounds(opened.id, opened.token)[0].counts == (1, 0)
    assert len(classes.rounds(opened.id, opened.token)) == 1


def test_a_vote_on_a_revealed_round_is_refused_until_the_teacher_asks_again(room):
    classes, opened, clock = room
    classes.vote(opened.id, voter(1), 2, CHOICES[0])
    revealed = classes.reveal(opened.id, opened.token)
    assert revealed.revealed and not classes.follow(opened.id).voting
    with pytest.raises(StackError, match="revealed the answer of round 1") as refused:
        classes.vote(opened.id, voter(2), 2, CHOICES[1])
    assert refused.value.place == "step 2"
    classes.outcome(opened.id, opened.token, 0.93, CHOICES[1])
    again = classes.vote_again(opened.id, opened.token)
    assert again.round == 2 and again.counts == (0, 0) and classes.follow(opened.id).voting
    clock.now += 1
    classes.vote(opened.id, voter(1), 2, CHOICES[1])  # convinced by a neighbour
    classes.vote(opened.id, voter(2), 2, CHOICES[1])
    first, second = classes.tally(opened.id, opened.token).rounds
    assert (first.counts, second.counts) == ((1, 0), (0, 2))
    assert first.sentence() == "0 of 1 predicted at least 0.9; the run: 0.93"
    assert second.sentence() == ""  # the run is known, but round 2 is not revealed yet
    classes.reveal(opened.id, opened.token)
    second = classes.tally(opened.id, opened.token).rounds[1]
    assert second.sentence() == "2 of 2 predicted at least 0.9; the run: 0.93"


def test_a_flood_from_one_session_counts_its_last_accepted_vote_and_refuses_the_rest(room):
    """A hostile student sends 1,000 votes within a second: a few count (the last of them
    stands), the rest are refused; the class's count moves by one voter only."""
    classes, opened, clock = room
    refused = 0
    for n in range(1000):
        clock.now = n / 1000  # all within one second
        try:
            classes.vote(opened.id, voter(666), 2, CHOICES[n % 2])
        except StackError as err:
            assert "votes a second" in err.message and "your last vote counts" in err.hint
            refused += 1
    assert refused == 1000 - VOTES_PER_SECOND
    assert counts(classes, opened) == (1, 0)  # the third vote (n=2, an even one) stands
    clock.now = 1.5
    classes.vote(opened.id, voter(666), 2, CHOICES[1])  # a second later: counted again
    assert counts(classes, opened) == (0, 1)


def test_a_class_keeps_at_most_500_voters_and_a_late_joiner_votes_on_the_current_step(room):
    classes, opened, clock = room
    for n in range(MAX_VOTERS):
        classes.vote(opened.id, voter(n), 2, CHOICES[n % 2])
    with pytest.raises(StackError, match=f"its {MAX_VOTERS} voters already"):
        classes.vote(opened.id, voter(MAX_VOTERS), 2, CHOICES[0])
    clock.now += 1
    classes.vote(opened.id, voter(0), 2, CHOICES[1])  # a voter it has may still change
    assert sum(counts(classes, opened)) == MAX_VOTERS and counts(classes, opened)[1] == 251
    classes.move(opened.id, opened.token, 3)
    classes.open_vote(opened.id, opened.token, CHOICES)
    with pytest.raises(StackError, match="not the class's current step"):  # a late joiner
        classes.vote(opened.id, voter(7), 2, CHOICES[0])
    assert classes.vote(opened.id, voter(7), 3, CHOICES[0]) == 1
    rounds = classes.rounds(opened.id, opened.token)
    assert [(r.step, r.voted) for r in rounds] == [(2, MAX_VOTERS), (3, 1)]
    assert [len(step) for step in by_step(rounds)] == [1, 1]


def test_the_projector_counts_who_follows_now(room):
    classes, opened, clock = room
    for n in range(5):
        classes.follow(opened.id, voter(n))
    classes.vote(opened.id, voter(0), 2, CHOICES[0])
    tally = classes.tally(opened.id, opened.token)
    assert (tally.latest.voted, tally.following) == (1, 5)
    clock.now += FOLLOWING_SECONDS + 1
    classes.follow(opened.id, voter(0))  # the others closed their tabs
    assert classes.tally(opened.id, opened.token).following == 1
    for made_up in ("../../etc", "session-000001", voter(1)[:-1] + "x", None):
        assert not classes.follow(opened.id, made_up).counted  # counts nothing
    assert classes.follow(opened.id, voter(1)).counted
    assert classes.tally(opened.id, opened.token).following == 2
    assert Classes.outlives_restart is False  # the page says a restart loses these votes


def test_the_csv_holds_counts_and_the_runs_number_and_no_student(room):
    classes, opened, clock = room
    tokens = [voter(n) for n in range(4)]
    for n, token in enumerate(tokens):
        classes.follow(opened.id, token)
        classes.vote(opened.id, token, 2, CHOICES[n == 0])
    classes.reveal(opened.id, opened.token)
    classes.outcome(opened.id, opened.token, 0.93, CHOICES[1])
    text = votes_csv(classes.rounds(opened.id, opened.token))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["lesson", "step", "round", "choice", "count", "share",
                             "run_number", "run_supports"]
    assert [(r["choice"], r["count"], r["run_number"], r["run_supports"]) for r in rows] == [
        ("below 0.9", "3", "0.93", "no"), ("at least 0.9", "1", "0.93", "yes")]
    assert not any(token in text or token[-6:] in text for token in tokens)
    assert opened.token not in text and "session" not in text


# --- the pages (AppTest) ------------------------------------------------------------------


def shown_html(at) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def test_students_vote_the_projector_counts_and_the_summary_lists_both_rounds():
    """A teacher presents positions step 1; two students (AppTest sessions on the class
    link) vote, the projector shows the count, no outcome before Reveal; Vote again; after
    the class the summary page lists both rounds side by side; a new session's summary is
    empty."""
    from test_app import lesson_page

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    class_id = teacher.session_state["class_id"]
    assert not teacher.radio and "learn_run" not in [b.key for b in teacher.button]
    students = [lesson_page(**{"class": class_id}) for _ in range(2)]
    for student, pick in zip(students, (0, 1)):
        [choice] = student.radio
        choice.set_value(choice.options[pick]).run()
        assert "Your vote is in (round 1)" in student.success[0].value
        assert student.button(key="learn_run").disabled  # no answer before the teacher's
    teacher.run()
    assert "2 voted of 2 following" in shown_html(teacher)
    bars = [h.proto.body for h in teacher.get("html") if "data-round" in h.proto.body]
    assert len(bars) == 1 and "1 vote<" in bars[0] and "the run" not in bars[0]
    assert not teacher.success  # no answer before Reveal
    assert any("a restart loses them" in c.value for c in teacher.caption)  # memory, not Ray
    teacher.button(key="votes_again").click().run()
    students[0].run()
    assert "Round 2" in students[0].info[0].value and students[0].radio[0].value is None
    students[0].radio[0].set_value(students[0].radio[0].options[1]).run()
    teacher.run()
    bars = [h.proto.body for h in teacher.get("html") if "data-round" in h.proto.body]
    assert [b.count("data-choice") for b in bars] == [2, 2] and "Round 2" in bars[1]
    teacher.button(key="class_end").click().run()
    assert any(f"Your class `{class_id}` has ended" in m.value for m in teacher.markdown)
    teacher.switch_page("views/class_summary.py").run()
    assert class_id in teacher.caption[0].value
    assert not teacher.exception and teacher.title[0].value == "Class summary"
    [table] = teacher.dataframe
    assert list(table.value.columns) == ["choice", "round 1", "round 2", "the run"]
    assert list(table.value["round 2"]) == ["0 of 1", "1 of 1"]
    assert "Not revealed in class" in " ".join(m.value for m in teacher.markdown)
    assert teacher.get("download_button")
    gone = lesson_page(**{"class": class_id})  # after a restart, the class is gone too
    assert "their votes are lost" in gone.warning[0].value
    fresh = lesson_page()
    fresh.switch_page("views/class_summary.py").run()
    assert not fresh.exception and "No votes yet" in fresh.info[0].value


def test_a_forged_vote_from_a_page_is_said_on_it_and_counts_nothing():
    """A student on a class whose step moved on picks a choice of the old step: refused."""
    from test_app import lesson_page

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    student = lesson_page(**{"class": teacher.session_state["class_id"]})
    teacher.button(key="learn_next").click().run()  # the student's page has not polled yet
    student.radio[0].set_value(student.radio[0].options[0]).run()
    assert not student.exception and not student.error  # what happened, never an error
    said = " ".join(i.value for i in student.info)
    assert "Your choice was not counted: step 1 is not the class's current step (2)" in said
    assert "Step 2 of 3" in student.get("progress")[0].proto.text  # the page shows step 2
    counted = teacher.session_state  # the teacher's count of step 2: nobody voted
    assert "0 voted of 1 following" in shown_html(teacher.run()), counted


def test_students_are_told_the_answer_and_their_closed_choices_say_why():
    """After Reveal and the run's number, each following student's page says the answer is
    out (the number, the choice it supports) and marks their own choice, with no tap; the
    choices are closed with a reason; a vote that arrives after the reveal is said as what
    happened. Before it, a greyed "Run the experiment" says why."""
    from test_app import lesson_page

    from ui import session

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    class_id, token = teacher.session_state["class_id"], teacher.session_state["class_token"]
    right, wrong, silent = (lesson_page(**{"class": class_id}) for _ in range(3))
    low, high = right.radio[0].options
    right.radio[0].set_value(low).run()
    wrong.radio[0].set_value(high).run()
    assert wrong.button(key="learn_run").disabled
    assert "once the teacher reveals the answer" in " ".join(c.value for c in wrong.caption)
    session.classes().reveal(class_id, token)
    late = silent.radio[0].set_value(low).run()  # its page had not polled the reveal yet
    assert not late.error and "Your choice was not counted: the teacher revealed" in late.info[0].value
    assert late.radio[0].disabled and "round 1's votes are closed" in late.info[1].value
    session.classes().outcome(class_id, token, 0.12, low)
    for page, mark in ((right, "✓ Right."), (wrong, "✗ Not this time."),
                       (silent, "You did not vote in this round.")):
        page.run()
        said = " ".join(m.value for m in page.markdown)
        assert "**The answer is out** (round 1): the run measured held-out accuracy **0.12**" in said
        assert f"so *{low}*" in said and mark in said, said
        assert page.radio[0].disabled and not page.error and not page.exception
        assert not page.button(key="learn_run").disabled  # the run may be looked at now
    assert wrong.radio[0].value == high and silent.radio[0].value is None  # as counted


# --- the load scenario's own arithmetic (bench/loadtest_votes.py) ---------------------------


def test_the_load_scenario_times_each_vote_to_the_first_projector_read_that_counts_it():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "bench" / "loadtest_votes.py"
    spec = importlib.util.spec_from_file_location("loadtest_votes", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    class Voter:
        def __init__(self, *votes):
            self.votes = list(votes)

    room = [Voter((1, 1, 10.0, True)), Voter((1, 1, 10.5, True), (2, 1, 20.0, False)),
            Voter((1, 1, 11.0, True))]
    seen = [(10.2, 1, 1, 0, 3), (10.8, 1, 1, 2, 3), (11.9, 1, 1, 2, 3), (12.4, 1, 1, 3, 3)]
    assert [round(d, 2) for d in bench.count_delays(room, seen)] == [0.8, 0.3, 1.4]
    assert bench.answer("E_VALUE: more than 3 votes a second from one session") == "refused_flood"
    assert bench.answer("the teacher revealed the answer of round 1") == "refused_closed"
    assert bench.answer("Your vote is in (round 2)") == "counted"
    assert bench.answer("a page with neither") == "failed"
    assert bench.answer("Round 2: your choice goes to the class") == "ignored_stale"


def test_a_late_change_from_round_one_counts_nothing_in_round_two():
    """The double-change race (issue 42): a student's radio sends its round-1 change again,
    and it arrives after the teacher pressed Vote again (the page still drawn at round 1).
    It carries round 1, so round 2 stays at zero until the student chooses in it."""
    from test_app import lesson_page

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    student = lesson_page(**{"class": teacher.session_state["class_id"]})
    [choice] = student.radio
    choice.set_value(choice.options[0]).run()
    assert "Your vote is in (round 1)" in student.success[0].value
    teacher.button(key="votes_again").click().run()
    assert "0 voted of 1 following" in shown_html(teacher)
    stale = student.radio[0]  # the page has not polled: still round 1's radio
    stale.set_value(stale.options[1]).run()  # its late change, after the round was cleared
    assert "0 voted of 1 following" in shown_html(teacher.run())
    assert "Round 2" in student.info[0].value and student.radio[0].value is None
    student.radio[0].set_value(student.radio[0].options[1]).run()  # chosen in round 2
    assert "1 voted of 1 following" in shown_html(teacher.run())
    assert "Your vote is in (round 2)" in student.success[0].value


def test_a_round_one_change_that_arrives_after_the_page_showed_round_two_counts_nothing():
    """The other half of the race: the student's page has already redrawn at round 2 when
    its browser sends a change of round 1's choices (the radio as it was). Each round has
    choices of its own (``learn_predict_ROUND``), so that change finds no choice of round 2
    to stand for, and round 2 stays at zero until the student picks in it."""
    from test_app import lesson_page

    teacher = lesson_page(lesson="positions", step="1")
    teacher.button(key="learn_present").click().run()
    student = lesson_page(**{"class": teacher.session_state["class_id"]})
    [choice] = student.radio
    choice.set_value(choice.options[0]).run()
    stale = student.radio[0]  # round 1's choices, as the browser still holds them
    teacher.button(key="votes_again").click().run()
    student.run()  # the page polled: round 2's choices, none picked
    assert student.radio[0].value is None
    stale.set_value(stale.options[1]).run()  # the browser's late change of round 1's radio
    assert "0 voted of 1 following" in shown_html(teacher.run())
    student.radio[0].set_value(student.radio[0].options[1]).run()
    assert "1 voted of 1 following" in shown_html(teacher.run())
