"""The class's votes at the size of a projector (Learn's teacher, `parts.classroom.votes`):
each choice a thick bar with its count, the headline "12 voted of 30 following", and the
step's question above them, in type that the back row reads."""

from __future__ import annotations

from html import escape

# The class's votes on the projector: each choice a thick bar with its count, in type that
# the back row reads; the choice the run supports marked once the teacher revealed.
VOTES_CSS = """<style>
.votes { font-family: sans-serif; }
.votes h3 { font-size: 34px; margin: 0 0 12px 0; }
.votes .choice { font-size: 32px; margin: 14px 0 4px 0; }
.votes .track { background: #e8eaf0; border-radius: 8px; height: 56px; }
.votes .bar { background: #4a6fd1; height: 56px; border-radius: 8px; min-width: 6px; }
.votes .supported .bar { background: #1f9d55; }
.votes .supported .choice { font-weight: 700; }
.votes .count { font-size: 30px; margin-top: 4px; }
.votes .run { font-size: 32px; margin-top: 18px; font-weight: 700; }
.votes .voted { font-size: 40px; font-weight: 700; }
.votes .question { font-size: 34px; font-weight: 700; line-height: 1.3; margin: 8px 0 4px 0; }
.votes .measure { font-size: 28px; margin-bottom: 8px; }
</style>"""


def vote_bars(container, counted, title: str) -> None:
    """One round of votes (`stacklab.serve.classroom.votes.Round`) as bars: each
    choice's count and share, and once the run is in, its choice marked and its sentence
    ("5 of 8 predicted ...; the run: 0.93")."""
    rows = []
    for choice, count in zip(counted.choices, counted.counts):
        share = counted.share(choice)
        mark = counted.revealed and choice == counted.supported
        rows.append(
            f"<div class='{'supported' if mark else 'other'}' data-choice='{escape(choice)}'>"
            f"<div class='choice'>{escape(choice)}{' ✓ the run' if mark else ''}</div>"
            f"<div class='track'><div class='bar' style='width:{share:.0%}'></div></div>"
            f"<div class='count'>{count} vote{'s' * (count != 1)}</div></div>")
    sentence = counted.sentence()
    container.html(VOTES_CSS + f"<div class='votes' data-round='{counted.round}'>"
                   f"<h3>{escape(title)}</h3>{''.join(rows)}"
                   + (f"<div class='run'>{escape(sentence)}</div>" if sentence else "")
                   + "</div>")


def voted_line(container, voted: int, following: int) -> None:
    """``12 voted of 30 following``, at the size of the projector's headline."""
    container.html(VOTES_CSS + f"<div class='votes'><div class='voted'>{voted} voted of "
                   f"{following} following</div></div>")


def question_line(container, question: str, measure: str) -> None:
    """The step's question at the projector's size, above the room's votes, and what the
    choices are of (``measure``: "accuracy will be")."""
    container.html(VOTES_CSS + f"<div class='votes' data-question><div class='question'>"
                   f"{escape(' '.join(question.split())[:400])}</div><div class='measure'>"
                   f"{escape(' '.join(measure.split())[:200])}:</div></div>")
