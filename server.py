"""The app's server: app.py's pages on Streamlit's own server (`streamlit.starlette.App`),
with Streamlit's static files compressed (`ui.compression`), and the watch endpoints that
following pages ask instead of rerunning their scripts (`ui.endpoints`, `ui.watch`). The
server's state is one object, the hub (`ui.hub`), made here at start-up and handed to the
middleware and the endpoints; the pages read the same one (`Hub.current`).
``make run`` starts it:

    streamlit run server.py --server.address 0.0.0.0

``streamlit run`` finds ``app`` here and serves it as it serves app.py, with every option
(port, address, config.toml) as before. AppTest and the docs' examples run app.py itself.
"""

from starlette.middleware import Middleware
from streamlit.starlette import App

from ui.compression import CompressedAssets
from ui.endpoints import routes
from ui.hub import Hub

hub = Hub.start()
app = App("app.py", routes=routes(hub), middleware=[Middleware(CompressedAssets, cache=hub.assets)])
