"""The app's server: app.py's pages on Streamlit's own server (`streamlit.starlette.App`),
with Streamlit's static files compressed (`ui.compression`). ``make run`` starts it:

    streamlit run server.py --server.address 0.0.0.0

``streamlit run`` finds ``app`` here and serves it as it serves app.py, with every option
(port, address, config.toml) as before. AppTest and the docs' examples run app.py itself.
"""

from starlette.middleware import Middleware
from streamlit.starlette import App

from ui.compression import CompressedAssets

app = App("app.py", middleware=[Middleware(CompressedAssets)])
