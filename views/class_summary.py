"""Class summary: after (or during) a class, each step's votes before and after the
discussion, side by side, and the run that answered them; the votes as CSV. Reached from
the teacher's class panel on Learn (not in the navigation: it shows this session's own
class). Counts only: no student appears here or in the CSV."""

import streamlit as st

from ui import urls
from ui.library import LESSONS, by_step, step_table
from ui.markdown import plain
from parts.classroom import votes

urls.start(own={})  # its address holds nothing: Back leads out of it, not to itself
st.title("Class summary")
class_id, rounds = votes.class_rounds()
if not rounds:
    st.info("No votes yet. Present a lesson to a class on Learn: while it is on a step, each "
            "student's prediction is a vote, and this page lists them, step by step.",
            icon=":material/how_to_vote:")
    st.page_link("views/learn.py", label="Open Learn", icon=":material/school:")
    st.stop()

st.caption(f"Class `{plain(str(class_id), 20)}`: each "
           "step's rounds of votes side by side (round 2 after the discussion), and the "
           "number of the run the teacher revealed. Counts only: no student is named.")
votes.download(st, "summary_csv")
for rounds_of_step in by_step(rounds):
    first = rounds_of_step[0]
    lesson = LESSONS.get(first.lesson)
    step = lesson.steps[first.step - 1] if lesson and 0 < first.step <= len(lesson.steps) else None
    title = f"{lesson.title} · " if lesson else ""
    st.subheader(plain(f"{title}step {first.step}" + (f": {step.title}" if step else ""), 300))
    if step is not None:
        st.markdown(f"**Asked.** {plain(step.question, 400)}")
    st.dataframe(step_table(rounds_of_step), hide_index=True,
                 key=f"summary_{first.lesson}_{first.step}")
    said = next((r.sentence() for r in reversed(rounds_of_step) if r.sentence()), "")
    st.markdown(f"**The run.** {plain(said, 300)}" if said else
                "**The run.** Not revealed in class.")
