"""The engine's own record of what a test's run created, for tests that must show nothing of it is
left: containers, compose projects and the networks a project made."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time


class ContainerCreations:
    """The engine's container-create events for one label, streamed while the block runs. (The
    engine keeps only its last 1,024 events for `--since` queries, which a busy engine overwrites
    within seconds, so the stream is opened before and read after.) Opening waits until the stream
    has shown a container of its own, created again until one is seen (a container created before
    the stream has subscribed is never shown in it), so nothing created inside the block is
    missed; closing waits for a last one."""

    def __init__(self, label: str):
        self.label, self.events = label, []
        self._lines: queue.Queue = queue.Queue()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def _mark(self, value: str, keep: bool) -> bool:
        """Create (and remove) a container labelled `value`; whether the stream showed it within a
        while. Events before it are kept in `events` when `keep`."""
        made = subprocess.run(["docker", "create", "--label", self.label, "--label", f"org.tbscale.sentinel={value}",
                               "debian:bookworm-slim", "true"], capture_output=True, text=True, check=True)
        subprocess.run(["docker", "rm", "-f", made.stdout.strip()], capture_output=True, check=True)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                event = self._lines.get(timeout=1)
            except queue.Empty:
                continue
            if event is None:
                raise RuntimeError("docker events ended")
            mark = event["Actor"]["Attributes"].get("org.tbscale.sentinel")
            if mark == value:
                return True
            if keep and mark is None:
                self.events.append(event)
        return False

    def __enter__(self) -> "ContainerCreations":
        self.proc = subprocess.Popen(["docker", "events", "--filter", "type=container", "--filter", "event=create",
                                      "--filter", f"label={self.label}", "--format", "{{json .}}"],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        for attempt in range(20):
            if self._mark(f"open-{attempt}", keep=False):
                return self
        self.proc.kill()
        raise RuntimeError("the docker events stream never showed a container of its own")

    def __exit__(self, *exc) -> None:
        try:
            for attempt in range(20):
                if self._mark(f"close-{attempt}", keep=True):
                    return
            raise RuntimeError("the docker events stream never showed its closing container")
        finally:
            self.proc.kill()
            self.proc.wait()

    def attribute(self, key: str) -> set[str]:
        """The values of one label over every container created (a compose project's name, say)."""
        return {e["Actor"]["Attributes"][key] for e in self.events if key in e["Actor"]["Attributes"]}

    def containers(self) -> set[str]:
        return {e["Actor"]["ID"] for e in self.events}


def leftovers(label: str, created: ContainerCreations | None = None) -> dict[str, list[str]]:
    """What the engine still holds of one run: containers, images (snapshots included) and networks
    carrying `label`, and, from `created`, any container it created and any network of a compose
    project it made (those networks carry the project's label, not the run's)."""
    def ids(*args: str) -> list[str]:
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.split()

    left = {"containers": ids("ps", "-aq", "--no-trunc", "--filter", f"label={label}"),
            "images": ids("images", "-aq", "--filter", f"label={label}"),
            "networks": ids("network", "ls", "-q", "--filter", f"label={label}")}
    if created is not None:
        alive = set(ids("ps", "-aq", "--no-trunc"))
        left["containers"] += sorted(created.containers() & alive)
        for project in sorted(created.attribute("com.docker.compose.project")):
            left["networks"] += ids("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}")
    return {k: sorted(set(v)) for k, v in left.items()}
