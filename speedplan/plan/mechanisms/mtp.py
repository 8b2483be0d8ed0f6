"""DeepSeek-style multi-token prediction: D forwards of the model's own MTP layer (the
target's layer type, MoE included), chained like an EAGLE head; verification is a chain.
Past the model's MTP layers the last layer is reused for the remaining draft steps (SGLang
NEXTN and TensorRT-LLM's MTP-Eagle path), and its acceptance decays (defaults.mtp_default)."""

from __future__ import annotations

from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError
from speedplan.plan.defaults import mtp_default, mtp_from_al
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
    def resolve_acceptance(cls, acceptance, target, **context):
        """A user's al=A@D is fitted as MTP's decaying rates (`defaults.mtp_from_al`), not one
        i.i.d. rate: D longer than the one measured then loses what reusing the layer loses."""
        if acceptance is not None and acceptance.kind == "iid" and acceptance.al_at is not None:
            fitted = mtp_from_al(target, *acceptance.al_at)
            if fitted is not None:
                return fitted
            return acceptance, (f"{acceptance.source}; above what MTP's decay per reuse of its layer reaches at "
                                f"D = {acceptance.al_at[1]}, so one rate at every depth")
        return super().resolve_acceptance(acceptance, target, **context)

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
