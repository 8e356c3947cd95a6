"""Issue 42: a class no student can end and votes that count once. The voter identities
the server issues (`stacklab.serve.classroom.voters`): signed, one per device and class, rate-bounded
per address; what `Classes` counts with them (following, votes, the voter cap); votes that
carry their round; and the class cap that never ends a class whose teacher is here. The
same hostile cases on the real server are in tests/test_class_hostile.py."""

from __future__ import annotations

import pytest

from stacklab.core.errors import StackError
from stacklab.serve.classroom.classes import CLASSES_PER_OPENER, MAX_CLASSES, TEACHER_HERE_SECONDS, Classes
from stacklab.serve.classroom.voters import ISSUE_BURST, ISSUE_PER_SECOND, SECRET_ENV, Voters
from stacklab.serve.classroom.votes import FOLLOWING_SECONDS, MAX_VOTERS

CHOICES = ("at most 0.3", "above 0.3")


@pytest.fixture
def room(clock):
    clock.now = 1000.0
    classes = Classes(ttl_seconds=3600, clock=clock)
    opened = classes.open("positions", 1, opener="teacher")
    classes.open_vote(opened.id, opened.token, CHOICES)
    return classes, opened, clock


def test_an_identity_is_signed_for_one_class_and_a_made_up_one_checks_nothing():
    voters = Voters(b"secret one")
    token = voters.issue("1a2b3c4d", "10.0.0.1", now=0.0)
    assert voters.check(token, "1a2b3c4d") and not voters.check(token, "1a2b3c4e")
    assert not Voters(b"secret two").check(token, "1a2b3c4d")  # another server's secret
    for made_up in (None, 7, "", "x" * 34, token[:-1], token + "A", token.upper()):
        assert not voters.check(made_up, "1a2b3c4d"), made_up


def test_a_deployments_servers_share_the_secret_from_the_environment(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "one secret for every app server")
    first, second = Voters(), Voters()
    assert second.check(first.issue("1a2b3c4d", "10.0.0.1", now=0.0), "1a2b3c4d")
    monkeypatch.delenv(SECRET_ENV)
    assert not Voters().check(first.issue("1a2b3c4d", "10.0.0.1", now=0.0), "1a2b3c4d")


def test_one_address_gets_a_rooms_worth_of_identities_at_once_then_one_a_second():
    voters = Voters(b"s")
    issued = [voters.issue("c", "10.0.0.1", now=0.0) for _ in range(ISSUE_BURST + 50)]
    assert sum(t is not None for t in issued) == ISSUE_BURST  # a room behind one router
    assert voters.issue("c", "10.0.0.1", now=0.5) is None
    assert voters.issue("c", "10.0.0.1", now=1.0 / ISSUE_PER_SECOND) is not None
    assert voters.issue("c", "10.0.0.2", now=0.0) is not None  # another phone: its own bucket


def test_a_reload_keeps_the_devices_vote_never_a_second_one(room):
    """The page kept its identity (the browser's cookie): the reloaded page follows and
    votes as the same voter, so the count never says more voted than follow."""
    classes, opened, clock = room
    phones = [classes.issue_voter(opened.id, f"10.0.0.{n}") for n in range(3)]
    for phone, choice in zip(phones, (0, 1, 1)):
        assert classes.follow(opened.id, phone).counted
        classes.vote(opened.id, phone, 1, CHOICES[choice], in_round=1)
    clock.now += 2
    reloaded = phones[0]  # the same cookie, a new page
    classes.follow(opened.id, reloaded)
    classes.vote(opened.id, reloaded, 1, CHOICES[1], in_round=1)
    tally = classes.tally(opened.id, opened.token)
    assert (tally.latest.voted, tally.following, tally.latest.counts) == (3, 3, (0, 3))


def test_a_stale_round_counts_nothing_and_a_new_round_starts_at_zero(room):
    """The page's radio sends its round-1 value twice; the second arrives after Vote again:
    it carries round 1 and counts nothing in round 2."""
    classes, opened, clock = room
    phone = classes.issue_voter(opened.id, "10.0.0.1")
    assert classes.vote(opened.id, phone, 1, CHOICES[0], in_round=1) == 1
    again = classes.vote_again(opened.id, opened.token)
    assert again.round == 2 and again.voted == 0
    clock.now += 0.2
    assert classes.vote(opened.id, phone, 1, CHOICES[0], in_round=1) == 0  # late: nothing
    assert classes.tally(opened.id, opened.token).latest.counts == (0, 0)
    assert classes.vote(opened.id, phone, 1, CHOICES[1], in_round=2) == 2  # chosen: counts
    first, second = classes.tally(opened.id, opened.token).rounds
    assert (first.counts, second.counts) == ((1, 0), (0, 1))


def test_a_thousand_made_up_identities_count_nothing(room):
    classes, opened, _ = room
    before = classes.votes_version(opened.id)
    for n in range(1000):
        view = classes.follow(opened.id, f"student-{n:010d}-made-up-identity")
        assert not view.counted
        with pytest.raises(StackError, match="not a voter this server issued"):
            classes.vote(opened.id, f"student-{n:010d}", 1, CHOICES[0])
    assert classes.follow("0badc1a5", "x") is None  # a made-up class: nothing either
    assert classes.tally(opened.id, opened.token).following == 0
    assert classes.votes_version(opened.id) == before


def test_500_scripted_identities_from_one_address_leave_room_for_the_real_students(room):
    """A script at one address asks 500 identities: it gets `ISSUE_BURST` now and one a
    second after; real students (their own phones) still get theirs and vote. And the cap
    counts the voters who follow: a script's idle identities hold no place."""
    classes, opened, clock = room
    scripted = [classes.issue_voter(opened.id, "10.9.9.9") for _ in range(500)]
    got = [t for t in scripted if t is not None]
    assert len(got) == ISSUE_BURST
    for token in got:
        classes.vote(opened.id, token, 1, CHOICES[0], in_round=1)
    student = classes.issue_voter(opened.id, "10.0.0.50")
    assert classes.vote(opened.id, student, 1, CHOICES[1], in_round=1) == 1
    # with 500 following voters, a 501st is refused; once they stop following, it gets in
    phones = [classes.issue_voter(opened.id, f"10.1.{n // 250}.{n % 250}") for n in range(500)]
    for phone in phones[:MAX_VOTERS - len(got) - 1]:
        classes.vote(opened.id, phone, 1, CHOICES[0], in_round=1)
    with pytest.raises(StackError, match=f"its {MAX_VOTERS} voters already"):
        classes.vote(opened.id, phones[-1], 1, CHOICES[0], in_round=1)
    clock.now += FOLLOWING_SECONDS + 1  # the script stops polling; the real student polls
    classes.follow(opened.id, student)
    assert classes.vote(opened.id, phones[-1], 1, CHOICES[1], in_round=1) == 1


def test_260_classes_opened_by_scripts_never_end_the_teachers_class(room):
    classes, opened, clock = room
    clock.now += 30
    refused = 0
    for n in range(260):
        try:
            classes.open("positions", 1, opener=f"script-{n}")
        except StackError as err:
            assert f"{MAX_CLASSES} classes open" in err.message and "try again" in err.hint
            refused += 1
    assert len(classes) == MAX_CLASSES and refused == 260 - (MAX_CLASSES - 1)
    assert classes.follow(opened.id).step == 1
    assert classes.move(opened.id, opened.token, 2).step == 2  # the teacher's Next works
    clock.now += TEACHER_HERE_SECONDS - 20  # the scripts' teachers are gone; ours is here
    classes.heartbeat(opened.id, opened.token)
    clock.now += 30
    assert classes.open("positions", 1, opener="a real teacher") is not None  # room again
    assert classes.follow(opened.id).step == 2


def test_one_browser_keeps_only_a_few_classes_open(room):
    classes, opened, _ = room
    mine = [classes.open("positions", 1, opener="one browser") for _ in range(5)]
    alive = [o for o in mine if classes.follow(o.id) is not None]
    assert alive == mine[-CLASSES_PER_OPENER:]
    assert classes.follow(opened.id) is not None  # another browser's class stays
