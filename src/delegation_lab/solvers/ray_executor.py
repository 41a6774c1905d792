"""`executor.kind: ray`: a solver's requests go as batches to a pool of Ray actors, each holding its
own backend (one vLLM engine per GPU worker, a llama.cpp model, an HTTP client, ...).

Actors return raw generations; this process (the driver) turns them into rows with the same
`Solver.answers_for` the local path uses and the cache journals them, so request hashes, rows and
resume semantics do not depend on the executor. Each actor has up to IN_FLIGHT_PER_WORKER tasks
queued, so it never idles while the driver writes. An actor that dies is restarted by Ray
(`max_restarts=-1`); the tasks it held are sent again (counted as `retries`), and since a dead
task returned nothing, no answer is written twice.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Answer, Generation, Request, Solver, batches_of, configured_secrets
from delegation_lab.solvers.params import ExecutorParams, SolverParams

IN_FLIGHT_PER_WORKER = 2
CONNECT_TIMEOUT_S = 5.0
ACTOR_START_TIMEOUT_S = 600.0
"""A backend may load a large model in its actor's constructor."""
PROBE_INTERVAL_S = 0.2
"""How often an actor Ray is restarting is asked whether it is back."""
INSTALL_HINT = "pip install 'delegation-lab[ray]'"


class SolverWorker:
    """One Ray actor: builds its own backend from the solver's params and generates for a batch."""

    def __init__(self, name: str, params_json: str):
        from delegation_lab.solvers import build_backend

        self.params = SolverParams.model_validate_json(params_json)
        self.backend = build_backend(name, self.params)

    def ready(self) -> int:
        return os.getpid()

    def generate(self, requests: list[Request]) -> list[Generation]:
        # masked here too, so a key a server echoed never reaches Ray's object store
        secrets = configured_secrets(self.params.openai_compat)
        return [g.masked(secrets) for g in self.backend.generate(requests)]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise InputError(f"executor.kind ray needs Ray: {INSTALL_HINT} (import failed: {e})") from None
    return ray


def _check_reachable(key: str, address: str) -> None:
    """Fail in seconds, naming the address, when nothing listens there (Ray itself retries for a minute)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"{key}.address {address!r}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise InputError(f"{key}.address {address!r} is unreachable ({e}): start the cluster (`ray start --head`) "
                         f"or fix the address") from None


class RayExecutor:
    kind = "ray"

    def __init__(self, name: str, params: ExecutorParams):
        self.name, self.params = name, params
        self.key = f"solvers.{name}.executor"
        self.workers = params.workers
        self.batches = 0
        self.retries = 0
        self.ray = _import_ray()
        self._started_ray = False
        self._actors: list[Any] = []
        self._connect()

    # -- cluster ---------------------------------------------------------------------------
    def _connect(self) -> None:
        ray, p = self.ray, self.params
        if p.address is not None:
            _check_reachable(self.key, p.address)
        if ray.is_initialized():  # e.g. a notebook or a test already joined a cluster
            return
        if p.address is None:  # always a new instance: never a cluster some other process happens to run
            ray.init(address="local", num_cpus=math.ceil(p.workers * p.cpus_per_worker), include_dashboard=False,
                     log_to_driver=False)
            self._started_ray = True
            return
        try:
            ray.init(address=p.address, log_to_driver=False)
        except (ConnectionError, RuntimeError, TimeoutError) as e:
            raise InputError(f"{self.key}.address {p.address!r}: cannot join the Ray cluster ({e})") from None
        self._started_ray = True

    def _check_resources(self) -> None:
        have = self.ray.cluster_resources()
        p = self.params
        for resource, per_worker, field in (("CPU", p.cpus_per_worker, "cpus_per_worker"),
                                            ("GPU", p.gpus_per_worker, "gpus_per_worker")):
            need = per_worker * p.workers
            if need > have.get(resource, 0.0) + 1e-9:
                raise InputError(
                    f"{self.key}: workers={p.workers} x {field}={per_worker:g} needs {need:g} {resource}s, the Ray "
                    f"cluster has {have.get(resource, 0.0):g}; lower {self.key}.workers or {self.key}.{field}"
                )

    def start(self, solver_params: SolverParams) -> None:
        """Start the actors and wait until each has built its backend; nothing is sent before."""
        if self._actors:
            return
        self._check_resources()
        p = self.params
        actor_class = self.ray.remote(SolverWorker).options(
            num_cpus=p.cpus_per_worker, num_gpus=p.gpus_per_worker, max_restarts=-1, max_task_retries=0,
        )
        self._actors = [actor_class.remote(self.name, solver_params.model_dump_json()) for _ in range(p.workers)]
        try:
            self.ray.get([a.ready.remote() for a in self._actors], timeout=ACTOR_START_TIMEOUT_S)
        except self.ray.exceptions.RayTaskError as e:
            raise InputError(f"solver {self.name}: a Ray worker could not build its backend: {e.cause}") from None
        except self.ray.exceptions.RayActorError as e:  # its constructor raised (e.g. a package missing on a node)
            raise InputError(f"solver {self.name}: a Ray worker could not start: {e}") from None
        except self.ray.exceptions.GetTimeoutError:
            raise InputError(f"{self.key}: the {p.workers} workers did not start within {ACTOR_START_TIMEOUT_S:g} s "
                             f"(is the cluster short of resources?)") from None

    @property
    def actors(self) -> list[Any]:
        return list(self._actors)

    # -- work ------------------------------------------------------------------------------
    def run(
        self, solver: Solver, todo: list[Request], batch_size: int, on_answer: Callable[[Answer], None]
    ) -> Iterator[list[Answer]]:
        if not todo:
            return
        self.start(solver.params)
        ray = self.ray
        dead = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError)
        waiting = deque((batch, 0) for batch in batches_of(todo, self.params.batch_size))
        pending: dict[Any, tuple[list[Request], int, int]] = {}  # task -> (batch, attempt, actor index)
        probes: dict[Any, int] = {}  # ready() call -> index of an actor Ray is restarting
        down_since: dict[int, float] = {}  # actors sent nothing until their probe answers
        load = [0] * len(self._actors)
        while waiting or pending:
            free = [i for i in range(len(load)) if i not in down_since and load[i] < IN_FLIGHT_PER_WORKER]
            while waiting and free:
                actor = min(free, key=load.__getitem__)
                batch, attempt = waiting.popleft()
                pending[self._actors[actor].generate.remote(batch)] = (batch, attempt, actor)
                load[actor] += 1
                free = [i for i in free if load[i] < IN_FLIGHT_PER_WORKER]
            [task], _ = ray.wait([*pending, *probes], num_returns=1)
            if task in probes:
                self._probed(task, probes, down_since)
                continue
            batch, attempt, actor = pending.pop(task)
            load[actor] -= 1
            try:
                generations = ray.get(task)
            except dead as e:
                if attempt >= self.params.max_batch_retries:
                    raise RuntimeError(
                        f"solver {self.name}: a batch failed {attempt + 1} times on dead Ray workers "
                        f"({self.key}.max_batch_retries={self.params.max_batch_retries}); every answer so far is "
                        f"journaled, rerun to resume. Last: {type(e).__name__}"
                    ) from e
                self.retries += 1
                waiting.appendleft((batch, attempt + 1))
                if actor not in down_since:
                    down_since[actor] = time.monotonic()
                    probes[self._actors[actor].ready.remote()] = actor
                continue
            except ray.exceptions.RayTaskError as e:
                raise e.as_instanceof_cause() from None  # the backend's own error, as the local executor raises it
            answers = solver.answers_for(batch, generations, on_answer)
            self.batches += 1
            yield answers

    def _probed(self, probe: Any, probes: dict[Any, int], down_since: dict[int, float]) -> None:
        """An actor that answers ready() takes tasks again; one still restarting is asked again shortly."""
        actor = probes.pop(probe)
        try:
            self.ray.get(probe)
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError):
            if time.monotonic() - down_since[actor] > ACTOR_START_TIMEOUT_S:
                raise RuntimeError(f"solver {self.name}: a Ray worker did not come back within "
                                   f"{ACTOR_START_TIMEOUT_S:g} s after it died") from None
            time.sleep(PROBE_INTERVAL_S)
            probes[self._actors[actor].ready.remote()] = actor
            return
        del down_since[actor]

    def close(self) -> None:
        for actor in self._actors:
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001 - an actor already gone is what we want
                pass
        self._actors = []
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False

