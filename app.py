"""stacklab: the app. `make run` starts it; the pages live in views/, what they stand on in ui/.

Not in pages/: Streamlit 1.67 decides once per server process whether a pages/ folder lies
next to this script (`PagesManager.uses_pages_directory`, set when the first session
starts). If one does, every script run goes through the old folder navigation, which runs
the page file that a direct link (/train?...) names, so this script (the page setup, the
navigation, the training pool) would not run for it; only a visit that runs this script
and reaches `st.navigation` turns that off, for the whole process. tests/test_app.py fails
if a pages/ folder appears here.

The page icon is a picture of the app's own (assets/icon.png, sent as a ``data:`` address:
`ui.navigation.ICON`): a ``:material/...:`` page icon makes the browser fetch its picture
from fonts.gstatic.com, and a classroom's browsers must reach nothing but this server. The
navigation's ``:material/`` icons are drawn with the font Streamlit serves itself.

The pages are declared here and made once per server (`ui.navigation.pages`): every run of
every page runs this script, and a lecture hall opens one link hundreds of times at once.
"""

import streamlit as st

from ui import browsers, navigation, session, style

# a phone's screen is narrow even on its side (844 x 390): the sidebar starts closed there
st.set_page_config(page_title="stacklab", page_icon=navigation.ICON, layout="wide",
                   initial_sidebar_state="collapsed" if browsers.on_phone() else "auto")
style.page_style()  # contrast, focus, and a phone's sizes (ui/style.py), on every page


def pages() -> list[st.Page]:
    """The app's pages. Home is the first; a link made when Build was (``/?stack=...``)
    opens Build (home.py)."""
    return [
        st.Page("views/home.py", title="Home", icon=":material/home:", default=True),
        st.Page("views/learn.py", title="Learn", icon=":material/school:", url_path="learn"),
        st.Page("views/build.py", title="Build", icon=":material/layers:", url_path="build"),
        st.Page("views/train.py", title="Train", icon=":material/model_training:",
                url_path="train"),
        st.Page("views/explore.py", title="Explore", icon=":material/insights:",
                url_path="explore"),
        st.Page("views/compare.py", title="Compare", icon=":material/compare:",
                url_path="compare"),
        st.Page("views/catalog.py", title="Catalog", icon=":material/menu_book:",
                url_path="catalog"),
        # a teacher's own class: reached from Learn's class panel, not from the navigation
        st.Page("views/class_summary.py", title="Class summary", icon=":material/summarize:",
                url_path="class-summary", visibility="hidden"),
    ]


page = st.navigation(navigation.pages(pages))
session.pool()  # the first visit to any page starts the pool and its warmed fork server
page.run()
