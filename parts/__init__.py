"""The pages' parts: pieces of a page that are no page themselves, kept beside views/ (which
holds the pages app.py registers, and only them). A part imports `ui`, `stacklab` and other
parts, never a page.

- `parts.share_panel`: a run shared with a class (Train's share dialog, present mode on
  Train, a student's note on the teacher's link; Explore and Build use it too);
- `parts.explore_table`: Explore's real-model section (a model's or an uploaded file's
  position table, analysed by the pool's table jobs);
- `parts.classroom`: Learn's class, its votes and a teacher's own lesson (its list is there).
"""
