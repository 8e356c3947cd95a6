"""A class's votes (peer instruction): while the class is on a step that asks for a
prediction, each student's session sends its choice, the projector shows how many chose
each, and the teacher reveals the run's answer, then may ask the room to vote again.

The votes of one step and one round are a `Ballot`: the choices the step offers, one
choice per voter (a random token a student's session keeps: no name, never shown, never
written out), and, once the teacher revealed, the run's number and the choice it supports.
`Votes` holds a class's ballots, its voters' recent votes (the flood limit) and who follows
the class now; `classes.Classes` keeps one per class and calls it under its lock, so these
classes are not thread-safe on their own.

>>> votes = Votes()
>>> votes.open("positions", 2, ("below 0.9", "at least 0.9"))
>>> votes.cast("student-a", "positions", 2, "at least 0.9", now=0.0)
1
>>> votes.cast("student-b", "positions", 2, "below 0.9", now=0.0)
1
>>> votes.cast("student-a", "positions", 2, "below 0.9", now=0.5)  # changed: the last counts
1
>>> votes.current("positions", 2).count().counts
(2, 0)
>>> votes.cast("student-c", "positions", 2, "half of it", now=0.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
stacklab.core.errors.StackError: E_VALUE at ...: 'half of it' is not a choice of this step...
"""

from __future__ import annotations

import csv
import io
import secrets
from collections import deque
from dataclasses import dataclass, field

from ...core.errors import StackError, shown

MAX_VOTERS = 500  # the voters who follow one class now; a 501st new voter is refused (voters
# who stopped following keep their votes but make room: a script's idle identities fill nothing)
VOTES_PER_SECOND = 3  # a session's votes in any one second; more are refused (the last counts)
MAX_BALLOTS = 200  # rounds of one class, over all its steps (a lesson has a few steps)
MAX_CHOICES = 8  # the choices of one step
FOLLOWING_SECONDS = 10.0  # a student whose page read the class this recently follows it
MAX_FOLLOWERS = 2 * MAX_VOTERS  # sessions counted as following; older ones forgotten first
VOTER_CHARS = 64  # a voter token's length at most (a session makes 16 url-safe characters)
CSV_COLUMNS = ("lesson", "step", "round", "choice", "count", "share", "run_number",
               "run_supports")


@dataclass(frozen=True)
class Round:
    """One round's count, as the projector and the summary read it: the step, the round
    (1, then 2 after "Vote again"), the choices and how many chose each, whether the teacher
    revealed, and the run's number and the choice it supports (None until the run is in)."""

    lesson: str
    step: int
    round: int
    choices: tuple[str, ...]
    counts: tuple[int, ...]
    revealed: bool = False
    value: float | None = None
    supported: str | None = None

    @property
    def voted(self) -> int:
        return sum(self.counts)

    def share(self, choice: str) -> float:
        """The fraction of this round's voters who chose ``choice`` (0 with no votes)."""
        return self.counts[self.choices.index(choice)] / self.voted if self.voted else 0.0

    def sentence(self) -> str:
        """``5 of 8 predicted at least 0.9; the run: 0.93`` once revealed and the run is in,
        else ''. Votes are counted, never given as percentages: the run's numbers on the
        same screen are decimals, and a screen writes a share one way."""
        if not self.revealed or self.value is None or self.supported is None:
            return ""
        return (f"{self.counts[self.choices.index(self.supported)]} of {self.voted} "
                f"predicted {self.supported}; "
                f"the run: {self.value:.2f}")


@dataclass(frozen=True)
class Tally:
    """What the projector shows of the class's current step: its rounds (oldest first;
    none when the step asks nothing), and how many sessions follow the class now."""

    rounds: tuple[Round, ...]
    following: int
    version: str = ""  # the class's votes version when counted (`Classes.votes_version`)

    @property
    def latest(self) -> Round | None:
        return self.rounds[-1] if self.rounds else None


@dataclass
class Ballot:
    """One round of one step: its choices and each voter's choice."""

    lesson: str
    step: int
    round: int
    choices: tuple[str, ...]
    chosen: dict[str, str] = field(default_factory=dict)  # voter token -> choice
    revealed: bool = False
    value: float | None = None
    supported: str | None = None

    def count(self) -> Round:
        counts = tuple(sum(1 for c in self.chosen.values() if c == choice)
                       for choice in self.choices)
        return Round(self.lesson, self.step, self.round, self.choices, counts, self.revealed,
                     self.value, self.supported)


class Votes:
    """A class's ballots, oldest first, and its voters (see the module docstring)."""

    def __init__(self):
        self.ballots: list[Ballot] = []
        self.recent: dict[str, deque] = {}  # voter -> the times of its last votes
        self.seen: dict[str, float] = {}  # follower -> when its page last read the class

    def open(self, lesson: str, step: int, choices: tuple[str, ...]) -> None:
        """Open round 1 on ``step`` (the teacher's page shows a step asking a prediction);
        nothing when the step has a round already."""
        if self.current(lesson, step) is not None:
            return
        choices = tuple(str(choice) for choice in choices)
        if not 2 <= len(choices) <= MAX_CHOICES or len(set(choices)) != len(choices):
            raise StackError("E_VALUE", f"a vote needs 2 to {MAX_CHOICES} different choices, "
                             f"not {shown(choices, 80)}", node=f"step {step}",
                             hint="give the step's outcomes, e.g. ('below 0.9', 'at least 0.9')")
        self._add(Ballot(lesson, step, 1, choices))

    def again(self, lesson: str, step: int) -> Round:
        """A new round on ``step`` (after a discussion), with the same choices."""
        latest = self._asked(lesson, step)
        self._add(Ballot(lesson, step, latest.round + 1, latest.choices, value=latest.value,
                         supported=latest.supported))
        return self.ballots[-1].count()

    def reveal(self, lesson: str, step: int) -> Round:
        """Close the step's latest round: its count stays as it is."""
        latest = self._asked(lesson, step)
        latest.revealed = True
        return latest.count()

    def outcome(self, lesson: str, step: int, value: float, supported: str) -> None:
        """The run's number and the choice it supports, on every revealed round of the step."""
        latest = self._asked(lesson, step)
        if supported not in latest.choices:
            raise StackError("E_VALUE", f"{shown(supported, 60)} is not a choice of step {step}",
                             node=f"step {step}", hint="one of " + ", ".join(latest.choices))
        for ballot in self.ballots:
            if (ballot.lesson, ballot.step) == (lesson, step) and ballot.revealed:
                ballot.value, ballot.supported = float(value), supported

    def cast(self, voter: str, lesson: str, step: int, choice: str, now: float,
             in_round: int | None = None) -> int:
        """``voter``'s choice on ``step``, which must be the class's current step: the round
        it counts in. A vote cast in an earlier round (``in_round``: a page's late widget
        value, sent after "Vote again") counts nothing: 0. Refused (`StackError`, nothing counted) for a
        choice the step does not offer, a step that asks nothing or whose round was
        revealed, a flood, or a new voter past `MAX_VOTERS` following now. A vote is a sign
        of life: its voter follows the class."""
        place = f"step {step}"
        latest = self.current(lesson, step)
        if latest is None:
            raise StackError("E_VALUE", f"{place} asks for no vote now", node=place,
                             hint="vote on the step the teacher shows")
        if in_round is not None and in_round != latest.round:
            return 0  # cast in a round that is over: the new round starts from its own votes
        if latest.revealed:
            raise StackError("E_VALUE", f"the teacher revealed the answer of round "
                             f"{latest.round}: its votes are closed", node=place,
                             hint="wait for the teacher to ask the room to vote again")
        if choice not in latest.choices:
            raise StackError("E_VALUE", f"{shown(choice, 60)} is not a choice of this step",
                             node=place, hint="one of " + ", ".join(latest.choices))
        if voter not in self.recent and self._voters_following(now) >= MAX_VOTERS:
            raise StackError("E_VALUE", f"this class has its {MAX_VOTERS} voters already",
                             node=place, hint="a class counts the votes of at most "
                             f"{MAX_VOTERS} students; watch the projector's count")
        times = self.recent.setdefault(voter, deque(maxlen=VOTES_PER_SECOND))
        if len(times) == VOTES_PER_SECOND and now - times[0] < 1.0:
            raise StackError("E_VALUE", f"more than {VOTES_PER_SECOND} votes a second from "
                             "one session", node=place,
                             hint="your last vote counts; choose once and wait")
        times.append(now)
        latest.chosen[voter] = choice
        self.follow(voter, now)
        return latest.round

    def _voters_following(self, now: float) -> int:
        """The voters who follow now; the others' flood records go (their votes stay)."""
        if len(self.recent) >= MAX_VOTERS:
            self.recent = {who: times for who, times in self.recent.items()
                           if now - self.seen.get(who, -FOLLOWING_SECONDS - 1) <= FOLLOWING_SECONDS}
        return len(self.recent)

    def follow(self, follower: str, now: float) -> None:
        """A student's page read the class: it follows it (bounded: the longest unseen go)."""
        if follower not in self.seen and len(self.seen) >= MAX_FOLLOWERS:
            self.forget_unseen(now)
            if len(self.seen) >= MAX_FOLLOWERS:
                del self.seen[min(self.seen, key=self.seen.get)]
        self.seen[follower] = now

    def forget_unseen(self, now: float) -> None:
        self.seen = {who: at for who, at in self.seen.items() if now - at <= FOLLOWING_SECONDS}

    def following(self, now: float) -> int:
        """The sessions whose page read the class within `FOLLOWING_SECONDS`."""
        return sum(1 for at in self.seen.values() if now - at <= FOLLOWING_SECONDS)

    def tally(self, lesson: str, step: int, now: float, version: str = "") -> Tally:
        rounds = tuple(b.count() for b in self.ballots if (b.lesson, b.step) == (lesson, step))
        return Tally(rounds, self.following(now), version)

    def rounds(self) -> tuple[Round, ...]:
        """Every round of the class, oldest first: the summary's and the CSV's rows."""
        return tuple(ballot.count() for ballot in self.ballots)

    def current(self, lesson: str, step: int) -> Ballot | None:
        return next((b for b in reversed(self.ballots) if (b.lesson, b.step) == (lesson, step)),
                    None)

    def _asked(self, lesson: str, step: int) -> Ballot:
        latest = self.current(lesson, step)
        if latest is None:
            raise StackError("E_VALUE", f"step {step} has no vote", node=f"step {step}",
                             hint="a round opens when the class is on a step asking a prediction")
        return latest

    def _add(self, ballot: Ballot) -> None:
        if len(self.ballots) >= MAX_BALLOTS:
            raise StackError("E_VALUE", f"this class has {MAX_BALLOTS} rounds of votes already",
                             hint="download its votes and present the lesson again")
        self.ballots.append(ballot)


def new_voter_token() -> str:
    """A student session's vote token: 16 random url-safe characters, no name in it."""
    return secrets.token_urlsafe(12)


def voter_token(voter: object) -> str:
    """``voter`` checked: a short token a session made (letters, digits, - and _)."""
    text = voter if isinstance(voter, str) else ""
    if not 8 <= len(text) <= VOTER_CHARS or not all(c.isalnum() or c in "-_" for c in text):
        raise StackError("E_VALUE", f"{shown(voter, 30)} is not a student session's vote token",
                         node="the vote", hint="vote from the class link's page (/learn?class=ID)")
    return text


def by_step(rounds: tuple[Round, ...]) -> list[tuple[Round, ...]]:
    """``rounds`` grouped by lesson and step, in the order the class reached them."""
    steps: dict[tuple[str, int], list[Round]] = {}
    for counted in rounds:
        steps.setdefault((counted.lesson, counted.step), []).append(counted)
    return [tuple(found) for found in steps.values()]


def step_table(rounds: tuple[Round, ...]) -> list[dict[str, str]]:
    """One step's rounds side by side, a row per choice: ``{"choice": ..., "round 1":
    "3 of 5 (60%)", "round 2": ..., "the run": "supports it" or ""}``.

    >>> high = step_table((Round("p", 1, 1, ("low", "high"), (1, 3)),
    ...                    Round("p", 1, 2, ("low", "high"), (0, 4), True, 0.93, "high")))[1]
    >>> high["round 1"], high["round 2"], high["the run"]
    ('3 of 4', '4 of 4', '0.93 supports it')
    """
    rows = []
    for choice in rounds[0].choices:
        row = {"choice": choice}
        for counted in rounds:
            row[f"round {counted.round}"] = (f"{counted.counts[counted.choices.index(choice)]} "
                                             f"of {counted.voted}")
        run = next((r for r in reversed(rounds) if r.supported is not None), None)
        row["the run"] = (f"{run.value:.2f} supports it" if run is not None
                          and run.supported == choice else "")
        rows.append(row)
    return rows


def votes_csv(rounds: tuple[Round, ...]) -> str:
    """The class's votes as CSV, one row per round and choice: lesson, step, round, choice,
    count, share, the run's number and whether the run supports the choice. Counts only:
    no voter appears in it.

    >>> print(votes_csv((Round("positions", 2, 1, ("low", "high"), (1, 3), True, 0.93, "high"),)))
    lesson,step,round,choice,count,share,run_number,run_supports
    positions,2,1,low,1,0.25,0.93,no
    positions,2,1,high,3,0.75,0.93,yes
    <BLANKLINE>
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for counted in rounds:
        for choice, count in zip(counted.choices, counted.counts):
            supports = "" if counted.supported is None else (
                "yes" if choice == counted.supported else "no")
            writer.writerow((counted.lesson, counted.step, counted.round, choice, count,
                             f"{counted.share(choice):.2f}",
                             "" if counted.value is None else f"{counted.value:.2f}", supports))
    return out.getvalue()


__all__ = ["Ballot", "MAX_VOTERS", "Round", "Tally", "Votes", "VOTES_PER_SECOND", "by_step",
           "new_voter_token", "step_table", "votes_csv", "voter_token"]
