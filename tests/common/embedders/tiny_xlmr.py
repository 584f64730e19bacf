"""Tiny, randomly initialised models of the production multilingual kinds, built on the spot (nothing downloads).

The production embedders (paraphrase-multilingual-MiniLM-L12-v2, BAAI/bge-m3, multilingual-e5) and the
reranker (BAAI/bge-reranker-v2-m3) all read text through XLM-RoBERTa's SentencePiece tokenizer. Here a
SentencePiece unigram model is trained on a few hundred lines of Romanian, German and English, loaded the
way Hugging Face loads XLM-R's ``sentencepiece.bpe.model`` (fairseq ids: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
``<unk>`` 3) and saved as a fast tokenizer (``tokenizer.json``, which the ONNX path needs). Around it:

* :func:`build_embedder` — a sentence-transformers folder (``modules.json``, ``1_Pooling/config.json`` in the
  legacy format the hub's models carry, ``2_Normalize``, ``sentence_bert_config.json``) over a tiny
  ``XLMRobertaModel`` (bge-m3's architecture) or ``BertModel`` (paraphrase-multilingual-MiniLM-L12-v2's: a
  BERT with XLM-R's vocabulary), mean or CLS pooling;
* :func:`build_reranker` — a tiny ``XLMRobertaForSequenceClassification(num_labels=1)``, saved as
  bge-reranker-v2-m3 is.

Weights are random (seeded): the vectors and scores mean nothing, only the mechanics are tested.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

#: Hidden size of every tiny model.
HIDDEN = 32
#: Position embeddings of the tiny models (an XLM-R numbers positions from padding_idx + 1 = 2: 126 tokens fit).
MAX_POSITIONS = 128
#: ``max_seq_length`` of the tiny embedders' sentence_bert_config.json: short, so truncation is easy to reach.
EMBEDDER_MAX_SEQ_LENGTH = 48

ROMANIAN = (
    "Unde sunt stocate conversațiile studenților și cine are acces la ele",
    "Regulamentul facultății prevede că înscrierea se face până în luna septembrie",
    "Bursele se acordă conform art. 5 alin. (2) lit. b) din hotărârea senatului",
    "Secretariatul răspunde la întrebări în zilele lucrătoare între orele nouă și două",
    "Ștefan și Țițeica au susținut examenul de licență în sesiunea din iunie",
    "Căminul nou are camere pentru două persoane și o bucătărie comună",
    "Taxa de școlarizare se plătește în două tranșe până la sfârșitul semestrului",
    "Profesorul îndrumător aprobă tema lucrării de disertație înainte de înscriere",
    "Datele personale sunt protejate și păstrate doar cât este necesar",
    "Biblioteca universității împrumută cărți și reviste pentru cel mult două săptămâni",
    "Orarul cursurilor și al seminariilor se publică pe pagina facultății",
    "Studenții străini primesc ajutor pentru viză și pentru cazare în cămin",
)
GERMAN = (
    "Die Straße führt über die Brücke direkt zum Hauptgebäude der Universität",
    "Prüfungen finden im großen Hörsaal statt und dauern neunzig Minuten",
    "Die Studierenden müssen den Semesterbeitrag bis Ende März überweisen",
    "Das Büro des Prüfungsamts ist während der Ferien geschlossen",
    "Für die Zulassung zum Masterstudium ist ein Bachelorabschluss nötig",
    "Die Mensa öffnet um elf Uhr und schließt am Nachmittag",
    "Im Wohnheim gibt es Einzelzimmer mit eigener Küche für Erstsemester",
    "Die Bibliothek verleiht Bücher und Zeitschriften für höchstens zwei Wochen",
    "Gemäß Paragraph drei der Prüfungsordnung ist ein Rücktritt möglich",
    "Ausländische Studierende erhalten Hilfe bei Visum und Unterkunft",
)
ENGLISH = (
    "Where are the students' conversations stored and who can read them",
    "The library opens at eight in the morning and closes at midnight",
    "Scholarships are granted by the faculty board after each semester",
    "The exam schedule is published online two weeks before the session",
    "Tuition fees are paid in two instalments before the end of the term",
    "International students get help with their visa and accommodation",
    "Personal data is protected and kept only as long as necessary",
    "The supervisor approves the thesis topic before enrolment",
)


def corpus_lines(count: int = 600, seed: int = 0) -> list[str]:
    """``count`` lines mixing the three languages: whole sentences and shuffled words of them, numbers, case."""
    sentences = list(ROMANIAN + GERMAN + ENGLISH)
    words = " ".join(sentences).split()
    rng = random.Random(seed)
    lines = list(sentences)
    while len(lines) < count:
        picked = rng.sample(words, rng.randint(4, 12))
        if rng.random() < 0.3:
            picked = [w.upper() if rng.random() < 0.5 else w.capitalize() for w in picked]
        lines.append(" ".join(picked) + rng.choice([".", ",", "?", "!", f" {rng.randint(0, 2026)}."]))
    return lines


def train_sentencepiece(vocab_size: int = 700) -> bytes:
    """A SentencePiece unigram model (serialised) trained on :func:`corpus_lines`, in memory."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines()), model_writer=model, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, num_threads=1, minloglevel=2,
    )
    return model.getvalue()


def build_tokenizer(directory: Path):  # noqa: ANN201 - transformers' XLMRobertaTokenizer
    """XLM-R's tokenizer over a freshly trained SentencePiece model, saved in ``directory`` with its
    ``tokenizer.json`` next to ``sentencepiece.bpe.model``, converted as transformers converts XLM-R's own."""
    from transformers import XLMRobertaTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sentencepiece.bpe.model").write_bytes(train_sentencepiece())
    tokenizer = XLMRobertaTokenizer.from_pretrained(str(directory), model_max_length=MAX_POSITIONS - 2)
    tokenizer.save_pretrained(str(directory))
    return tokenizer


def _config(kind: str, vocab_size: int, **extra: object):  # noqa: ANN202 - a transformers config
    from transformers import BertConfig, XLMRobertaConfig

    sizes = dict(
        vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS, **extra,
    )
    if kind == "xlm-roberta":
        # XLM-R's special ids (as in bge-m3's config): padding_idx 1 also shifts its position ids.
        return XLMRobertaConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1, **sizes)
    if kind == "bert":
        # paraphrase-multilingual-MiniLM-L12-v2: a BertModel reading XLM-R's ids (pad 1, not BERT's 0).
        return BertConfig(pad_token_id=1, type_vocab_size=2, **sizes)
    raise ValueError(f"unknown architecture {kind!r}")


def build_embedder(
    directory: Path,
    *,
    pooling: str,
    architecture: str = "xlm-roberta",
    seed: int = 0,
) -> Path:
    """A sentence-transformers model folder in ``directory``: ``pooling`` ``"mean"`` (the
    paraphrase-multilingual kind) or ``"cls"`` (bge-m3), then Normalize; no prompts declared."""
    import torch
    from transformers import BertModel, XLMRobertaModel

    tokenizer = build_tokenizer(directory)
    torch.manual_seed(seed)
    model_class = XLMRobertaModel if architecture == "xlm-roberta" else BertModel
    model = model_class(_config(architecture, len(tokenizer)))  # with its pooler, as the hub's checkpoints
    model.eval()
    model.save_pretrained(str(directory))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    _write_json(directory / "modules.json", modules)
    st_config = {"max_seq_length": EMBEDDER_MAX_SEQ_LENGTH, "do_lower_case": False}
    _write_json(directory / "sentence_bert_config.json", st_config)
    _write_json(directory / "1_Pooling" / "config.json", {
        "word_embedding_dimension": HIDDEN,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    })
    (directory / "2_Normalize").mkdir(exist_ok=True)
    _write_json(directory / "config_sentence_transformers.json", {
        "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine",
    })
    return directory


def build_reranker(directory: Path, *, seed: int = 0) -> Path:
    """A tiny ``XLMRobertaForSequenceClassification`` with one logit (bge-reranker-v2-m3's head) in ``directory``."""
    import torch
    from transformers import XLMRobertaForSequenceClassification

    tokenizer = build_tokenizer(directory)
    torch.manual_seed(seed)
    # A wide init spreads the logits well beyond (0, 1), so raw logits and sigmoids differ visibly.
    config = _config("xlm-roberta", len(tokenizer), num_labels=1, initializer_range=1.0)
    model = XLMRobertaForSequenceClassification(config)
    model.eval()
    model.save_pretrained(str(directory))
    return directory


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
