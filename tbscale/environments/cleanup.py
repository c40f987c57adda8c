"""Removing what tbscale left on a Docker engine: containers, compose projects, the networks made
for network policies, and (asked for) images it built; `tbscale clean` and the sweep of orphans
each run starts with.

Only what belongs to an owner that is gone is removed by default (environments/owner.py: the
host, pid and start time on every label). A live run's resources stay unless the run is named;
`every=True` removes every tbscale container on the engine, live or not.
"""

from __future__ import annotations

import time
from typing import Iterable

from tbscale.environments.base import CleanResult
from tbscale.environments.engine import _use_record, build_lock, client
from tbscale.environments.owner import (LABEL_APP, LABEL_HOST, LABEL_PROJECT, LABEL_RUN, LABEL_SESSION, HOST,
                                        describe_owner, owner_state)

# A snapshot's images (environments/snapshots.py): removed with their owner, whether or not `images`.
LABEL_SNAPSHOT = "org.tbscale.snapshot"
# An image used (by a trial on this machine) more recently than this is kept whoever built it: a
# live run may be about to start a container from it.
IMAGE_GRACE_SEC = 600


def _api(host: str | None):
    return client(host).api


def _list_containers(labels: list[str], host: str | None = None) -> list[dict]:
    # The low-level listing returns what it lists; the high-level one inspects each container
    # afterwards and fails on one that another process removed in between.
    return _api(host).containers(all=True, filters={"label": labels})


def _remove_by_id(container_id: str, host: str | None = None) -> int:
    try:
        _api(host).remove_container(container_id, force=True, v=True)
        return 1
    except Exception:  # noqa: BLE001 - gone already: someone else removed it
        return 0


def _remove_networks(nets: Iterable[dict], host: str | None) -> int:
    removed = 0
    for net in nets:
        try:
            _api(host).remove_network(net["Id"])
            removed += 1
        except Exception:  # noqa: BLE001 - still in use, or gone
            pass
    return removed


def remove_compose_project(project: str, host: str | None = None) -> int:
    """What `docker compose down -v` removes, found by the project's labels alone."""
    api = _api(host)
    removed = 0
    for c in api.containers(all=True, filters={"label": [f"{LABEL_PROJECT}={project}"]}):
        removed += _remove_by_id(c["Id"], host)
    _remove_networks(api.networks(filters={"label": [f"{LABEL_PROJECT}={project}"]}), host)
    for vol in (api.volumes(filters={"label": f"{LABEL_PROJECT}={project}"}) or {}).get("Volumes") or []:
        try:
            api.remove_volume(vol["Name"], force=True)
        except Exception:  # noqa: BLE001
            pass
    return removed


def _removable(labels: dict[str, str], runs: set[str]) -> bool:
    return owner_state(labels) == "gone" or (bool(runs) and labels.get(LABEL_RUN) in runs)


def clean(host: str | None = None, *, runs: Iterable[str] = (), labels: Iterable[str] = (),
          images: bool = False) -> CleanResult:
    """Remove the containers (a compose project whole), networks and, with `images`, images of
    owners that are gone, and those of the named runs (their LABEL_RUN values) even when live.
    `labels` ("key=value" or "key") narrows everything to resources that carry them."""
    runs, scope = set(runs), [LABEL_APP, *labels]
    result = CleanResult()
    projects: set[str] = set()
    held: set[str] = set()  # projects with a container that is not removable
    for c in _list_containers(scope, host):
        tags = c.get("Labels") or {}
        if not _removable(tags, runs):
            if owner_state(tags) in ("live", "unknown"):
                who = describe_owner(tags)
                result.kept[who] = result.kept.get(who, 0) + 1
            if tags.get(LABEL_PROJECT):
                held.add(tags[LABEL_PROJECT])
            continue
        if tags.get(LABEL_PROJECT):
            projects.add(tags[LABEL_PROJECT])
        else:
            result.containers += _remove_by_id(c["Id"], host)
    # A project goes whole or not at all, and not while one of its containers has a live owner:
    # one process starts all of a project, so owners that differ within it mean a label came from
    # somewhere else (an image's, inherited), and the live one is the owner to believe.
    for project in sorted(projects - held):
        result.containers += remove_compose_project(project, host)
    api = _api(host)
    result.networks += _remove_networks([n for n in api.networks(filters={"label": scope})
                                         if _removable(n.get("Labels") or {}, runs)], host)
    result.snapshots += remove_snapshots(host, runs=runs, labels=labels)
    if images:
        result.images += _remove_images(host, scope)
    return result


def remove_snapshots(host: str | None = None, *, runs: Iterable[str] = (), labels: Iterable[str] = (),
                     every: bool = False) -> int:
    """Snapshot images whose owner is gone (or of the named runs; `every`: all of them), after the
    containers above; one a live container still runs on stays."""
    api, runs = _api(host), set(runs)
    removed = 0
    found = api.images(all=True, filters={"label": [LABEL_SNAPSHOT, *labels]})
    # newest first: a snapshot taken in a fork before the snapshot that fork started from
    for img in sorted(found, key=lambda i: -int(i.get("Created") or 0)):
        if not every and not _removable(img.get("Labels") or {}, runs):
            continue
        try:
            api.remove_image(img["Id"], force=True)
            removed += 1
        except Exception:  # noqa: BLE001 - a running container uses it, or it is gone
            pass
    return removed


def _remove_images(host: str | None, scope: list[str]) -> int:
    """Images tbscale built whose builder is gone, that no container uses and that no trial on this
    machine used within IMAGE_GRACE_SEC; each removed under its build lock."""
    api = _api(host)
    in_use = {c.get("ImageID") for c in api.containers(all=True)}
    removed = 0
    for img in api.images(filters={"label": scope}):
        tags = [t for t in (img.get("RepoTags") or []) if t != "<none>:<none>"]
        if owner_state(img.get("Labels") or {}) != "gone" or img["Id"] in in_use:
            continue
        records = [_use_record(t) for t in tags]
        if any(r.exists() and time.time() - r.stat().st_mtime < IMAGE_GRACE_SEC for r in records):
            continue
        with build_lock(host, tags[0] if tags else img["Id"]):
            try:
                api.remove_image(img["Id"], force=False)
                removed += 1
            except Exception:  # noqa: BLE001 - a container took it up meanwhile, or it is gone
                continue
        for r in records:
            r.unlink(missing_ok=True)
    return removed


def cleanup_orphans(host: str | None = None) -> int:
    """Remove containers whose tbscale process on this host is gone (killed with SIGKILL, say):
    nothing else would ever free them. A compose project of such a process goes whole (its
    networks and volumes too), and so do the networks tbscale made for network policies.
    Containers of live processes and other hosts are kept."""
    return clean(host, labels=[f"{LABEL_HOST}={HOST}"]).containers


def cleanup_labelled(session: str | None = None, host: str | None = None, labels: Iterable[str] = ()) -> int:
    """Remove every tbscale container (or one session's), live owner or not, with the networks
    they were on: `tbscale clean --all`."""
    scope = [f"{LABEL_SESSION}={session}" if session else LABEL_APP, *labels]
    found = _list_containers(scope, host)
    projects = {(c.get("Labels") or {}).get(LABEL_PROJECT) for c in found} - {None}
    removed = sum(_remove_by_id(c["Id"], host) for c in found)
    api = _api(host)
    nets = api.networks(filters={"label": scope})
    for project in projects:
        nets += api.networks(filters={"label": [f"{LABEL_PROJECT}={project}"]})
    _remove_networks(nets, host)
    remove_snapshots(host, labels=[*labels, *([f"{LABEL_SESSION}={session}"] if session else [])], every=True)
    return removed
