"""The class's votes under load (issue 36): a presented lesson, a room of students who vote
on each step, the teacher's projector counting them, and one hostile student.

    python bench/loadtest_votes.py                 # 100 students (a few minutes on 2 cores)
    LOADTEST_SCALE=0.1 python bench/loadtest_votes.py   # a tenth of the class (at least 3)

`make loadtest` runs it after the lecture-hall scenarios (bench/loadtest.py, whose server,
agent API client and figures it reuses). One server with the agent API on; the teacher is an
agent session that presents ``positions``; the students are agent sessions on the class
link. Each page follows as a browser does (`loadtest.Watch`): a student's page asks the
class's watch endpoint at its interval and reruns (one agent request) only when the class
changed; the projector asks the votes' endpoint and reruns its count only when a vote came
in (or the number following changed). On each
step every student votes at a random moment within `VOTE_WINDOW_SECONDS` of seeing the
step; then the teacher reveals (the step's run trains), asks for a second round on step 2,
and moves on. A hostile student sends `HOSTILE_VOTES` votes as fast as the server answers.

Measured: for each vote, the seconds from sending it to the first projector count that
holds it (p50/p95/max; target p95 <= 2 s); each student's polls (its page's endpoint
polls, and apart, its reruns: a rerun over the agent API is a full run of the page) during
the votes beside the same students' on a step where nobody votes (side by side, one run);
the projector's endpoint polls and reruns; the hostile
student's votes counted and refused; the server's CPU per student. Results go to
bench/loadtest_votes.json.
"""

from __future__ import annotations

import json
import random
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from loadtest import (ROOT, AgentError, Server, Watch, class_size,  # noqa: E402
                      distribution, interact, nodes, texts, warm)
from stacklab.serve.classroom.votes import VOTES_PER_SECOND  # noqa: E402

STUDENTS = class_size(100)
VOTE_WINDOW_SECONDS = 10.0  # each student votes within this long of seeing the step
STUDENT_POLL_SECONDS = 1.0  # a student's page asks its class this often (ui/polls.py)
QUIET_SECONDS = 8.0  # the step where nobody votes yet: the polls' baseline
HOSTILE_VOTES = 1000
COUNT_TARGET_S = 2.0  # a vote reaches the projector's count within this (p95)
POLL_TARGET_S = STUDENT_POLL_SECONDS  # answered within its interval: on the step within one poll
LESSON = "positions"
COUNTED = re.compile(r"(\d+) voted of (\d+) following")
STEP = re.compile(r"Step (\d+) of \d+")
OPEN_ROUND = re.compile(r"Round (\d+): your choice goes to the class")


class Agent:
    """One agent session: each request's latency and what its page showed last."""

    def __init__(self, base: str):
        self.base, self.session, self.snapshot = base, None, {}

    def ask(self, **body) -> tuple[dict, float]:
        if self.session:
            body["session_id"] = self.session
        asked = time.monotonic()
        self.snapshot = interact(self.base, body)
        self.session = self.snapshot.get("session_id", self.session)
        return self.snapshot, time.monotonic() - asked


def choices_radio(snapshot: dict) -> dict | None:
    """The step's choices: one radio per class round, keyed ``learn_predict_ROUND``."""
    return next((n for n in nodes(snapshot) if str(n.get("key", "")).startswith("learn_predict")),
                None)


def choices_of(snapshot: dict) -> list[str]:
    return list((choices_radio(snapshot) or {}).get("props", {}).get("options") or [])


def choice(snapshot: dict, picked: str) -> dict:
    """The widget state that picks ``picked`` among the choices on show in ``snapshot``."""
    return {(choices_radio(snapshot) or {}).get("key", "learn_predict"): picked}


class Student(threading.Thread):
    """A student on the class link: follows as the page does (its watch's endpoint polls;
    a rerun when the class changed), and votes once on each open round, at a random moment
    within the vote window of first seeing it."""

    def __init__(self, base: str, class_id: str, stop: threading.Event, go: threading.Event,
                 seed: int):
        super().__init__(daemon=True)
        self.agent, self.class_id, self.stop, self.go = Agent(base), class_id, stop, go
        self.watch = Watch(base)
        self.random = random.Random(seed)
        self.polls = self.watch.polls  # (when, seconds) of each endpoint poll
        self.reruns: list[tuple[float, float]] = []  # (when, seconds) of each page rerun
        self.votes: list[tuple[int, int, float, bool]] = []  # (step, round, sent at, counted)
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            snapshot, _ = self.agent.ask(page="learn", query_params={"class": [self.class_id]})
            due: dict[tuple[int, int], float] = {}
            asks = time.monotonic() + STUDENT_POLL_SECONDS  # the watch's next poll
            while not self.stop.is_set():
                text = texts(snapshot)
                step, open_round = STEP.search(text), OPEN_ROUND.search(text)
                now, vote_at = time.monotonic(), None
                if step and open_round and self.go.is_set():
                    where = (int(step[1]), int(open_round[1]))
                    vote_at = due.setdefault(where, now + self.random.uniform(0, VOTE_WINDOW_SECONDS))
                    if now >= vote_at and choices_of(snapshot) and where not in self.voted():
                        snapshot = self.vote(where, self.random.choice(choices_of(snapshot)))
                        continue
                    vote_at = vote_at if where not in self.voted() else None
                if vote_at is not None and vote_at < asks:  # the click comes first
                    self.stop.wait(max(0.0, vote_at - now))
                    continue
                if self.stop.wait(max(0.0, asks - now)):
                    break
                snapshot = self.follow(snapshot)
                asks = time.monotonic() + self.every
        except (AgentError, OSError) as err:
            self.errors.append(f"{type(err).__name__}: {err}"[:300])

    every = STUDENT_POLL_SECONDS  # as the endpoint last said

    def follow(self, snapshot: dict) -> dict:
        """One poll of the page's watch; the page rerun when the class changed (or the page
        holds no watch: then at each interval, as the component does without an endpoint)."""
        data = Watch.data(snapshot, "/class/")
        if data is not None:
            changed, self.every = self.watch.changed(data)
            if not changed:
                return snapshot
        snapshot, seconds = self.agent.ask()
        self.reruns.append((time.monotonic(), seconds))
        return snapshot

    def voted(self) -> set[tuple[int, int]]:
        return {(s, r) for s, r, _, _ in self.votes}

    def vote(self, where: tuple[int, int], picked: str) -> dict:
        sent = time.monotonic()
        snapshot, _ = self.agent.ask(widget_state=choice(self.agent.snapshot, picked))
        counted = f"Your vote is in (round {where[1]})" in texts(snapshot)
        self.votes.append((*where, sent, counted))
        return snapshot


class Hostile(threading.Thread):
    """A student who sends `HOSTILE_VOTES` votes, alternating choices, without pause."""

    def __init__(self, base: str, class_id: str):
        super().__init__(daemon=True)
        self.agent, self.class_id = Agent(base), class_id
        self.answers = {"counted": 0, "refused_flood": 0, "refused_closed": 0,
                        "ignored_stale": 0, "failed": 0}
        self.seconds = 0.0

    def run(self) -> None:
        snapshot, _ = self.agent.ask(page="learn", query_params={"class": [self.class_id]})
        options, started = choices_of(snapshot), time.monotonic()
        for n in range(HOSTILE_VOTES):
            try:
                snapshot, _ = self.agent.ask(widget_state=choice(snapshot, options[n % 2]))
            except AgentError as err:  # a closed round's choices are disabled: nothing to send
                self.answers["refused_closed" if "disabled_widget" in str(err) else "failed"] += 1
                continue
            except OSError:
                self.answers["failed"] += 1
                continue
            self.answers[answer(texts(snapshot))] += 1
        self.seconds = round(time.monotonic() - started, 1)


def answer(text: str) -> str:
    """What the page said of a vote: counted, refused as a flood, or refused as closed
    (a round revealed, a step moved on)."""
    if "votes a second" in text:
        return "refused_flood"
    if any(closed in text for closed in ("revealed the answer of", "not the class's current",
                                         "asks for no vote")):
        return "refused_closed"
    if "Your vote is in" in text:
        return "counted"
    # cast in a round that had ended (the page drawn before Vote again): counted nothing, and
    # the page asks for the new round's choice
    return "ignored_stale" if OPEN_ROUND.search(text) else "failed"


class Projector(threading.Thread):
    """The teacher's page as the projector follows the votes: its watch asks the votes'
    endpoint at its interval and the page is read again (a rerun) only when the count
    changed: (when, step, round, voted, following) at each read; the teacher's buttons
    pressed between polls."""

    def __init__(self, teacher: Agent, stop: threading.Event):
        super().__init__(daemon=True)
        self.teacher, self.stop = teacher, stop
        self.watch = Watch(teacher.base)
        self.lock = threading.Lock()
        self.pending: list[str] = []  # the buttons to press, in order
        self.seen: list[tuple] = []  # (when, step, round, voted, following) of each read
        self.reruns: list[float] = []  # seconds of each rerun the watch asked for

    def press(self, key: str) -> None:
        with self.lock:
            self.pending.append(key)

    def run(self) -> None:
        snapshot, _ = self.teacher.ask()
        self.read(snapshot)
        while not self.stop.is_set():
            with self.lock:
                key = self.pending.pop(0) if self.pending else None
            if key is not None:
                snapshot, _ = self.teacher.ask(trigger={"key": key})
                self.read(snapshot)
                continue
            data = Watch.data(snapshot, "/votes/")
            every = data["every"] if data else STUDENT_POLL_SECONDS
            if self.stop.wait(every):
                break
            if data is not None and not self.watch.changed(data)[0]:
                continue
            snapshot, seconds = self.teacher.ask()
            self.reruns.append(seconds)
            self.read(snapshot)

    def read(self, snapshot: dict) -> None:
        text = texts(snapshot)
        counted, step = COUNTED.search(text), STEP.search(text)
        rounds = [int(r) for r in re.findall(r"data-round='(\d+)'", text)]
        if counted and step and rounds:
            self.seen.append((time.monotonic(), int(step[1]), max(rounds), int(counted[1]),
                              int(counted[2])))

    def latest(self) -> tuple[float, int, int, int, int] | None:
        return self.seen[-1] if self.seen else None


def count_delays(students: list[Student], seen: list[tuple]) -> list[float]:
    """For each round, the k-th vote sent (in time) reaches the projector at its first read
    that counts k votes or more and began after it was sent: seconds from sending it."""
    delays = []
    rounds = {(s, r) for student in students for s, r, _, ok in student.votes if ok}
    for step, round_ in sorted(rounds):
        sent = sorted(at for student in students for s, r, at, ok in student.votes
                      if ok and (s, r) == (step, round_))
        reads = [(when, voted) for when, s, r, voted, _ in seen if (s, r) == (step, round_)]
        for k, at in enumerate(sent, start=1):
            shown = next((when for when, voted in reads if voted >= k and when >= at), None)
            if shown is not None:
                delays.append(shown - at)
    return delays


def wait_for_votes(projector: Projector, step: int, round_: int, wanted: int) -> None:
    """Until the projector counts ``wanted`` votes on this round, or the window has passed."""
    deadline = time.monotonic() + VOTE_WINDOW_SECONDS + 10
    while time.monotonic() < deadline:
        latest = projector.latest()
        if latest and latest[1:3] == (step, round_) and latest[3] >= wanted:
            return
        time.sleep(0.2)


def lesson(projector: Projector, hostile: Hostile, go: threading.Event,
           students: int) -> tuple[float, float]:
    """The teacher's lesson: a quiet spell (the students poll, nobody votes: the polls'
    baseline, returned as its (start, end)), then step 1 (one round, reveal), step 2 (a
    round, the hostile student's flood, a second round, reveal) and step 3 (a round,
    reveal)."""
    quiet = time.monotonic()
    time.sleep(QUIET_SECONDS)
    window = (quiet, time.monotonic())
    go.set()
    for step in (1, 2, 3):
        if step > 1:
            projector.press("learn_next")
        wait_for_votes(projector, step, 1, students + (step == 3))
        if step == 2:
            hostile.start()
            time.sleep(3)
            projector.press("votes_again")
            wait_for_votes(projector, step, 2, students + 1)
        projector.press("votes_reveal")
        time.sleep(3)
    return window


def open_class(server: Server) -> tuple[Agent, str]:
    """The teacher presents the lesson: their agent session, and the class's id."""
    teacher = Agent(server.base)
    teacher.ask(page="learn", query_params={"lesson": [LESSON], "step": ["1"]})
    snapshot, _ = teacher.ask(trigger={"key": "learn_present"})
    link = next(n["props"]["body"] for n in nodes(snapshot)
                if n.get("type") == "code" and "class=" in n["props"].get("body", ""))
    return teacher, re.search(r"class=([0-9a-f]{8})", link)[1]


def polls_in(students: list[Student], start: float, end: float,
             kind: str = "polls") -> list[float]:
    """The seconds of the students' endpoint polls (or ``reruns``) between two times."""
    return [seconds for student in students for when, seconds in getattr(student, kind)
            if start <= when <= end]


def votes_scenario(server: Server, students: int) -> dict:
    """The scenario (see the module docstring): what it measured."""
    teacher, class_id = open_class(server)
    stop, go = threading.Event(), threading.Event()
    room = [Student(server.base, class_id, stop, go, seed) for seed in range(students)]
    for student in room:
        student.start()
        time.sleep(min(0.1, VOTE_WINDOW_SECONDS / students))  # they open the link over a few s
    projector, hostile = Projector(teacher, stop), Hostile(server.base, class_id)
    projector.start()
    cpu, started = server.cpu(), time.monotonic()
    quiet = lesson(projector, hostile, go, students)
    voting = (quiet[1], time.monotonic())
    stop.set()
    hostile.join(timeout=300)
    for thread in (*room, projector):
        thread.join(timeout=60)
    sent = [ok for student in room for *_, ok in student.votes]
    delays = count_delays(room, projector.seen)
    quiet_polls, voting_polls = (distribution(polls_in(room, *window))
                                 for window in (quiet, voting))
    quiet_ms, voting_ms = (distribution([1000 * t for t in polls_in(room, *window)])
                           for window in (quiet, voting))
    quiet_reruns, voting_reruns = (distribution(polls_in(room, *window, "reruns"))
                                   for window in (quiet, voting))
    return {
        "students": students, "votes_sent": len(sent), "votes_counted": sum(sent),
        "vote_to_projector_s": distribution(delays),
        # a student's poll is its page's watch asking the class's endpoint; a rerun of its
        # page (an agent request) comes only when the class changed
        "poll_quiet_s": quiet_polls, "poll_voting_s": voting_polls,
        "poll_quiet_ms": quiet_ms, "poll_voting_ms": voting_ms,
        "poll_p95_ratio": round(voting_ms.get("p95", 0) / max(quiet_ms.get("p95", 0), 1e-3), 2),
        "rerun_quiet_s": quiet_reruns, "rerun_voting_s": voting_reruns,
        "projector": {"endpoint_polls": len(projector.watch.polls),
                      "endpoint_poll_ms": distribution([1000 * t for _, t in
                                                        projector.watch.polls]),
                      "reruns": len(projector.reruns),
                      "rerun_s": distribution(projector.reruns)},
        "hostile": {**hostile.answers, "seconds": hostile.seconds},
        "most_counted_of_a_round": max((v for _, _, _, v, _ in projector.seen), default=0),
        "rounds_seen": sorted({(s, r) for _, s, r, _, _ in projector.seen}),
        "final_counts": projector.latest(),
        "errors": [e for student in room for e in student.errors][:5],
        "server_cpu_per_student_s": round((server.cpu() - cpu) / students, 3),
        "wall_s": round(time.monotonic() - started, 1),
    }


def targets(report: dict) -> dict[str, bool]:
    delay, poll = report["vote_to_projector_s"].get("p95"), report["poll_voting_s"].get("p95")
    hostile = report["hostile"]
    return {
        f"vote to the projector's count p95 <= {COUNT_TARGET_S:g} s":
            delay is not None and delay <= COUNT_TARGET_S,
        f"students' poll (the class's endpoint) p95 while voting <= {POLL_TARGET_S:g} s":
            poll is not None and poll <= POLL_TARGET_S,
        "every student's vote counted": report["votes_counted"] == report["votes_sent"] > 0
            and not report["errors"],
        "the hostile student's flood refused (at most a few a second count)":
            hostile["refused_flood"] > 0 and hostile["failed"] == 0
            and hostile["counted"] <= VOTES_PER_SECOND * (hostile["seconds"] + 1),
        "the hostile student counts as one voter":
            report["most_counted_of_a_round"] <= report["students"] + 1,
    }


def main() -> dict:
    server = Server(max_sessions=STUDENTS + 20)
    try:
        warm(server)
        report = votes_scenario(server, STUDENTS)
        report["server_alive"] = server.process.poll() is None
    finally:
        server.close()
    report["targets"] = targets(report)
    return report


if __name__ == "__main__":
    result = main()
    (ROOT / "bench" / "loadtest_votes.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "targets"}, indent=1))
    for target, met in result["targets"].items():
        print(f"  {'met   ' if met else 'MISSED'} {target}")
    behaviour = [met for target, met in result["targets"].items() if "<=" not in target]
    sys.exit(0 if all(behaviour) and result["server_alive"] else 1)
