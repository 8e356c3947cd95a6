"""A class on the server: the lesson a teacher presents and its current step,
shared state like a shared run, written only by the teacher's session.

Presenting a lesson opens a `Class`: a short id for the students' link (``class=ID``) and a
presenter token that only the teacher's session keeps (never in a link). Only that token
moves the class. A student's page reads the class at each poll (`Classes.follow`) and shows
its step, so every student is on the teacher's step within one poll; a student may leave
to explore and rejoin (following is reading, nothing to undo). A class ends when its
teacher's session has not been seen (`Classes.heartbeat`, each move counts too) for
``ttl_seconds``.

A class also holds its students' votes (`stacklab.serve.classroom.votes`): the teacher's
page opens a round on a step asking a prediction (`Classes.open_vote`), each student's
session votes (`Classes.vote`: the current step only, no name, the last vote counts), the
projector reads the count (`Classes.tally`), and the teacher reveals the run's answer and
may ask for a second round. The projector watches the class's votes version
(`Classes.votes_version`: the class's version, its accepted votes and how many follow),
which changes at each vote, so the teacher's page redraws its count when a vote came in,
and the students' pages (which watch the class's version) do not. Votes live where the
class lives: in this server's memory (a restart loses them) or on the Ray cluster's
classes actor (`stacklab.serve.classroom.cluster`: they outlive an app server's restart).

>>> classes = Classes(ttl_seconds=60)
>>> opened = classes.open("why_positions")
>>> classes.follow(opened.id).step, classes.move(opened.id, opened.token, 3).step
(0, 3)
>>> classes.follow(opened.id).step
3
>>> classes.move(opened.id, "not the token", 1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
stacklab.core.errors.StackError: E_VALUE at input: only the teacher's session moves class ...
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ...core.errors import StackError, shown
from ..limits import SESSION_TTL_SECONDS
from .voters import Voters
from .votes import Round, Tally, Votes

CLASS_ID_CHARS = 8  # the class's id in the students' link: short, for a QR code
MAX_CLASSES = 256  # open classes on one server; past it, the longest unseen teacher's goes
TEACHER_HERE_SECONDS = 5 * 60  # a class whose teacher was seen this recently is never ended
# to make room (a teacher's page says it is there every minute): at the cap a new one is refused
CLASSES_PER_OPENER = 3  # classes one browser may keep open; a 4th ends its own oldest


@dataclass(frozen=True)
class ClassView:
    """What a student's page reads: the lesson, the current step, ``version`` (bumped at
    every move, round and reveal, so a page redraws only when the teacher did something),
    the step's vote round (0: it asks none) and whether that round takes votes; once the
    teacher revealed it and the run is in, the run's number (``value``) and the choice it
    supports; and ``mine``, the asking student's own choice in that round (None: no vote)."""

    id: str
    lesson: str
    step: int
    version: int
    round: int = 0
    voting: bool = False
    value: float | None = None
    supported: str | None = None
    mine: str | None = None
    counted: bool = False  # the follower named was an identity this server issued: counted

    @property
    def answered(self) -> bool:
        """The teacher revealed this round and the run's answer is in."""
        return self.round > 0 and not self.voting and self.supported is not None


@dataclass(frozen=True)
class Opened:
    """What the teacher's session keeps: the class's ``id`` (for the link) and its
    presenter ``token`` (kept in the session, never in a link)."""

    id: str
    token: str


@dataclass
class Class:
    """One class: its lesson and step, the presenter token, and when the teacher was last
    seen. Written only under `Classes`'s lock."""

    id: str
    lesson: str
    token: str
    step: int = 0
    version: int = 0
    voted: int = 0  # votes accepted and outcomes written: the projector's count changed
    seen: float = 0.0
    votes: Votes = field(default_factory=Votes)
    opener: str = ""  # the browser that opened it (`Classes.open`'s ``opener``)

    def view(self, follower: str | None = None) -> ClassView:
        """What ``follower`` (an identity this server issued, or None) reads of the class."""
        ballot = self.votes.current(self.lesson, self.step)
        counted = follower is not None
        if ballot is None:
            return ClassView(self.id, self.lesson, self.step, self.version, counted=counted)
        return ClassView(self.id, self.lesson, self.step, self.version, ballot.round,
                         not ballot.revealed, ballot.value if ballot.revealed else None,
                         ballot.supported if ballot.revealed else None,
                         ballot.chosen.get(follower) if counted else None, counted)

    def votes_version(self, now: float) -> str:
        """What the projector shows changed when this changed: a move, round or reveal (the
        class's version), a vote or an outcome, or the number following."""
        return f"{self.version}.{self.voted}.{self.votes.following(now)}"


class Classes:
    """The server's open classes, by id (one module writes them: this one). Thread-safe:
    every page script of every session calls it."""

    outlives_restart = False  # in this server's memory: a restart loses its classes and votes

    def __init__(self, ttl_seconds: float = SESSION_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, secret: bytes | None = None):
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._classes: dict[str, Class] = {}
        self._voters = Voters(secret)  # the secret: ``STACKLAB_SECRET``, else this process's

    def open(self, lesson: str, step: int = 0, opener: str | None = None) -> Opened:
        """Open a class presenting ``lesson`` at ``step``: its id and presenter token.
        ``opener`` names the browser that opens it: it keeps `CLASSES_PER_OPENER` classes
        at most (a new one ends its own oldest). Past `MAX_CLASSES`, the class whose teacher
        was seen longest ago ends, never one whose teacher was seen within
        `TEACHER_HERE_SECONDS`: then the new class is refused (``E_VALUE``, said on the page)."""
        lesson = str(lesson).strip()
        if not lesson:
            raise StackError("E_VALUE", "a class needs the lesson it presents",
                             hint="open it with the lesson's id, e.g. open('why_positions')")
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._forget_idle_locked()
            self._make_room_locked(str(opener or ""))
            while True:
                class_id = secrets.token_hex(CLASS_ID_CHARS // 2)
                if class_id not in self._classes:
                    break
            self._classes[class_id] = Class(class_id, lesson, token, _step(step),
                                            seen=self._clock(), opener=str(opener or ""))
        return Opened(class_id, token)

    def _make_room_locked(self, opener: str) -> None:
        now = self._clock()
        if opener:
            own = sorted((c for c in self._classes.values() if c.opener == opener),
                         key=lambda c: c.seen)
            for ended in own[:max(0, len(own) - CLASSES_PER_OPENER + 1)]:
                del self._classes[ended.id]
        if len(self._classes) < MAX_CLASSES:
            return
        oldest = min(self._classes.values(), key=lambda c: c.seen)
        if now - oldest.seen <= TEACHER_HERE_SECONDS:
            raise StackError("E_VALUE", f"this server has {MAX_CLASSES} classes open, each "
                             f"with its teacher here in the last {TEACHER_HERE_SECONDS // 60} "
                             "minutes: it opens no more now", node="the class",
                             hint="end a class you no longer present, or try again in a few "
                                  "minutes (a class whose teacher left makes room)")
        del self._classes[oldest.id]

    def issue_voter(self, class_id: str, address: str | None) -> str | None:
        """A new voter identity for a device at ``address`` that follows ``class_id``
        (`stacklab.serve.classroom.voters`), or None when the class has ended or that
        address has had its share of new identities for now (its page asks again at its
        next poll)."""
        with self._lock:
            self._forget_idle_locked()
            if str(class_id) not in self._classes:
                return None
            return self._voters.issue(str(class_id), address, self._clock())

    def is_voter(self, class_id: str, voter: object) -> bool:
        """Whether ``voter`` is an identity this server issued for ``class_id``."""
        return self._voters.check(voter, str(class_id))

    def move(self, class_id: str, token: str, step: int, lesson: str | None = None) -> ClassView:
        """Move the class to ``step`` (and ``lesson``, when the teacher changes lesson); only
        with its presenter token. ``E_VALUE`` for a wrong token or a class that has ended."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            found.step, found.seen = _step(step), self._clock()
            if lesson is not None:
                found.lesson = str(lesson)
            found.version += 1
            return found.view()

    def heartbeat(self, class_id: str, token: str) -> bool:
        """The teacher's session is still there (each of its page runs calls this); False
        when the class has ended or the token is not its presenter's."""
        with self._lock:
            found = self._classes.get(class_id)
            if found is None or not secrets.compare_digest(found.token, str(token)):
                return False
            found.seen = self._clock()
            return True

    def follow(self, class_id: str, follower: str | None = None) -> ClassView | None:
        """What a student's page shows at each poll: the class's lesson and step, or None
        when it has ended (its teacher gone for the TTL) or never was. A ``follower`` that
        is a voter identity issued for this class is counted as following (the projector's
        "of N"; ``counted`` in the answer); any other counts nothing."""
        with self._lock:
            self._forget_idle_locked()
            found = self._classes.get(str(class_id))
            if found is None:
                return None
            counted = follower is not None and self._voters.check(follower, found.id)
            if counted:
                found.votes.follow(follower, self._clock())
            return found.view(follower if counted else None)

    # -- votes (peer instruction) --------------------------------------------------------

    def open_vote(self, class_id: str, token: str, choices: tuple[str, ...]) -> ClassView:
        """The teacher's page shows a step asking a prediction: round 1 opens on the class's
        current step with ``choices`` (nothing when the step has a round already)."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            if found.votes.current(found.lesson, found.step) is None:
                found.votes.open(found.lesson, found.step, tuple(choices))
                found.version += 1
            return found.view()

    def vote(self, class_id: str, voter: str, step: int, choice: str,
             in_round: int | None = None) -> int:
        """A student's ``choice`` on ``step``, cast in round ``in_round`` (the round the
        page showed; None: the current one): the round it counts in, 0 when ``in_round`` is
        over (a late widget value counts nothing). Refused with ``E_VALUE`` (nothing
        counted) for a voter identity this server did not issue for the class, a class that
        has ended, a step that is not the class's current one, a choice it does not offer, a
        flood or a voter too many."""
        with self._lock:
            found = self._classes.get(str(class_id))
            if found is None:
                named = f"class {shown(class_id, 20)}"
                raise StackError("E_VALUE", f"{named} has ended (or never was): the vote counts "
                                 "nothing", node=named, hint="open the class link your teacher shows")
            if not self._voters.check(voter, found.id):
                raise StackError("E_VALUE", f"{shown(voter, 30)} is not a voter this server "
                                 f"issued for class {found.id}", node="the vote",
                                 hint="vote from the class link's page (/learn?class=ID)")
            if step != found.step:
                asked = step if isinstance(step, int) else shown(step, 20)
                raise StackError("E_VALUE", f"step {asked} is not the class's "
                                 f"current step ({found.step})", node=f"class {found.id}",
                                 hint="vote on the step the teacher shows now")
            counted_in = found.votes.cast(voter, found.lesson, found.step, str(choice),
                                          self._clock(), in_round)
            found.voted += bool(counted_in)
            return counted_in

    def reveal(self, class_id: str, token: str) -> Round:
        """The teacher reveals: the current step's latest round takes no more votes."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            found.version += 1
            return found.votes.reveal(found.lesson, found.step)

    def vote_again(self, class_id: str, token: str) -> Round:
        """After a discussion: a new round on the current step, with the same choices."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            found.version += 1
            return found.votes.again(found.lesson, found.step)

    def outcome(self, class_id: str, token: str, value: float, supported: str) -> None:
        """The run's number on the current step and the choice it supports (after Reveal):
        the students' pages are told (the class's version changes)."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            found.votes.outcome(found.lesson, found.step, value, supported)
            found.voted += 1
            found.version += 1

    def tally(self, class_id: str, token: str) -> Tally:
        """The projector's count: the current step's rounds and how many follow now."""
        with self._lock:
            found = self._teachers_locked(class_id, token)
            now = self._clock()
            return found.votes.tally(found.lesson, found.step, now, found.votes_version(now))

    def votes_version(self, class_id: str) -> str | None:
        """The class's votes version (what the projector's count was drawn at: `Tally.version`),
        None when the class has ended or never was. Needs no token: it says only that
        something changed, and a student's vote changes it without rerunning the room."""
        with self._lock:
            self._forget_idle_locked()
            found = self._classes.get(str(class_id))
            return None if found is None else found.votes_version(self._clock())

    def rounds(self, class_id: str, token: str) -> tuple[Round, ...]:
        """Every round of the class so far (the summary page, the CSV)."""
        with self._lock:
            return self._teachers_locked(class_id, token).votes.rounds()

    def close(self, class_id: str, token: str) -> None:
        """The teacher ends the class."""
        with self._lock:
            self._teachers_locked(class_id, token)
            del self._classes[class_id]

    def forget_idle(self) -> int:
        """End the classes whose teacher has not been seen for the TTL; how many ended."""
        with self._lock:
            return self._forget_idle_locked()

    def __len__(self) -> int:
        with self._lock:
            return len(self._classes)

    def _teachers_locked(self, class_id: str, token: str) -> Class:
        self._forget_idle_locked()
        found = self._classes.get(str(class_id))
        if found is None:
            raise StackError("E_VALUE", f"class {shown(class_id, 20)} has ended (or never was)",
                             hint="present the lesson again to open a new class")
        if not secrets.compare_digest(found.token, str(token)):
            raise StackError("E_VALUE", f"only the teacher's session moves class {found.id}",
                             hint="a student follows the class; presenting a lesson opens "
                                  "your own class")
        return found

    def _forget_idle_locked(self) -> int:
        now = self._clock()
        gone = [c.id for c in self._classes.values() if now - c.seen > self.ttl_seconds]
        for class_id in gone:
            del self._classes[class_id]
        return len(gone)


def _step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise StackError("E_VALUE", f"step {shown(step, 20)} is not a lesson step",
                         hint="steps are numbered 0, 1, 2, ...")
    return step


__all__ = ["Class", "ClassView", "Classes", "Opened", "Round", "Tally"]
