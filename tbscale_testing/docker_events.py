"""The engine's own record of what a test's run created, for tests that must show nothing of it is
left: containers, compose projects and the networks a project made."""

from __future__ import annotations

import json
import subprocess


class ContainerCreations:
    """The engine's container-create events for one label, streamed while the block runs. (The
    engine keeps only its last 1,024 events for `--since` queries, which a busy engine overwrites
    within seconds, so the stream is opened before and read after.) Opening waits until the stream
    has shown a container of its own, so nothing created inside the block is missed."""

    def __init__(self, label: str):
        self.label, self.events = label, []

    def __enter__(self) -> "ContainerCreations":
        self.proc = subprocess.Popen(["docker", "events", "--filter", "type=container", "--filter", "event=create",
                                      "--filter", f"label={self.label}", "--format", "{{json .}}"],
                                     stdout=subprocess.PIPE, text=True)
        sentinel = subprocess.run(["docker", "create", "--label", self.label, "--label", "org.tbscale.sentinel=1",
                                   "debian:bookworm-slim", "true"], capture_output=True, text=True, check=True)
        subprocess.run(["docker", "rm", "-f", sentinel.stdout.strip()], capture_output=True, check=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # blocks until the sentinel's create arrives
            if json.loads(line)["Actor"]["Attributes"].get("org.tbscale.sentinel"):
                break
        return self

    def __exit__(self, *exc) -> None:
        # A last container of our own marks the end of the stream's part we need.
        end = subprocess.run(["docker", "create", "--label", self.label, "--label", "org.tbscale.sentinel=2",
                              "debian:bookworm-slim", "true"], capture_output=True, text=True, check=True)
        subprocess.run(["docker", "rm", "-f", end.stdout.strip()], capture_output=True, check=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if event["Actor"]["Attributes"].get("org.tbscale.sentinel") == "2":
                break
            self.events.append(event)
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
