"""Kubernetes resource models of LEMON and the CRDs generated from them (no Kubernetes client).

The models here (with :mod:`lemon.spec.models`) are the one source of truth for the custom
resources: :mod:`lemon.resources.crds` derives the CRDs' structural schemas from them, and the
operator validates objects with them.
"""

from lemon.resources.capacity_profile import (
    CapacityProfileSpec,
    LemonCapacityProfile,
    Resources,
    TierSpec,
)
from lemon.resources.crds import (
    API_VERSION,
    GROUP,
    PLURALS,
    VERSION,
    crd,
    crd_yaml,
    structural_schema,
)
from lemon.resources.status import (
    CapacityProfileStatus,
    Condition,
    ConditionStatus,
    LemonSpecStatus,
    TierStatus,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "PLURALS",
    "VERSION",
    "CapacityProfileSpec",
    "CapacityProfileStatus",
    "Condition",
    "ConditionStatus",
    "LemonCapacityProfile",
    "LemonSpecStatus",
    "Resources",
    "TierSpec",
    "TierStatus",
    "crd",
    "crd_yaml",
    "structural_schema",
]
