"""SWE-bench instances through `datasets`: a hub name, or local json / jsonl / parquet files, or a
swebench task repo; then the filters of the config (ids, a regex, a slice) and the columns check.

swebench 5.x grades from the instance itself: `eval_script` (which applies the test patch and runs
the tests between swebench's output markers), `log_parser` (a key of swebench's PARSER_REGISTRY),
`eval_type` and `image` are dataset columns. Rows without them (older copies of the datasets)
cannot be graded by the pinned swebench, and are refused at load time with the missing columns
named.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tbscale.errors import TbscaleError
from tbscale.tasks.swebench.config import SWEbenchSource, parse_slice
from tbscale.tasks.swebench.row import SWEbenchRow

REQUIRED_FOR_AGENT = ("instance_id", "repo", "base_commit", "problem_statement")
REQUIRED_FOR_GRADING = ("version", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script", "log_parser", "eval_type")
HUB_PROBE_TIMEOUT_SEC = 3.0


def load_instances(src: SWEbenchSource) -> list[SWEbenchRow]:
    """Every row of the configured source, as plain dicts, before filtering."""
    if src.dataset is None:
        return _load_task_repo(src)
    with _quiet_datasets():
        return _load_dataset(src.dataset, src.split, src.cache_dir)


@contextlib.contextmanager
def _quiet_datasets():
    """No `datasets` progress bars over tbscale's own output."""
    import datasets

    was_enabled = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _load_task_repo(src: SWEbenchSource) -> list[SWEbenchRow]:
    from swebench.task.repo import load_task_repo

    path = Path(src.task_repo).expanduser()
    if not path.is_dir():
        raise TbscaleError(f"tasks.swebench.task_repo: {src.task_repo}: no such folder")
    try:
        rows = load_task_repo(path)
    except (FileNotFoundError, KeyError, OSError) as e:
        raise TbscaleError(f"tasks.swebench.task_repo: {src.task_repo}: {e}") from None
    # As swebench's run_evaluation does for a task repo: the split applies unless ids are named.
    if not src.instance_ids:
        rows = [r for r in rows if r.get("split", src.split) == src.split]
    return rows


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.endswith((".json", ".jsonl", ".parquet"))


def _load_dataset(name: str, split: str, cache_dir: str | None) -> list[SWEbenchRow]:
    from datasets import load_dataset

    path = Path(name).expanduser()
    where = f"tasks.swebench.dataset: {name}"
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix not in (".json", ".jsonl", ".parquet"):
            raise TbscaleError(f"{where}: a local dataset must be .json, .jsonl or .parquet")
        builder = "parquet" if suffix == ".parquet" else "json"
        return _rows(_guard(where, lambda: load_dataset(builder, data_files=str(path), split="train",
                                                         cache_dir=cache_dir)))
    if path.is_dir():
        return _rows(_load_folder(path, split, cache_dir, where))
    if _looks_like_path(name):
        raise TbscaleError(f"{where}: no such file or folder")
    return _rows(_load_hub(name, split, cache_dir))


def _load_folder(path: Path, split: str, cache_dir: str | None, where: str):
    from datasets import load_dataset, load_from_disk

    for ext, builder in ((".parquet", "parquet"), (".jsonl", "json"), (".json", "json")):
        f = path / f"{split}{ext}"
        if f.is_file():
            return _guard(where, lambda: load_dataset(builder, data_files=str(f), split="train", cache_dir=cache_dir))
    for candidate in (path / split, path):
        if (candidate / "dataset_info.json").is_file() or (candidate / "dataset_dict.json").is_file():
            ds = _guard(where, lambda: load_from_disk(str(candidate)))
            if hasattr(ds, "keys"):  # a DatasetDict
                if split not in ds:
                    raise TbscaleError(f"{where}: no split {split!r} (it has: {', '.join(ds.keys())})")
                ds = ds[split]
            return ds
    raise TbscaleError(f"{where}: a folder must hold {split}.parquet, {split}.jsonl, {split}.json, "
                       "or a datasets.save_to_disk copy")


def _guard(where: str, fn):
    try:
        return fn()
    except TbscaleError:
        raise
    except Exception as e:  # datasets raises many kinds for unreadable files
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise TbscaleError(f"{where}: cannot read it ({type(e).__name__}: {first})") from None


def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT_SEC) -> bool:
    """Can this machine open a connection to the Hugging Face hub (or its configured proxy)?"""
    from huggingface_hub import constants

    proxy = next((os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
                  if os.environ.get(k)), None)
    url = urlparse(proxy or constants.ENDPOINT)
    host = url.hostname
    port = url.port or (443 if url.scheme == "https" else 80)
    if not host:
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_mode():
    """Hub offline mode for the duration, as HF_HUB_OFFLINE=1 would give: a cached copy loads, a
    missing one fails at once instead of after minutes of retries."""
    import datasets.config as dconfig
    from huggingface_hub import constants

    saved = dconfig.HF_HUB_OFFLINE, getattr(dconfig, "HF_DATASETS_OFFLINE", None), constants.HF_HUB_OFFLINE
    dconfig.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    if saved[1] is not None:
        dconfig.HF_DATASETS_OFFLINE = True
    try:
        yield
    finally:
        dconfig.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved[0], saved[2]
        if saved[1] is not None:
            dconfig.HF_DATASETS_OFFLINE = saved[1]


def _load_hub(name: str, split: str, cache_dir: str | None):
    import datasets.config as dconfig
    from datasets import load_dataset

    where = f"tasks.swebench.dataset: {name}"
    offline = bool(dconfig.HF_HUB_OFFLINE)
    unreachable = not offline and not hub_reachable()
    try:
        with _offline_mode() if unreachable else contextlib.nullcontext():
            return load_dataset(name, split=split, cache_dir=cache_dir)
    except Exception as e:
        detail = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
        if offline or unreachable:
            why = "hub offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)" if offline else \
                  "the Hugging Face hub cannot be reached from this machine"
            raise TbscaleError(
                f"{where}: {why} and no cached copy of it was found ({detail}); save it where the hub is "
                f"reachable (datasets.load_dataset({name!r}, split={split!r}).to_parquet('{split}.parquet')) "
                "and set `dataset:` to that local file") from None
        raise TbscaleError(f"{where}: cannot load split {split!r} from the hub ({detail})") from None


def _rows(ds) -> list[SWEbenchRow]:
    return [dict(r) for r in ds]  # type: ignore[misc]  (checked by check_columns)


def check_columns(rows: list[SWEbenchRow], source: str) -> None:
    """Every row carries what the agent and swebench's grading need; names what is missing."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    for r in rows:
        missing = [c for c in REQUIRED_FOR_AGENT + REQUIRED_FOR_GRADING if r.get(c) is None or r.get(c) == ""]
        if missing:
            iid = r.get("instance_id", "?")
            legacy = [c for c in ("eval_script", "log_parser", "eval_type") if c in missing]
            hint = (" — swebench>=5 grades with the instance's own eval_script/log_parser/eval_type; use a "
                    "dataset that carries them (SWE-bench/SWE-bench_Verified on the hub, or a swebench task "
                    "repo via `task_repo:`)") if legacy else ""
            raise TbscaleError(f"tasks.swebench: {source}: instance {iid} has no {', '.join(missing)}{hint}")
        if r["log_parser"] not in PARSER_REGISTRY:
            raise TbscaleError(f"tasks.swebench: {source}: instance {r['instance_id']}: log_parser "
                               f"{r['log_parser']!r} is not in swebench's PARSER_REGISTRY")
        if r["eval_type"] not in ("pass_and_fail", "fail_only"):
            raise TbscaleError(f"tasks.swebench: {source}: instance {r['instance_id']}: eval_type "
                               f"{r['eval_type']!r} is not pass_and_fail or fail_only")


def select(rows: list[SWEbenchRow], src: SWEbenchSource, include: list[str] | None = None,
           exclude: list[str] | None = None) -> list[SWEbenchRow]:
    """The config's filters, in order: instance_ids, filter, slice; then the experiment's
    include / exclude (task ids are instance ids). Names that match nothing are errors."""
    seen: set[str] = set()
    for r in rows:
        iid = r.get("instance_id")
        if not iid:
            raise TbscaleError("tasks.swebench: a row has no instance_id")
        if iid in seen:
            raise TbscaleError(f"tasks.swebench: instance {iid} appears twice in the dataset")
        seen.add(iid)
    if src.instance_ids is not None:
        missing = [i for i in src.instance_ids if i not in seen]
        if missing:
            raise TbscaleError(f"tasks.swebench.instance_ids: not in the dataset: {', '.join(missing[:10])}"
                               + (f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""))
        wanted = set(src.instance_ids)
        rows = [r for r in rows if r["instance_id"] in wanted]
    if src.filter:
        rx = re.compile(src.filter)
        rows = [r for r in rows if rx.search(r["instance_id"])]
    if src.slice:
        rows = rows[parse_slice(src.slice)]
    if include is not None:
        have = {r["instance_id"] for r in rows}
        missing = [i for i in include if i not in have]
        if missing:
            raise TbscaleError(f"tasks.include: not among the selected SWE-bench instances: {', '.join(missing[:10])}")
        wanted = set(include)
        rows = [r for r in rows if r["instance_id"] in wanted]
    if exclude:
        rows = [r for r in rows if r["instance_id"] not in set(exclude)]
    if not rows:
        raise TbscaleError("tasks.swebench: no instances left after the filters")
    return rows
