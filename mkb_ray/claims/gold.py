"""Hand-labelled gold sets: the ground truth the annotators and the lineage matcher are scored against.

Written by people, never by the code under test (tests/gold/). Two kinds of file:

- a **claims** file (`tests/gold/claims/*.yaml`): one SKILL.md, the graded submissions of the attempt that wrote
  it, and every claim in it (an exact quote of the text) labelled with category, modality and support;
- a **lineage** file (`tests/gold/lineage/*.yaml`): one chain of SKILL.md texts, hop by hop, each claim quoted with
  its parent claim(s) at the hop before and the edge type; a claim without parents is born at its hop.

`python -m mkb_ray.claims.gold check DIR...` validates files (every quote must occur in its text).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..records.claims import EdgeType, EvidenceItem, Modality, Support


class _Gold(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GoldClaim(_Gold):
    quote: str = Field(min_length=3, description="the claim's words, exactly as they occur in the skill text")
    category: str
    modality: Modality
    support: Support
    note: str = ""


class GoldSkill(_Gold):
    """One hand-labelled SKILL.md (a claims file)."""

    split: Literal["dev", "test"] = Field(description="dev: may be read while building rules; test: scored only")
    problem: str
    dsl: Literal["cutedsl", "tirx"]
    target: Literal["gpu", "cpu"] = "gpu"
    evidence: list[EvidenceItem] = Field(default_factory=list, description="the attempt's graded submissions")
    skill: str
    claims: list[GoldClaim]

    @model_validator(mode="after")
    def _quotes_occur(self) -> "GoldSkill":
        missing = [c.quote for c in self.claims if c.quote not in self.skill]
        if missing:
            raise ValueError(f"quotes not found in the skill text: {missing[:3]}")
        return self


class GoldLineageClaim(_Gold):
    id: str
    quote: str = Field(min_length=3)
    parents: list[str] = Field(default_factory=list, description="ids of claims at the previous hop")
    edge: Optional[EdgeType] = Field(None, description="how it came from its parents; None for a claim born here")

    @model_validator(mode="after")
    def _edge_iff_parents(self) -> "GoldLineageClaim":
        if bool(self.parents) != (self.edge is not None):
            raise ValueError(f"claim {self.id}: a claim has an edge type exactly when it has parents")
        if self.edge == "merged" and len(self.parents) < 2:
            raise ValueError(f"claim {self.id}: a merged claim has at least two parents")
        return self


class GoldHop(_Gold):
    hop: int = Field(ge=0)
    dsl: Literal["cutedsl", "tirx"]
    skill: str
    claims: list[GoldLineageClaim]

    @model_validator(mode="after")
    def _quotes_occur(self) -> "GoldHop":
        missing = [c.quote for c in self.claims if c.quote not in self.skill]
        if missing:
            raise ValueError(f"hop {self.hop}: quotes not found in the skill text: {missing[:3]}")
        return self


class GoldChain(_Gold):
    """One hand-labelled chain (a lineage file)."""

    chain: str
    problem: str
    hops: list[GoldHop] = Field(min_length=2)

    @model_validator(mode="after")
    def _parents_exist(self) -> "GoldChain":
        for before, hop in zip(self.hops, self.hops[1:]):
            if hop.hop != before.hop + 1:
                raise ValueError(f"hops must be numbered consecutively; {before.hop} is followed by {hop.hop}")
            known = {c.id for c in before.claims}
            for claim in hop.claims:
                unknown = set(claim.parents) - known
                if unknown:
                    raise ValueError(f"hop {hop.hop} claim {claim.id}: parents {sorted(unknown)} are not claims of "
                                     f"hop {before.hop}")
        if self.hops[0].hop != 0 or any(c.parents for c in self.hops[0].claims):
            raise ValueError("the first hop is hop 0, and its claims have no parents")
        ids = [c.id for h in self.hops for c in h.claims]
        if len(ids) != len(set(ids)):
            raise ValueError("claim ids must be unique within a chain")
        return self


class GoldFileError(ValueError):
    """A gold file that does not parse or validate; the message names the file and the field."""


def _load(path: Path, model: type[_Gold]) -> _Gold:
    try:
        data = yaml.safe_load(path.read_text())
        return model.model_validate(data)
    except (yaml.YAMLError, ValidationError, ValueError) as error:
        raise GoldFileError(f"{path}: {error}") from error


def load_gold_skills(directory: Path, split: Optional[str] = None) -> list[tuple[Path, GoldSkill]]:
    """Every claims file under `directory` (sorted), optionally only one split."""
    out = [(p, _load(p, GoldSkill)) for p in sorted(directory.glob("*.yaml"))]
    return [(p, g) for p, g in out if split is None or g.split == split]  # type: ignore[union-attr]


def load_gold_chains(directory: Path) -> list[tuple[Path, GoldChain]]:
    """Every lineage file under `directory`, sorted by name."""
    return [(p, _load(p, GoldChain)) for p in sorted(directory.glob("*.yaml"))]  # type: ignore[misc]


def _gold_files(paths: list[str]) -> list[Path]:
    """The YAML files named, or inside the folders named; a path that is neither is an error, as is finding none
    (a check that found nothing to check must not pass)."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(path.glob("*.yaml")))
        elif path.is_file():
            files.append(path)
        else:
            raise GoldFileError(f"{path}: no such file or folder")
    if not files:
        raise GoldFileError(f"no gold files (*.yaml) in {', '.join(paths)}")
    return files


def _check(paths: list[str]) -> int:
    bad = 0
    try:
        files = _gold_files(paths)
    except GoldFileError as error:
        print(f"BAD  {error}")
        return 1
    for path in files:
        text = path.read_text()
        model = GoldChain if "hops:" in text else GoldSkill
        try:
            gold = _load(path, model)
        except GoldFileError as error:
            bad += 1
            print(f"BAD  {error}")
            continue
        count = (sum(len(h.claims) for h in gold.hops) if isinstance(gold, GoldChain)  # type: ignore[union-attr]
                 else len(gold.claims))  # type: ignore[union-attr]
        print(f"ok   {path} ({model.__name__}, {count} claims)")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        print(__doc__)
        sys.exit(2)
    sys.exit(_check(sys.argv[2:]))
