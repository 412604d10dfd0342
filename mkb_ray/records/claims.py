"""The typed records of claims: what a SKILL.md asserts, how each assertion was annotated, and how claims descend
from one hop of a chain to the next. Stored by the run store (tables `claims`, `annotations`, `lineage_edges`).
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Modality = Literal["hedged", "plain", "absolute"]
# Weakest to strongest: strengthening moves one step right, weakening one step left.
MODALITIES: tuple[Modality, ...] = ("hedged", "plain", "absolute")
Support = Literal["supported", "contradicted", "unsupported"]
SUPPORTS: tuple[Support, ...] = ("supported", "contradicted", "unsupported")
EdgeType = Literal["copied", "paraphrased", "strengthened", "weakened", "contradicted", "merged", "split"]
EDGE_TYPES: tuple[EdgeType, ...] = ("copied", "paraphrased", "strengthened", "weakened", "contradicted", "merged",
                                    "split")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceItem(_Record):
    """One graded submission of an attempt, as support is read from it: the verdict's facts, nothing the agent wrote.

    `submission` is the 1-based submission index, or 0 for the final kernel's judgement.
    """

    submission: int = Field(ge=0, description="1-based submission index; 0: the final judgement")
    compiled: bool
    correct: Optional[bool] = Field(None, description="None when the kernel never ran")
    tier: str = Field(description="fail | pass | pass2x | compile_only")
    speedup: Optional[float] = Field(None, ge=0, description="eager_ms / kernel_ms (unitless)")
    kernel_ms: Optional[float] = Field(None, ge=0)
    eager_ms: Optional[float] = Field(None, ge=0)
    rejected_by: Optional[str] = Field(None, description="the judge check that failed, if any")
    reason: str = ""


class ClaimRecord(_Record):
    """One atomic assertion of a SKILL.md, with its character span in that text."""

    claim_id: str = Field(description="<skill sha256 prefix>.<index>: stable for the same text")
    skill_sha: str = Field(description="sha256 of the SKILL.md text the claim was cut from")
    index: int = Field(ge=0, description="0-based position among the skill's claims")
    text: str
    start: int = Field(ge=0, description="character offset of the claim's first character")
    end: int = Field(ge=0, description="character offset just past its last character")
    section: str = Field("", description="the nearest heading above it, '' for none")


class AnnotationRecord(_Record):
    """What one annotator said of one claim. `status` 'unannotated' keeps the claim with the reason, never drops it."""

    claim_id: str
    annotator: str = Field(description="'offline-<version>' or 'llm:<roster model>:<prompt version>'")
    taxonomy: str = Field(description="<name>@<version> of the taxonomy file used")
    status: Literal["annotated", "unannotated"] = "annotated"
    category: Optional[str] = None
    modality: Optional[Modality] = None
    support: Optional[Support] = None
    support_reason: str = Field("", description="which submission's verdict decided the support, and how")
    confidence: Optional[float] = Field(None, ge=0, le=1)
    reason: str = Field("", description="why a claim is unannotated; empty otherwise")


class LineageEdgeRecord(_Record):
    """A claim at hop k derived from a claim at hop k-1 (one edge per parent: a merge has two)."""

    chain_id: str
    hop: int = Field(ge=1, description="hop of the child claim")
    parent_id: str
    child_id: str
    edge: EdgeType
    similarity: float = Field(ge=-1, le=1, description="cosine similarity of the two claims' embeddings")
    matcher: str = Field(description="which matcher and threshold produced the edge")
