"""A real preview server for tests: uvicorn in a thread on 127.0.0.1 port 0, over a project copy."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from newsletter.config.settings import load_settings
from newsletter.web.listen import LOOPBACK_NAMES, bind_socket, url_of
from newsletter.web.preview.app import PreviewServer, create_server
from newsletter.web.preview.workspace import Workspace


@dataclass
class RunningPreview:
    url: str
    server: PreviewServer
    project: Path

    @property
    def issue_file(self) -> Path:
        return self.project / "issues" / "14.yaml"

    def rewrite(self, old: str, new: str) -> None:
        """Edit the issue file in place, as an editor saving it would."""
        text = self.issue_file.read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in the issue file"
        self.issue_file.write_text(text.replace(old, new, 1), encoding="utf-8")


@contextlib.contextmanager
def running_preview(project: Path) -> Iterator[RunningPreview]:
    config = project / "newsletter.toml"
    workspace = Workspace(config, load_settings(config, environ={}))
    sock = bind_socket("127.0.0.1", 0)
    server = create_server(workspace, trusted_hosts=LOOPBACK_NAMES)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "the preview server died while starting"
        assert time.monotonic() < deadline, "the preview server did not start in 10 s"
        time.sleep(0.01)
    try:
        yield RunningPreview(url_of(sock).rstrip("/"), server, project)
    finally:
        server.stop()
        thread.join(10)
        assert not thread.is_alive(), "the preview server did not stop within 10 s"
