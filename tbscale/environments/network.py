"""Network policies on a running environment, by network topology (docker SDK only).

A task's policy is `public`, `no-network` or `allowlist` (tbscale.tasks.model.NetworkPolicy), and
it may change between the agent phase and the verifier phase. It is enforced by which Docker
networks the main container is attached to, switched while the container runs (`docker network
connect` / `disconnect`):

* `public`: the container's own networks, as it started (the default bridge for a single
  container, the compose project's networks for a compose environment): the internet and every
  service of the task.
* `no-network`: attached to no network at all; only the loopback interface is left.
* `allowlist`: detached from its own networks and attached to an `internal` network (no route out
  of the host) that tbscale makes for that list, to which only the allowed services of the task's
  compose file are attached as well, under their service names. So the allowed services answer by
  name, every other service does not resolve, and nothing outside the host is reachable.

This needs no privilege, no helper image and no packet filter, so it works on any engine the
docker SDK reaches, local or remote. What topology cannot express is refused, never weakened:
an allowlist entry that is not one of the task's compose services (an internet host name, an IP
address or a CIDR range) is a `TaskRefused` naming the entry. An empty allowlist is the same as
`no-network`.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from tbscale.errors import SandboxError, TaskRefused
from tbscale.tasks.model import LOOPBACK_NAMES, NetworkPolicy


def refusal(policy: NetworkPolicy, services: list[str], key: str = "allowed_hosts") -> str | None:
    """Why `policy` cannot be enforced next to these sidecar services, or None."""
    if policy.mode != "allowlist":
        return None
    for host in policy.allowed_hosts:
        if host in LOOPBACK_NAMES or host in services:
            continue
        where = f"services: {', '.join(services)}" if services else "the task has no compose services"
        return (f"{key} entry {host!r} is not one of the task's compose services ({where}): tbscale enforces "
                "an allowlist by network topology and cannot reach hosts outside the task")
    return None


class NetworkSwitch:
    """Moves one main container between network policies; `sidecars` maps compose service names
    to container ids. Networks it creates carry `labels` and are removed by `close()`."""

    def __init__(self, api, main_id: str, *, name_prefix: str, labels: dict[str, str],
                 sidecars: dict[str, str] | None = None):
        self.api, self.main_id, self.prefix, self.labels = api, main_id, name_prefix, labels
        self.sidecars = dict(sidecars or {})
        self.home = self._attached(main_id)  # network name -> aliases, as the container started
        self.created: dict[str, str] = {}  # allowlist key -> network name
        self.current: str = "public"
        self._lock = threading.Lock()

    def _attached(self, container_id: str) -> dict[str, list[str]]:
        info = self.api.inspect_container(container_id)
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        short = container_id[:12]
        return {name: [a for a in (net.get("Aliases") or []) if a != short]
                for name, net in networks.items() if name not in ("none", "host")}

    def _connect(self, container_id: str, network: str, aliases: list[str] | None) -> None:
        try:
            self.api.connect_container_to_network(container_id, network, aliases=aliases or None)
        except Exception as e:  # noqa: BLE001 - docker.errors.APIError
            if "already exists" in str(e) or "already attached" in str(e):
                return
            raise SandboxError(f"network connect {network} failed: {e}") from None

    def _disconnect(self, container_id: str, network: str) -> None:
        try:
            self.api.disconnect_container_from_network(container_id, network, force=True)
        except Exception as e:  # noqa: BLE001
            if "is not connected" in str(e) or "not found" in str(e).lower():
                return
            raise SandboxError(f"network disconnect {network} failed: {e}") from None

    def _allow_network(self, hosts: tuple[str, ...]) -> str:
        key = ",".join(sorted(hosts))
        if key not in self.created:
            digest = hashlib.sha256(key.encode()).hexdigest()[:8]
            name = f"{self.prefix}-allow-{digest}"
            try:
                self.api.create_network(name, driver="bridge", internal=True, labels=self.labels,
                                        check_duplicate=True)
            except Exception as e:  # noqa: BLE001
                if "already exists" not in str(e):
                    raise SandboxError(f"could not create network {name}: {e}") from None
            self.created[key] = name
            for host in hosts:
                if host in self.sidecars:
                    self._connect(self.sidecars[host], name, [host])
        return self.created[key]

    def apply(self, policy: NetworkPolicy) -> None:
        """Attach the main container for `policy` (a no-op when it is already in force)."""
        problem = refusal(policy, list(self.sidecars))
        if problem:
            raise TaskRefused(problem)
        hosts = tuple(h for h in policy.allowed_hosts if h in self.sidecars)
        if policy.mode == "allowlist" and not hosts:
            policy = NetworkPolicy("no-network")
        wanted = policy.mode if policy.mode != "allowlist" else "allowlist:" + ",".join(sorted(hosts))
        with self._lock:
            if wanted == self.current:
                return
            target: dict[str, list[str] | None] = {}
            if policy.mode == "public":
                target = dict(self.home)
            elif policy.mode == "allowlist":
                target = {self._allow_network(hosts): ["main"]}
            attached = self._attached(self.main_id)
            for name in attached:
                if name not in target:
                    self._disconnect(self.main_id, name)
            for name, aliases in target.items():
                if name not in attached:
                    self._connect(self.main_id, name, aliases)
            self.current = wanted

    def close(self) -> None:
        """Remove the networks this switch made (after detaching whatever is still on them)."""
        for name in list(self.created.values()):
            try:
                info: dict[str, Any] = self.api.inspect_network(name)
                for cid in (info.get("Containers") or {}):
                    self._disconnect(cid, name)
                self.api.remove_network(name)
            except Exception:  # noqa: BLE001 - gone already, or the engine died
                pass
        self.created.clear()
