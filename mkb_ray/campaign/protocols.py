"""What the scheduler needs of the parts it is handed, as protocols: the run store and the model servers.

In a module of their own so that the modules the scheduler uses (the spool, the trial task) can name them without
importing the scheduler back (tests/test_layers.py checks the campaign package has no import cycle).
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence

from ..records import TrialOutcome


class OutcomeStore(Protocol):
    """What the scheduler needs of the run store (`mkb_ray.store.RunStore` is one)."""

    def done_ids(self) -> set[str]:
        """Trials whose outcome is committed."""

    def skill_text(self, trial_id: str) -> Optional[str]:
        """The SKILL.md a done trial wrote; None when it wrote none."""

    def write_outcomes(self, outcomes: Sequence[TrialOutcome]) -> None:
        """Commit a batch of outcomes, all or none."""

    def log_event(self, kind: str, trial_id: Optional[str] = None, **data: Any) -> None:
        """Append a scheduler event."""


class ModelServers(Protocol):
    """What the scheduler needs of the model servers (`mkb_ray.campaign.services.ModelServices` is one)."""

    def api_base(self, name: str) -> Optional[str]:
        """Where model `name` is served; None for provider APIs."""

    def healthy(self, name: str) -> bool:
        """Whether model `name`'s server answers."""

    def restart(self, name: str) -> str:
        """Start model `name`'s server afresh; returns its new api_base."""
