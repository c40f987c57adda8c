"""The image each SWE-bench instance runs in: its name (building it is the environment layer's
job, in tbscale.environments.swebench_images).

Name, in order: the config's `image` template; the instance's own `image` column (swebench>=5
datasets carry it); swebench's derived name (ImageSpec.name: `<namespace>/sweb.eval.<arch>.<id>:<tag>`
with `__` spelled `_1776_`, the public prebuilt evaluation images when the namespace is
`swebench`). The same name is used by the agent's container and by grading.

"""

from __future__ import annotations

from typing import Any

from tbscale.errors import TbscaleError
from tbscale.tasks.swebench.config import SWEbenchSource
from tbscale.tasks.swebench.row import SWEbenchRow

def docker_id(instance_id: str) -> str:
    """The instance id as swebench spells it in image names (Docker Hub forbids `__`)."""
    return instance_id.lower().replace("__", "_1776_")


def _spec_arch(arch: str) -> str:
    return "amd64" if arch == "x86_64" else arch


def derived_image(instance_id: str, namespace: str | None, tag: str = "latest", arch: str = "x86_64") -> str:
    """swebench's own name for an instance image (swebench.image_builder.ImageSpec.name)."""
    from swebench.image_builder.image_spec import ImageSpec

    return ImageSpec(instance_id=instance_id, dockerfile="(name only)", namespace=namespace or None,
                     tag=tag, arch=_spec_arch(arch)).name


def template_fields(row: SWEbenchRow, arch: str) -> dict[str, str]:
    iid = row["instance_id"]
    return {"instance_id": iid, "instance_id_lower": iid.lower(), "docker_id": docker_id(iid),
            "repo": row.get("repo", ""), "repo_slug": str(row.get("repo", "")).replace("/", "__"),
            "version": str(row.get("version", "")), "arch": arch}


def resolve_image(row: SWEbenchRow, src: SWEbenchSource) -> str:
    if src.image:
        try:
            return src.image.format(**template_fields(row, src.arch))
        except (KeyError, IndexError, ValueError) as e:
            raise TbscaleError(f"tasks.swebench.image: cannot fill the template {src.image!r} ({type(e).__name__}: {e}); "
                               "fields: instance_id, instance_id_lower, docker_id, repo, repo_slug, version, arch") from None
    if row.get("image"):
        return str(row["image"])
    return derived_image(row["instance_id"], src.namespace, src.tag, src.arch)


