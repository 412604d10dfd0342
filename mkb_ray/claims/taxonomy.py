"""The claim taxonomy, read from a versioned YAML file (experiments/taxonomies/<name>.yaml, or any path).

A taxonomy names the categories an annotator may give a claim, with a definition and invented examples for each.
Annotators, the synthetic generator and the gold-set scoring all take the same `Taxonomy`, so a user's own file
changes all of them at once. `Taxonomy.ref` (`<name>@<version>`) is stored with every annotation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# experiments/taxonomies/ beside the package, in a checkout and in an editable install alike.
TAXONOMY_DIR = Path(__file__).resolve().parents[2] / "experiments" / "taxonomies"
DEFAULT_TAXONOMY = "mkb-11"


class TaxonomyError(ValueError):
    """A taxonomy that cannot be found or does not validate; the message names the file and the field."""


class CategoryDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    definition: str = Field(min_length=10)
    examples: tuple[str, ...] = Field(min_length=2, description="invented example claims, in the file's own words")


class Taxonomy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    version: int = Field(ge=1)
    closure_category: str = Field(description="the category whose lineages the propagation metrics follow")
    categories: tuple[CategoryDefinition, ...] = Field(min_length=2)

    @model_validator(mode="after")
    def _consistent(self) -> "Taxonomy":
        names = [c.name for c in self.categories]
        if len(names) != len(set(names)):
            raise ValueError(f"categories: duplicate names in {names}")
        if self.closure_category not in names:
            raise ValueError(f"closure_category: {self.closure_category!r} is not one of the categories")
        return self

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)

    def get(self, name: str) -> CategoryDefinition:
        for category in self.categories:
            if category.name == name:
                return category
        raise KeyError(f"taxonomy {self.ref} has no category {name!r}")


def taxonomy_path(name_or_path: str) -> Path:
    """`mkb-11` → experiments/taxonomies/mkb-11.yaml; anything with a slash or a .yaml suffix is a path."""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    return TAXONOMY_DIR / f"{name_or_path}.yaml"


def load_taxonomy(name_or_path: Optional[str] = None) -> Taxonomy:
    """The taxonomy by name (default mkb-11) or path; a clear error naming the file and field otherwise."""
    path = taxonomy_path(name_or_path or DEFAULT_TAXONOMY)
    if not path.is_file():
        known = sorted(p.stem for p in TAXONOMY_DIR.glob("*.yaml"))
        raise TaxonomyError(f"{path}: no such taxonomy file (known names: {', '.join(known) or 'none'})")
    try:
        return Taxonomy.model_validate(yaml.safe_load(path.read_text()))
    except (yaml.YAMLError, ValidationError) as error:
        raise TaxonomyError(f"{path}: {error}") from error
