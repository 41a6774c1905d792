"""One stdlib HTTP server on 127.0.0.1 for the tests' fake endpoints (OpenAI-compatible backends,
streamed replies): an ephemeral port, one daemon thread per connection, quiet logs, `url` ending in
`/v1`, `close()`. Each fake supplies only its request handler."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that does not log every request to stderr."""

    def log_message(self, *args) -> None:
        pass


class LoopbackServer:
    """`handler` served on 127.0.0.1:<free port> from a background thread until `close()`.
    `backlog`: the listen queue (many clients connecting at once); errors of clients that hung up
    (timeouts) are not printed."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], backlog: int = 1024) -> None:
        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = backlog

            def handle_error(self, request, client_address) -> None:  # a client that timed out hangs up
                pass

        self.httpd = Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
