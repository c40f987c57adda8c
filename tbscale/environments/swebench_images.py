"""Building SWE-bench instance images when the config asks for it.

Builds read the Dockerfile and build context of tasks/<instance_id>/ in a swebench task repo, on the
engine the run's docker backend starts containers on (`environment.options.host`, or DOCKER_HOST
and the local socket), so the trials find the images they were built for:
- `build: swebench` calls swebench.image_builder (make_image_spec + build_instance_images), which
  runs `docker buildx build`, exactly as `swebench images build` / `swebench eval --task-repo` do;
- `build: docker` builds the same Dockerfile and context with the Docker engine's classic builder
  through the docker SDK (for engines without buildx), labelling the image with the context's
  content hash so an edited task is rebuilt.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from tbscale.environments.docker import LABEL_APP, client, hash_directory
from tbscale.environments.network_failures import build_error_log
from tbscale.errors import TbscaleError
from tbscale.tasks.swebench.config import SWEbenchSource
from tbscale.tasks.swebench.row import SWEbenchRow

CONTEXT_LABEL = "org.tbscale.swebench.context"


def _task_repo_parts(src: SWEbenchSource, ids: list[str]) -> tuple[dict[str, str], dict[str, Path]]:
    from swebench.task.repo import load_dockerfiles, task_paths

    repo = Path(src.task_repo).expanduser()
    try:
        dockerfiles = load_dockerfiles(repo, ids)
        contexts = task_paths(repo, ids)
    except (FileNotFoundError, OSError) as e:
        raise TbscaleError(f"tasks.swebench.task_repo: {src.task_repo}: {e}") from None
    missing = [i for i in ids if i not in dockerfiles]
    if missing:
        raise TbscaleError(f"tasks.swebench.task_repo: {src.task_repo} has no tasks/<id>/Dockerfile for "
                           f"{', '.join(missing[:10])}")
    return dockerfiles, contexts


def _image_exists(client, name: str):
    import docker

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def prepare_images(rows: list[SWEbenchRow], images: dict[str, str], src: SWEbenchSource,
                   log=None, host: str | None = None) -> None:
    """Build the images of `rows` as `src.build` says (a no-op for build: none), on the engine at
    `host` (None: DOCKER_HOST or the local socket)."""
    if src.build == "none":
        return
    log = log or (lambda msg: print(msg, file=sys.stderr))
    ids = [r["instance_id"] for r in rows]
    dockerfiles, contexts = _task_repo_parts(src, ids)
    if src.build == "docker":
        build_with_docker(ids, images, contexts, src, log, host=host)
    else:
        build_with_swebench(rows, images, dockerfiles, contexts, src, log, host=host)


# ---- build: docker (classic builder through the SDK) ---------------------------------------------

def build_with_docker(ids: list[str], images: dict[str, str], contexts: dict[str, Path], src: SWEbenchSource,
                      log, host: str | None = None) -> list[str]:
    """Build each instance's Dockerfile in its task folder on the engine at `host`; returns the ids
    built (others were current)."""
    c = client(host)
    todo = []
    for iid in ids:
        digest = hash_directory(contexts[iid])
        img = _image_exists(c, images[iid])
        if img is None or (img.labels or {}).get(CONTEXT_LABEL) != digest:
            todo.append((iid, digest))
    if not todo:
        return []
    log(f"building {len(todo)} SWE-bench image(s) with the Docker engine's builder ...")

    def one(item: tuple[str, str]) -> str | None:
        import docker

        iid, digest = item
        try:
            c.images.build(path=str(contexts[iid]), dockerfile="Dockerfile", tag=images[iid], rm=True,
                           forcerm=True, labels={LABEL_APP: "1", CONTEXT_LABEL: digest,
                                                 "org.tbscale.task": iid},
                           timeout=int(src.build_timeout_sec))
        except docker.errors.BuildError as e:
            return f"{iid}: {e.msg}\n{build_error_log(e.build_log)}"
        except docker.errors.APIError as e:
            return f"{iid}: {e.explanation}"
        return None

    with ThreadPoolExecutor(max_workers=src.build_workers) as pool:
        failures = [f for f in pool.map(one, todo) if f]
    if failures:
        raise TbscaleError(f"building {len(failures)} SWE-bench image(s) failed; first: {failures[0]}")
    return [iid for iid, _ in todo]


# ---- build: swebench (swebench.image_builder, docker buildx) -------------------------------------

def swebench_image_specs(rows: list[SWEbenchRow], images: dict[str, str], dockerfiles: dict[str, str],
                         contexts: dict[str, Path]) -> list:
    """swebench ImageSpecs for the rows; namespace and tag come from the name each image will be
    used under, as swebench's run_evaluation does before it builds from a task repo."""
    from swebench.image_builder import make_image_spec

    specs = []
    for r in rows:
        iid = r["instance_id"]
        name = images[iid]
        last = name.rsplit("/", 1)[-1]
        namespace = name.split("/")[0] if "/" in name else None
        tag = last.rsplit(":", 1)[1] if ":" in last else "latest"
        specs.append(make_image_spec(r, dockerfiles[iid], namespace, tag, contexts.get(iid)))
    return specs


@contextmanager
def _docker_cli_host(host: str | None):
    """DOCKER_HOST set to `host` while swebench runs the `docker buildx` CLI, which reads no other
    setting; restored afterwards (unchanged when `host` is None)."""
    if host is None:
        yield
        return
    before = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = before


def build_with_swebench(rows: list[SWEbenchRow], images: dict[str, str], dockerfiles: dict[str, str],
                        contexts: dict[str, Path], src: SWEbenchSource, log, *, dry_run: bool = False,
                        host: str | None = None) -> list:
    """Build the missing images with swebench.image_builder.build_instance_images, on the engine at
    `host` (its client, and DOCKER_HOST for the buildx it runs). swebench names each image
    `spec.name`; when that differs from the configured name the image is tagged with it too. Every
    image must exist afterwards (unless dry_run), or this raises naming swebench's logs."""
    from swebench.image_builder import build_instance_images

    c = client(host)
    specs = swebench_image_specs(rows, images, dockerfiles, contexts)
    todo = [s for s in specs if dry_run or _image_exists(c, images[s.instance_id]) is None]
    if not todo:
        return []
    log(f"building {len(todo)} SWE-bench image(s) with swebench.image_builder (docker buildx) ...")
    with _docker_cli_host(host):
        build_instance_images(client=c, image_specs=todo, force_rebuild=False, max_workers=src.build_workers,
                              dry_run=dry_run)
    if dry_run:
        return todo
    failed = []
    for s in todo:
        want = images[s.instance_id]
        if _image_exists(c, want) is not None:
            continue
        built = _image_exists(c, s.name)
        if built is not None:
            repo, _, tag = want.rpartition(":") if ":" in want.rsplit("/", 1)[-1] else (want, "", "latest")
            built.tag(repo, tag)
            continue
        failed.append(s)
    if failed:
        from swebench.image_builder.constants import IMAGE_BUILDER_LOG_DIR

        first = failed[0]
        raise TbscaleError(
            f"swebench could not build {len(failed)} image(s) ({', '.join(s.instance_id for s in failed[:5])}); "
            f"see {IMAGE_BUILDER_LOG_DIR / first.filesafe_name / 'build_image.log'}. swebench builds with "
            "`docker buildx`; on an engine without buildx use `build: docker`")
    return todo
