"""Stages 1-2 of intent routing (rules + classifier, no LLM) on utterances the classifier never saw.

Both lists are written here, not in the shipped examples (a test checks there is no overlap).
The first was written before the rules and examples were tuned, and the examples were then
extended after reading its errors; the second was written later and scored once before the last
round of examples (docs/refiner.md gives both numbers). Real document questions from the shared
benchmark datasets (ClapNQ, HotpotQA, MTRAG-UN last user turns), when present, must all go to rag.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from rag_common.schemas import Intent
from rag_refiner.intent_classifier import load_examples
from rag_refiner.intent_router import IntentDecision, IntentRouter
from rag_refiner.intent_rules import normalize
from rag_refiner.settings import RefinerSettings

DATASETS_DIR = Path(os.environ.get("RAG_DATASETS_DIR", Path(__file__).resolve().parents[3] / "shared" / "datasets"))

FIRST_HELD_OUT: dict[Intent, list[str]] = {
    "chitchat": [
        "hey there!", "hiya", "good afternoon", "hello bot", "morning!", "thank you!", "thanks, that helps",
        "many thanks", "great, thank you very much", "cheers mate", "bye bye", "see you soon", "goodbye!",
        "have a good one", "ok thanks, bye", "how's your day going?", "nice to meet you", "you're the best",
        "cool, got it", "alright", "who made you?", "are you a human?", "what's your favourite colour?",
        "I appreciate it", "sounds good",
    ],
    "meta": [
        "what did I ask you before?", "what was my last question?", "recap our conversation please",
        "can you summarize what we discussed?", "what was the first thing I asked?", "repeat that answer",
        "say that again", "what have I asked so far?", "list my previous questions", "make that answer shorter",
        "rewrite your previous answer as a list", "what did you answer to my second question?",
        "remind me what we talked about", "go back to my first question", "translate that answer to German",
        "what did you say earlier?", "start over", "clear the chat", "have I already asked this?",
        "summarise this chat",
    ],
    "out_of_scope": [
        "write a haiku about autumn", "tell me a knock knock joke", "what's the weather in my city right now?",
        "is it going to snow tonight?", "what time is it in London right now?", "book me a hotel in Rome",
        "order sushi for dinner", "play my workout playlist", "set a reminder for my meeting tomorrow",
        "what's the Tesla stock price today?", "who won the football game yesterday?",
        "write a poem for my mother's birthday", "draw me a dragon", "let's play tic tac toe", "pretend to be a cat",
        "compose a limerick about coffee", "solve 45 divided by 9", "write a javascript function that sorts an array",
        "what's the latest news?", "turn up the volume",
    ],
    "rag": [
        "What is the return window for online purchases?", "How do I enable single sign-on?",
        "Who is the CEO of Globex?", "What does the policy say about overtime pay?",
        "How much is the late payment fee?", "Can I transfer my subscription to another user?",
        "What are the opening hours of the main library?", "When was the bridge completed?",
        "How do I configure backups for the database?", "What are the symptoms of dehydration?",
        "What is the weather like in Oslo in January?", "Which countries does the program operate in?",
        "What does the report say about revenue growth?", "How is the bonus calculated?",
        "Does it support Windows 11?", "And what about the older model?", "Why is that?",
        "Can you explain the second step?", "tell me more", "sick leave rules",
        "What is the interest rate for the student loan?", "How do I write a complaint to the housing office?",
        "What time is the last train to the airport?", "Who wrote the novel Beloved?",
        "How many employees does the company have?",
    ],
}

SECOND_HELD_OUT: dict[Intent, list[str]] = {
    "chitchat": [
        "hello hello", "hey assistant, good to see you", "evening!", "thanks so much!!", "ty", "thank you kindly",
        "awesome, thanks a bunch", "bye for now", "catch you later", "have a great weekend", "how have you been?",
        "what are you?", "are you an AI?", "nice work", "that's great to hear",
    ],
    "meta": [
        "what question did I ask first?", "what did I just ask?", "can you recap what we've covered?",
        "give me a summary of this conversation", "repeat the previous answer please",
        "what did you say about my first question?", "list everything I asked today",
        "could you shorten your previous reply?", "put that last answer into a table",
        "let's start a fresh conversation", "erase our chat history", "what was your last answer?",
        "remind me of my previous question",
    ],
    "out_of_scope": [
        "write a sonnet about the moon", "make up a bedtime story for my kid", "tell me a riddle",
        "what's the forecast for this afternoon?", "how hot is it outside right now?", "what day is it today?",
        "order a new phone charger for me", "schedule a meeting with Anna tomorrow at 10", "turn on the TV",
        "play the latest Taylor Swift song", "who is winning the game right now?",
        "what's the euro to dollar rate right now?", "generate a logo for my bakery", "act like a medieval knight",
        "write a rap battle between two cats",
    ],
    "rag": [
        "What is the notice period for resigning?", "How do I change the billing address on my account?",
        "Which plans include priority support?", "What is the penalty for filing taxes late?",
        "How many moons does Jupiter have?", "Who painted the ceiling of the Sistine Chapel?",
        "What does clause 7 of the agreement say?", "Is the museum open on public holidays?",
        "What are the eligibility criteria for the grant?", "How do I rotate the API keys?",
        "What caused the 2008 financial crisis?", "And how long does that take?", "What about weekends?",
        "Can you explain that in more detail?", "Which one is cheaper?",
        "How do I write a good README for the project?",
        "What is the forecast revenue for next quarter in the report?", "Who wrote the theme music for the series?",
        "password reset procedure", "maternity benefits", "Is there a discount for students?",
        "What's the difference between the two versions?", "Where can I download the user manual?",
        "When does the warranty expire?", "What song was number one in 1985?",
    ],
}

#: Romanian (issue 31), written after the Romanian examples and scored once (87 % of the best labels
#: right with the rules, 68.5 % before the Romanian examples; every document question went to rag).
ROMANIAN_HELD_OUT: dict[Intent, list[str]] = {
    "chitchat": [
        "bună seara!", "salutare tuturor", "mersi mult!", "vă mulțumesc frumos pentru ajutor", "ms", "o seară bună!",
        "ne vedem mai târziu", "ce mai zici?", "e în regulă", "foarte bine, mersi", "ești de mare ajutor",
        "cine ești tu?", "ai sentimente?", "noapte bună",
    ],
    "meta": [
        "ce am întrebat înainte?", "ce întrebări am pus până acum?", "care a fost ultima mea întrebare?",
        "repetă ultimul răspuns te rog", "fă un rezumat al conversației", "despre ce am vorbit?",
        "scurtează răspunsul tău", "pune răspunsul într-un tabel", "șterge conversația",
        "ce mi-ai răspuns mai devreme?",
    ],
    "out_of_scope": [
        "scrie un cântec despre mare", "spune-mi o ghicitoare", "ce temperatură e afară acum?", "ce zi e azi?",
        "comandă-mi un taxi", "programează o întâlnire mâine la 10", "pornește televizorul",
        "cine conduce în meciul de acum?", "desenează un logo pentru cafenea", "compune o scrisoare de dragoste",
    ],
    "rag": [
        "Unde sunt stocate conversațiile?", "Unde sunt stocate conversatiile?", "Cât costă cazarea la cămin?",
        "Care este calendarul admiterii la licență?", "Cine aprobă cererea de bursă?",
        "Ce acte îmi trebuie pentru viză?", "Cum se face înscrierea la examenul de disertație?",
        "Care sunt criteriile pentru bursa de performanță?", "Și pentru anul trei?", "Dar la doctorat?",
        "Cât timp sunt păstrate datele personale?", "Ce prevede regulamentul despre frecvența la laborator?",
        "Pot să plătesc taxa în rate?", "procedura de contestare a notei", "Cum obțin legitimația de student?",
        "Ce spune art. 12 alin. (3)?", "Unde se depune dosarul de practică?",
        "Care este numărul minim de credite pentru promovare?", "Cine este rectorul universității?",
        "Cum se scrie bibliografia în lucrarea de licență?",
    ],
}


#: Ordinary document questions in several shapes (factoid, how-to, keyword, follow-up, "today"
#: and "write" wording that belongs to a document): every one must be routed to rag.
DOCUMENT_QUESTIONS = [
    "What is the notice period for contractors?",
    "What is the current interest rate on the premium savings account?",
    "What was the weather like during the battle of Waterloo?",
    "Write down the steps to enable encryption, please.",
    "Write a summary of the incident report.",
    "What time does the pharmacy close on Sundays?",
    "Who won the Tour de France in 1998?",
    "What is the meaning of the song Imagine?",
    "Tell me about the book's main character.",
    "Does the policy cover flood damage?",
    "and for part-time staff?",
    "How come?",
    "What is a safe harbor provision?",
    "vpn setup guide",
]


def router() -> IntentRouter:
    # No LLM: an unsure message goes to rag, so "routed away" here means the cheap stages were sure.
    return IntentRouter.of(RefinerSettings(), None)


def cheap_accuracy(held_out: dict[Intent, list[str]], language: str | None = None) -> tuple[float, list[str]]:
    routing = router()
    errors = []
    total = 0
    for intent, utterances in held_out.items():
        for utterance in utterances:
            total += 1
            predicted = routing.classify_cheap(utterance, language).intent
            if predicted != intent:
                errors.append(f"{utterance!r}: expected {intent}, got {predicted}")
    return 1 - len(errors) / total, errors


def test_held_out_lists_do_not_overlap_the_training_examples() -> None:
    trained = {normalize(text) for _, text in load_examples()}
    held_out = [u for lists in (FIRST_HELD_OUT, SECOND_HELD_OUT, ROMANIAN_HELD_OUT) for us in lists.values() for u in us]
    assert not [u for u in held_out + DOCUMENT_QUESTIONS if normalize(u) in trained]


@pytest.mark.parametrize("held_out", [FIRST_HELD_OUT, SECOND_HELD_OUT], ids=["first", "second"])
def test_rules_and_classifier_label_held_out_utterances(held_out: dict[Intent, list[str]]) -> None:
    accuracy, errors = cheap_accuracy(held_out)
    assert accuracy >= 0.9, errors


def test_every_held_out_document_question_goes_to_rag_without_the_llm() -> None:
    routing = router()
    questions = FIRST_HELD_OUT["rag"] + SECOND_HELD_OUT["rag"] + DOCUMENT_QUESTIONS
    decisions = {q: routing.classify_cheap(q) for q in questions}
    wrong = {q: d for q, d in decisions.items() if not (isinstance(d, IntentDecision) and d.intent == "rag")}
    assert not wrong


@pytest.mark.parametrize("language", ["ro", None])
def test_romanian_held_out_utterances(language: str | None) -> None:
    accuracy, errors = cheap_accuracy(ROMANIAN_HELD_OUT, language)
    assert accuracy >= 0.85, errors
    # The document questions, with and without diacritics, all go to rag without the LLM.
    routing = router()
    decisions = [routing.classify_cheap(q, language) for q in ROMANIAN_HELD_OUT["rag"]]
    assert all(isinstance(d, IntentDecision) and d.intent == "rag" for d in decisions), decisions


async def test_unsure_messages_without_an_llm_go_to_rag() -> None:
    routing = router()
    message = "book me a hotel in Rome"
    scores = routing.classify_cheap(message)
    assert not isinstance(scores, IntentDecision), f"precondition: the classifier should be unsure of {message!r}"
    decision = await routing.route(message)
    assert (decision.intent, decision.method) == ("rag", "embedding")
    assert "llm stage off" in decision.detail


def dataset_questions() -> dict[str, list[str]]:
    clapnq = DATASETS_DIR / "clapnq" / "annotated_data" / "dev"
    hotpotqa = DATASETS_DIR / "hotpotqa" / "hotpotqa_train.json"
    mtrag = DATASETS_DIR / "mtrag-un" / "generation_tasks" / "reference.jsonl"
    found: dict[str, list[str]] = {}
    if clapnq.is_dir():
        found["clapnq"] = [json.loads(line)["input"] for path in sorted(clapnq.glob("*.jsonl")) for line in _lines(path)]
    if hotpotqa.is_file():
        found["hotpotqa"] = [row["question"] for row in json.loads(hotpotqa.read_text(encoding="utf-8"))]
    if mtrag.is_file():
        # The last user turn of each conversation: follow-ups, fragments, statements, all about documents.
        found["mtrag-un"] = [json.loads(line)["input"][-1]["text"] for line in _lines(mtrag)]
    return found


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def test_real_dataset_questions_are_never_routed_away() -> None:
    datasets = dataset_questions()
    if not datasets:
        pytest.skip(f"no benchmark datasets under {DATASETS_DIR}")
    routing = router()
    for name, questions in datasets.items():
        assert len(questions) >= 100, name
        results = routing.classify_cheap_many(questions)
        # Unsure results (classifier scores) would go to the LLM; without one they go to rag.
        away = [
            (r.intent, round(r.confidence, 2), q)
            for r, q in zip(results, questions, strict=True)
            if isinstance(r, IntentDecision) and r.intent != "rag"
        ]
        assert not away, f"{name}: {len(away)} of {len(questions)} routed away"
        leaning = Counter(r.intent for r in results)
        # The classifier's best label, before any threshold, is rag for all but a handful.
        assert leaning["rag"] >= 0.99 * len(questions), f"{name}: {leaning}"
    # The async path agrees with the batch path.
    assert (await routing.route(datasets[next(iter(datasets))][0])).intent == "rag"
