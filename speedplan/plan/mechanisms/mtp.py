"""DeepSeek-style multi-token prediction: D forwards of the model's own MTP layer (the
target's layer type, MoE included), chained like an EAGLE head; verification is a chain."""

from __future__ import annotations

from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms.eagle import Eagle


@dataclass(frozen=True)
class Mtp(Eagle):
    name = "mtp"
    default_acceptance = (
        Acceptance.positional([0.85], "published"),
        "DeepSeek-V3 tech report (quoted): 2nd-token acceptance 0.85-0.90; lower bound, repeated past D=1",
    )
    options = ()

    @classmethod
    def cannot_run(cls, target):
        if target.mtp_layers == 0:
            return "the model has no MTP layers (num_nextn_predict_layers = 0)"
        return None

    @classmethod
    def build(cls, arg, target, acceptance, **fields):
        if target.mtp_layers == 0:
            raise SpeedplanInputError(f"model {target.name} has no MTP layers (num_nextn_predict_layers = 0); use eagle")
        return super().build(arg, target, acceptance, **fields)
