"""Reading tbscale's own YAML files strictly: a key given twice in one mapping is an error naming
the key and both lines (PyYAML would keep the last one silently), and a file is refused when it is
larger than a bound or expands, through its aliases, to more values than a bound (an "alias bomb":
a few lines that become billions of values when a model or JSON dump walks them).

Task files (task.yaml, compose files) are read as their own harnesses read them, leniently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tbscale.config import bounds
from tbscale.errors import TbscaleError

MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first: int):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first = key, line, first


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (a merge `<<:` may still be
    overridden by the mapping's own keys, as YAML intends)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False):  # type: ignore[override]
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: PyYAML reports it itself
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise DuplicateKey(key, line, first)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: Node, cap: int) -> int:
    """Values the document holds once every alias is expanded (stops counting above `cap`)."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:
            raise yaml.YAMLError("recursive alias: a value contains itself")
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            for child in node.value:
                total += size(child)
                if total > cap:
                    break
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > cap:
                    break
        active.discard(key)
        memo[key] = total = min(total, cap + 1)
        return total

    return size(root)


def load_yaml(text: str, where: str | Path) -> Any:
    """A YAML document read strictly (see the module doc); every problem is a one-line TbscaleError."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        cap = bounds.limit("yaml_values")
        if _expanded_size(node, cap) > cap:
            raise TbscaleError(f"{where}: the YAML expands to more than {cap:,} values through its aliases "
                               f"(*name); if you mean it, raise the limit with {bounds.BOUNDS['yaml_values'].env}")
        return loader.construct_document(node)
    except DuplicateKey as e:
        raise TbscaleError(f"{where}: line {e.line}: duplicate key {e.key!r} (first given at line {e.first})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark else ""
        raise TbscaleError(f"{where}:{line} not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except RecursionError:
        raise TbscaleError(f"{where}: the YAML is nested too deeply to read") from None
    finally:
        loader.dispose()


def read_yaml_file(path: str | Path) -> Any:
    """A YAML file read strictly, refused above the size bound; missing, folder, unreadable and
    non-UTF-8 files are one-line TbscaleErrors."""
    path = Path(path)
    cap = bounds.limit("yaml_bytes")
    try:
        if path.is_dir():
            raise IsADirectoryError
        with open(path, "rb") as f:  # at most cap + 1 bytes: a device or a huge file is not read whole
            raw = f.read(cap + 1)
        if len(raw) > cap:
            raise TbscaleError(f"{path}: larger than the limit of {cap:,} bytes for a YAML file; if you mean it, "
                               f"raise the limit with {bounds.BOUNDS['yaml_bytes'].env}")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise TbscaleError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TbscaleError(f"{path}: is a folder, not a YAML file") from None
    except NotADirectoryError:
        raise TbscaleError(f"{path}: no such file (a part of the path is a file)") from None
    except PermissionError:
        raise TbscaleError(f"{path}: cannot read it (permission denied)") from None
    except UnicodeDecodeError as e:
        raise TbscaleError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise TbscaleError(f"{path}: cannot read it ({e.strerror or e})") from None
    return load_yaml(text, path)
