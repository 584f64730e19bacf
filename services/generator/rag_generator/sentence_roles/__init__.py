"""Sentences that are not evidence: questions, headings alone, navigation and boilerplate.

``sentence_role`` names a sentence's role (:class:`SentenceRole`); ``role_features`` gives the numbers
it is read from, for the extractive scorer and the answerability gate to fit; ``unit_role`` and
``unit_role_features`` do the same for an :class:`~rag_generator.evidence.EvidenceUnit` (its passage's
language, title and section path). Per language:
:mod:`~rag_generator.sentence_roles.lexicons` (interrogatives, navigation phrases) and jusText's stop
lists (:mod:`~rag_generator.sentence_roles.features`).
"""

from rag_generator.sentence_roles.features import FEATURE_NAMES, RoleFeatures, role_features
from rag_generator.sentence_roles.roles import SentenceRole, role_of, sentence_role, unit_role, unit_role_features

__all__ = [
    "FEATURE_NAMES",
    "RoleFeatures",
    "SentenceRole",
    "role_features",
    "role_of",
    "sentence_role",
    "unit_role",
    "unit_role_features",
]
