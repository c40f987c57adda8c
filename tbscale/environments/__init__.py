"""Environments: where attempts run, behind one protocol (tbscale.environments.base). Backends
register by name or through the `tbscale.environments` entry point (environments/registry.py):
tbscale's own are `docker` (the local engine, or any Docker host; tasks with a compose file run as
compose projects) and `compose`."""

from tbscale.environments.base import (Backend, BaseBackend, BoundedOutput, Capabilities, CleanResult, ComposeSpec,
                                       Environment, ExecResult, NoOptions, PhaseView, Snapshot, StartSpec,
                                       snapshot_of)
from tbscale.environments.registry import (DEFAULT_BACKEND, BackendOptionsError, backend_name, backend_names,
                                           backend_options, get_backend, open_backend, register_backend)

__all__ = ["Backend", "BackendOptionsError", "BaseBackend", "BoundedOutput", "Capabilities", "CleanResult",
           "ComposeSpec", "DEFAULT_BACKEND", "Environment", "ExecResult", "NoOptions", "PhaseView", "Snapshot", "StartSpec",
           "snapshot_of",
           "backend_name", "backend_names", "backend_options", "get_backend", "open_backend", "register_backend"]
