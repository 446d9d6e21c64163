"""Stage 4, placements: the GPU a check assumes and how the deployment's TP/EP split each module.

Both come from ckptlint's hardware data (``ckptlint/hardware/gpus.toml``, ``parallel.toml``); the
deployment-shape rules (DP8xx) judge the plan's placements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptlint.deployment import default_gpu_key
# (the module, read at call time: hardware.parallel imports simulate.model, whose package imports this module)
from ckptlint.hardware import get_gpu, parallel
from ckptlint.simulate.model import Placement
from ckptlint.simulate.state import State

if TYPE_CHECKING:
    from ckptlint.deployment import Deployment


def assumed_gpu(method: str | None, scheme: str | None, deployment: "Deployment") -> Any:
    """The GPU record (gpus.toml) a check assumes: ``--gpu``, else the format's native GPU; None when
    only a platform is known."""
    key = default_gpu_key(method, scheme, deployment.platform, deployment.gpu)
    return get_gpu(key) if key else None


def module_placements(plan: State, config: dict[str, Any] | None = None) -> dict[str, Placement]:
    """Every runtime module's placement (keyed like ``plan.modules``); sets ``plan.parallel``."""
    plan.parallel = parallel.for_framework(plan.target.framework)
    return parallel.placements(plan.modules, plan.parallel, plan.deployment, config)
