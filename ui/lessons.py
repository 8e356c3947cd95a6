"""Learn's lessons as the app finds them: the package's and a folder's (``LESSONS``, from
``STACKLAB_LESSONS``), and a teacher's upload.

An upload is read and quick-checked at once (parsed, each stack resolved, linted: the same
errors as ``stacklab lessons check``), and stays in its teacher's session: its id is
``upload-`` and the file's hash, which no link opens. Only when that teacher presents it
does it reach a class: this server keeps the presented lesson under the class's id
(`presented`, in the server's hub, `ui.hub`), and a page following that class, and no other, reads it there. (With the
Ray cluster's classes, students on another app server would not find it: an upload is
this server's.)

Its claims can be checked too: each step trained on seeds 0-2 on the shared pool (the
same runs a class would share), each claim reported as ``needs ≥ 0.6; seeds 0.72 0.75
0.78; margin 0.12``. Until every claim has held, the lesson says on every step that its
claims are unchecked."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from stacklab import StackError
from ui import session
from ui.hub import Hub
from ui.library import (FIGURES, LESSONS, Lesson, MAX_LESSON_BYTES, check, claim_line, margin,
                    quick_check, step_from_link, step_in)

state = session.PageState("lessons", "upload", "checks", "error")

UPLOAD_PREFIX = "upload-"
SEEDS = (0, 1, 2)
_FIGURES = {spec.key: spec for spec in FIGURES}


@dataclass(frozen=True)
class Upload:
    """A teacher's lesson file as read: its name, its hash, the lesson (None when it does
    not parse) and each problem as the checker writes it (file, line, caret, fix)."""

    name: str
    digest: str
    lesson: Lesson | None
    problems: tuple[str, ...]


def read_upload(data: bytes, name: str) -> Upload:
    """Read and quick-check an uploaded file (at most `MAX_LESSON_BYTES` are read)."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    shown_name = "".join(c for c in name if c.isprintable())[:80] or "lesson.md"
    lesson, problems = quick_check(data[:MAX_LESSON_BYTES + 1], shown_name, _FIGURES)
    if lesson is not None:
        lesson = Lesson(UPLOAD_PREFIX + digest, lesson.title, lesson.summary, lesson.steps,
                        origin=shown_name, checked=False)
    return Upload(shown_name, digest, lesson, tuple(str(problem) for problem in problems))


def keep(upload: Upload) -> None:
    """This session's upload is now ``upload`` (a new file forgets the last one's checks)."""
    if state.get("upload") is None or state["upload"].digest != upload.digest:
        state["upload"] = upload
        state.pop("checks")


def uploaded() -> Upload | None:
    return state.get("upload")


def is_upload(lesson_id: str | None) -> bool:
    return bool(lesson_id) and lesson_id.startswith(UPLOAD_PREFIX)


def presented(class_id: str, lesson_id: str) -> None:
    """The teacher presents (or moved) class ``class_id`` on ``lesson_id``: an upload of
    this session is kept for that class, as it is now (checked or not)."""
    upload = uploaded()
    if not is_upload(lesson_id) or upload is None or upload.lesson is None \
            or upload.lesson.id != lesson_id:
        return
    Hub.current().presented.put(class_id, upload.lesson)  # the oldest beyond 256 go


def find(lesson_id: str, class_id: str | None = None) -> Lesson:
    """The lesson ``lesson_id``: a built-in or folder one, this session's upload, or the
    upload presented to the class ``class_id`` this session follows; ``E_ARG`` otherwise."""
    if not is_upload(lesson_id):
        return step_from_link(lesson_id)[0]
    upload = uploaded()
    if upload is not None and upload.lesson is not None and upload.lesson.id == lesson_id:
        return upload.lesson
    lesson = Hub.current().presented.get(class_id) if class_id else None
    if lesson is None or lesson.id != lesson_id:
        raise StackError("E_ARG", "that lesson was uploaded in another session",
                         hint="a teacher's lesson reaches a class only when they present it")
    return lesson


def step_of(lesson_id: str, number, class_id: str | None = None):
    """``(lesson, step)`` for a page: as `find` finds the lesson, as a link reads the step."""
    return step_in(find(lesson_id, class_id), number)


def all_lessons() -> list[Lesson]:
    """The lessons on Learn's list: the built-in and folder ones, then this session's upload."""
    upload = uploaded()
    extra = [upload.lesson] if upload is not None and upload.lesson is not None else []
    return [*LESSONS.values(), *extra]


# -- the claims, trained on the shared pool ---------------------------------------------


def start_checks() -> None:
    """Train each step of this session's upload on every seed of `SEEDS` on the pool (each
    run its own watcher, so none detaches another); a run the pool refuses is kept as
    ``state["error"]`` for the page to show."""
    try:
        _submit_checks()
    except StackError as err:
        state["error"] = err


def _submit_checks() -> None:
    upload = uploaded()
    if upload is None or upload.lesson is None:
        return
    pool, owner = session.pool(), session.owner()
    checks = []
    for number, step in enumerate(upload.lesson.steps, start=1):
        for seed in SEEDS:
            watcher = f"{owner}-check-{number}-{seed}"
            job = pool.submit(watcher, step.source, replace(step.config, seed=seed))
            checks.append((number, watcher, job.id))
    state["checks"] = (upload.digest, tuple(checks))


def training_check():
    """The first of this session's lesson checks still training (a pool job), or None: the
    page follows it (`ui.live_run.follow_run`) to redraw the results as the checks move."""
    checks = state.get("checks")
    if not checks:
        return None
    pool = session.pool()
    for _, watcher, job_id in checks[1]:
        job = pool.get(watcher, job_id)
        if job is not None and job.view().active:
            return job
    return None


def check_lines() -> tuple[list[str], bool, bool] | None:
    """Each step's claim over the seeds trained so far (``claim_line``), whether every run
    has ended and whether every claim held; None before `start_checks`."""
    upload, checks = uploaded(), state.get("checks")
    if upload is None or upload.lesson is None or not checks or checks[0] != upload.digest:
        return None
    pool = session.pool()
    lines, ended, held = [], True, True
    for number, step in enumerate(upload.lesson.steps, start=1):
        runs = [pool.get(watcher, job_id) for at, watcher, job_id in checks[1] if at == number]
        done = [job is None or not job.view().active for job in runs]
        values = [check(step, job.run)[1] if finished and job is not None and job.run is not None
                  else None for job, finished in zip(runs, done)]
        ok = all(value is not None and margin(step.expect, value) >= 0 for value in values)
        ended, held = ended and all(done), held and ok
        said = (claim_line(step.expect, values) + ("" if ok else ": FAILS") if all(done)
                else f"training: {sum(done)} of {len(done)} seeds done")
        lines.append(f"Step {number} ({step.title}): {step.expect.label} {said}")
    if ended and held and not upload.lesson.checked:
        state["upload"] = replace(upload, lesson=replace(upload.lesson, checked=True))
    return lines, ended, held

