"""``ragctl counterfactual``: write a counterfactual (conflicting sources) set in BEIR layout
(``rag_eval.counterfactual``), for ``ragctl eval -d OUT --answers --off-topic 0``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_eval.counterfactual import KindOf, build_counterfactual, served_kinds, write_counterfactual
from rag_eval.datasets import is_dataset_folder, load_dataset


def dataset_language(name: str) -> str:
    """``xquad-<code>`` → ``<code>``; the other built-in datasets are English."""
    return name.rsplit("-", 1)[1] if name.startswith("xquad-") else "en"


def run_counterfactual(
    name: str, out: Path, *, limit: int | None, seed: int, language: str | None = None,
    kinds: tuple[KindOf, KindOf | None] | None = None,
) -> dict[str, Any]:
    """Build the set from dataset ``name`` (a built-in name or a BEIR folder with answers) and write it
    to ``out``; returns the manifest's counts. ``language`` defaults to the dataset's (a folder: required);
    ``kinds`` (value kind, wanted kind) default to the generator's ``rag_generator.answer_kinds``."""
    if language is None:
        if is_dataset_folder(name):
            raise ValueError(f"{name}: say the questions' language with --language")
        language = dataset_language(name)
    dataset = load_dataset(name)
    if not is_dataset_folder(name):
        dataset.name = name
    kind_of, wanted_of = kinds or served_kinds()
    cf = build_counterfactual(dataset, language=language, kind_of=kind_of, wanted_of=wanted_of, limit=limit, seed=seed)
    write_counterfactual(cf, out, source=name, seed=seed, limit=limit)
    return {"out": str(out), "language": language, **cf.counts()}
