"""The classroom on the pages: a teacher presents a lesson from Learn and the students on
the class link follow and vote. Learn (views/learn.py) and the class summary
(views/class_summary.py) call these; the classes themselves are the library's
(`stacklab.serve.classroom`, through `ui.library` and `session.classes()`).

- `parts.classroom.room`: the class: presenting it, following it (a student's voter
  identity, the class's watch), its link and QR code, ending it;
- `parts.classroom.votes`: a student's vote, the teacher's projector (the count, Reveal,
  Vote again), the rounds kept after the class and their CSV;
- `parts.classroom.projected`: the votes drawn at a projector's size;
- `parts.classroom.upload`: Learn's "Your own lesson", a teacher's lesson file checked and
  opened, and the note on a presented upload whose claims are unchecked.
"""
