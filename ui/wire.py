"""What a following page and the server's watch endpoints agree on, with no Streamlit in
it (the endpoints import it, `ui.endpoints`; the pages, `ui.watch` and `ui.follow`)."""

PREFIX = "/_stacklab/watch"  # the watch endpoints' paths (ui.endpoints), under the base URL path
VOTER_HEADER = "X-Stacklab-Voter"  # a follower's vote token: counted as following, never in a URL
VOTER_COOKIE = "stacklab_voter_"  # + the class id: the browser keeps its voter identity there
