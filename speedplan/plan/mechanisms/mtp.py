"""DeepSeek-style multi-token prediction: D forwards of the model's own MTP layer (the
target's layer type, MoE included), chained like an EAGLE head; verification is a chain.
Past the model's MTP layers the last layer is reused for the remaining draft steps (SGLang
NEXTN and TensorRT-LLM's MTP-Eagle path), and its acceptance decays (defaults.mtp_default)."""

from __future__ import annotations

from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError
from speedplan.plan.defaults import mtp_default
from speedplan.plan.mechanisms.eagle import Eagle


@dataclass(frozen=True)
class Mtp(Eagle):
    name = "mtp"
    usage = "mtp"  # no options (an Eagle's are not read)
    options = ()
    text_options = ()

    @classmethod
    def default(cls, target):
        return mtp_default(target)

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
