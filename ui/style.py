"""The app's own stylesheet, added to every page once per script run (app.py): text that
meets WCAG 2.1 AA's contrast where Streamlit's greys do not, code that wraps instead of
scrolling sideways, a focus ring that shows where the keyboard is, and on a phone's width
controls large enough for a thumb and text large enough to read.

Layout only: no rule here hides anything or changes what a page says.
"""

from __future__ import annotations

import streamlit as st

PHONE_MAX_PX = 640  # Streamlit stacks st.columns below this width: a phone's layout
TOUCH_PX = 44  # the least size of a control on a touch screen (WCAG 2.5.5, Apple and Google)

# Streamlit's caption grey (#828180 on white; an image's caption at opacity 0.6, 2.8:1) is
# 3.9:1, its inline code green (#6d9c8f) 3.0:1 and a disabled widget's label (#acabaa)
# 2.3:1; WCAG AA asks 4.5:1 of text this size (the disabled label stays lighter than the
# rest, at 5.3:1). A code block wraps: a box that scrolls
# sideways must take the keyboard's focus (axe's scrollable-region-focusable), and on a
# phone it would make the reader scroll sideways.
PAGE_CSS = f"""<style>
[data-testid="stCaptionContainer"] {{ color: #585754 !important; opacity: 1 !important; }}
[data-testid="stMarkdownContainer"] code, [data-testid="stCaptionContainer"] code {{
  color: #17614c !important; }}
label[data-testid="stWidgetLabel"][disabled] {{ color: #6b6a67 !important; }}
[data-testid="stMarkdownPre"] pre, [data-testid="stMarkdownPre"] code {{
  white-space: pre-wrap !important; overflow-wrap: anywhere; }}
button:focus-visible, a:focus-visible, [role="tab"]:focus-visible, summary:focus-visible,
label:has(input[type="radio"]:focus-visible), label:has(input[type="checkbox"]:focus-visible) {{
  outline: 3px solid #2563eb !important; outline-offset: 2px; }}
@media (max-width: {PHONE_MAX_PX}px) {{
  [data-testid="stMainBlockContainer"] {{ padding-left: 1rem; padding-right: 1rem; }}
  [data-testid="stButton"] button, [data-testid="stDownloadButton"] button,
  [data-testid="stFormSubmitButton"] button, [data-testid="stPageLink"] a,
  [data-testid="stExpander"] summary, [role="tab"] {{
    min-height: {TOUCH_PX}px; min-width: {TOUCH_PX}px; }}
  [data-testid="stRadioOption"], [data-testid="stCheckbox"] label {{
    min-height: {TOUCH_PX}px; min-width: {TOUCH_PX}px; align-items: center; }}
  [data-testid="stRadio"] [role="radiogroup"] {{ gap: 0 1rem; }}
  [data-testid="stExpandSidebarButton"], [data-testid="stSidebarCollapseButton"] button {{
    min-height: {TOUCH_PX}px; min-width: {TOUCH_PX}px; }}
  [data-testid="stMarkdownContainer"] code, [data-testid="stCaptionContainer"] code,
  [data-testid="stMarkdownPre"] code {{ font-size: 14px; }}
}}
</style>"""


def page_style() -> None:
    """The app's stylesheet (`PAGE_CSS`) on this page."""
    st.html(PAGE_CSS)
