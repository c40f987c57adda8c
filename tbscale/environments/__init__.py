"""Environments: where attempts run, behind one protocol (tbscale.environments.base). Backends
register by name: `docker` (the local engine, or any Docker host), and `compose` for tasks that
bring a docker-compose file."""

from tbscale.environments.base import (Backend, BoundedOutput, ComposeSpec, Environment, ExecResult, PhaseView, StartSpec,
                                       backend_names, get_backend, register_backend)

__all__ = ["Backend", "BoundedOutput", "ComposeSpec", "Environment", "StartSpec", "ExecResult", "PhaseView",
           "backend_names", "get_backend", "register_backend"]
