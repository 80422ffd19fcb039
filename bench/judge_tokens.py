"""Judge tokens and calls: the frugal call pattern vs one call per Ragas step.

Scores the three online metrics (faithfulness, response_relevancy,
context_utility) on deterministically generated records — several topics,
3–6 retrieved contexts of realistic length each, faithful answers and answers
with invented details, some noncommittal — once with ``call_pattern="frugal"``
and once with ``"per_call"``, against the real judge server on 127.0.0.1 over
HTTP (`tests.support.judge_server`, token counts from `monitor.tokens`).
Prints calls and prompt/completion tokens per record side by side with the
ratio, the spend per judge step, the ratio the two patterns would have with
no instruction text at all (what shorter instructions could buy, at most),
and checks that every score is identical.

With ``--ragas-python PATH`` (an interpreter with ragas 0.4.3 and LangChain
< 0.4 installed), it also measures what Ragas itself spends on the same
records for the same three metrics (`Faithfulness`, `ResponseRelevancy` with
strictness 3, `LLMContextPrecisionWithoutReference`), without a network or a
model: in a subprocess of that interpreter (`bench.harness.ragas_child`, the
child `bench.detection` runs too), Ragas's own metric code runs with
its usual LLM path (`LangchainLLMWrapper` around langchain-openai's
`ChatOpenAI`, embeddings through `OpenAIEmbeddings`), whose HTTP client is an
in-process `httpx.MockTransport`. Every request body Ragas sends is recorded.

- **exact**: the number of requests, ``n``, and every prompt string — rendered
  by the installed ragas package at run time (no Ragas text is copied here),
  counted like our own requests (`monitor.tokens`, chat overhead included);
  the texts it embeds.
- **modelled**: the completions. The mock answers each Ragas step with the
  statements, verdicts, reasons and questions our deterministic judge
  (`tests.support.answers`) gives for the same record, in Ragas's output
  fields, as compact JSON like our judge server writes its own; so completions
  differ only by Ragas's output format. Ragas parses and scores them itself,
  and its scores are checked against ours.

    python -m bench.judge_tokens [--records 60] [--seed 7] [--chunk-sentences 5-8]
        [--ragas-python /tmp/rag-monitor-ragas-venv/bin/python]

Exit status 1 if any score differs between the two patterns; 2 if the Ragas
measurement was asked for and failed (Ragas's scores differing from ours is
reported, not an error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench.harness import ragas_child, run_child
from monitor.judges import steps as step_models
from monitor.judges.llm import OpenAIJudge
from monitor.judges.wire import strict_schema
from monitor.metrics import _steps as st
from monitor.records import Context, Interaction, ScoredRecord, Usage
from monitor.scoring import ONLINE_METRICS, Scorer
from monitor.tokens import count_tokens, estimate_prompt_tokens
from tests.support import answers
from tests.support.judge_server import JudgeServer, StatsSnapshot, StepStats

ROOT = Path(__file__).resolve().parents[1]

MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"

#: the instruction each step is sent with (the system message's whole text)
INSTRUCTIONS = {
    step_models.STATEMENTS: st.STATEMENTS_INSTRUCTION,
    step_models.VERIFY: st.VERIFY_INSTRUCTION,
    step_models.QUESTIONS: st.QUESTIONS_INSTRUCTION,
    step_models.USEFULNESS: st.USEFULNESS_INSTRUCTION,
    step_models.GROUNDING: st.GROUNDING_INSTRUCTION,
}

#: the output model of each step (its JSON schema goes in ``response_format``)
OUTPUTS: dict[str, type[BaseModel]] = {
    step_models.STATEMENTS: step_models.Statements,
    step_models.VERIFY: step_models.Verdicts,
    step_models.QUESTIONS: step_models.GeneratedQuestion,
    step_models.USEFULNESS: step_models.ContextVerdicts,
    step_models.GROUNDING: step_models.Grounding,
}

# --- a small synthetic knowledge base: topic → (question, fact templates with slots)

CITIES = ["Lisbon", "Berlin", "Toronto", "Osaka", "Nairobi", "Lima", "Oslo", "Perth"]
TEAMS = ["finance", "platform", "data", "security", "support", "payments"]
PRODUCTS = ["Atlas", "Beacon", "Cobalt", "Delta", "Ember"]

TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "travel": (
        [
            "When do I need to attach a receipt for travel expenses?",
            "How much can I spend on a hotel when travelling to {city}?",
            "What does the company reimburse for business travel?",
        ],
        [
            "Travel expenses over ${amount} must be submitted with an itemised receipt.",
            "Hotel stays in {city} are reimbursed up to ${rate} per night, taxes included.",
            "Economy class is the default for flights shorter than {hours} hours.",
            "Meals during business trips are covered up to ${meal} per day without receipts.",
            "Lodging receipts are always required, regardless of the amount claimed.",
            "Claims must be filed in the expense tool within {days} days of the trip's end.",
            "Taxi rides to the airport are reimbursed when no train connection exists.",
            "Travel to {city} needs approval from the {team} budget owner in advance.",
        ],
    ),
    "leave": (
        [
            "How many vacation days do employees get?",
            "What happens to unused vacation days?",
            "How do I request parental leave?",
        ],
        [
            "Employees accrue {vacation} days of paid vacation per calendar year.",
            "Unused vacation days expire on 31 March of the following year.",
            "Up to {carry} unused vacation days may be carried over with manager approval.",
            "Parental leave of {weeks} weeks is paid in full and can be split in two blocks.",
            "Leave requests are submitted in the HR portal at least {notice} days in advance.",
            "Sick leave longer than {sick} days requires a doctor's certificate.",
            "Public holidays follow the calendar of the office the employee is assigned to.",
            "Part-time employees accrue vacation in proportion to their contracted hours.",
        ],
    ),
    "security": (
        [
            "How do I connect to the VPN from home?",
            "What are the password rules for company accounts?",
            "How do I report a phishing email?",
        ],
        [
            "Install the WireGuard client and import the profile from the IT portal.",
            "The VPN requires multi-factor authentication with the company authenticator app.",
            "Passwords must be at least {length} characters long and rotated every {rotate} days.",
            "Suspected phishing emails are forwarded to the {team} team with the report button.",
            "Laptops lock automatically after {idle} minutes without activity.",
            "USB storage devices are blocked on all managed laptops.",
            "Lost or stolen devices must be reported within {report} hours.",
            "Access to production systems is reviewed by the {team} team every quarter.",
        ],
    ),
    "product": (
        [
            "What does the {product} plan include?",
            "How do I upgrade to {product}?",
            "What is the uptime guarantee for {product}?",
        ],
        [
            "The {product} plan includes {seats} seats and {storage} GB of storage per workspace.",
            "Upgrades to {product} take effect immediately and are billed pro rata.",
            "{product} comes with a {uptime} percent monthly uptime guarantee.",
            "Service credits of {credit} percent are issued when the uptime guarantee is missed.",
            "Workspace owners can upgrade from the billing page of the admin console.",
            "{product} customers get support from the {team} team within {response} hours.",
            "Data exports are available in CSV and Parquet for every plan.",
            "Annual billing for {product} is discounted by {discount} percent.",
        ],
    ),
    "onboarding": (
        [
            "What do new hires do in their first week?",
            "Who gives new employees their laptop?",
            "When is the onboarding session held?",
        ],
        [
            "New hires receive their laptop from the IT desk on their first morning.",
            "The onboarding session is held every Monday at {hour} o'clock in {city}.",
            "Each new employee is paired with a buddy from the {team} team for {weeks} weeks.",
            "Mandatory security training must be completed within the first {days} days.",
            "Payroll details are entered in the HR portal before the first salary run.",
            "Badges are issued by reception after the identity check.",
            "New managers attend a two-day leadership course in their first quarter.",
            "The first performance check-in happens after {checkin} days.",
        ],
    ),
    "incidents": (
        [
            "How are production incidents escalated?",
            "Who is on call for the {team} services?",
            "When is a postmortem required?",
        ],
        [
            "Severity one incidents page the {team} on-call engineer immediately.",
            "The incident commander posts updates in the status channel every {update} minutes.",
            "A postmortem is required for every incident with customer impact over {impact} min.",
            "Postmortems are blameless and published within {days} business days.",
            "On-call rotations last one week and hand over on Tuesdays at {hour} o'clock.",
            "Escalation to the head of engineering happens after {escalate} minutes unmitigated.",
            "Customer communication for incidents is owned by the support team.",
            "Rollbacks are preferred over hotfixes during an active incident.",
        ],
    ),
}

INVENTED = [
    "Receipts can also be sent by fax to the {team} office in {city}.",
    "The policy was introduced by the board in {year} after an external audit.",
    "Employees in {city} get an extra {extra} days on top of the standard allowance.",
    "Exceptions are granted automatically for amounts below ${amount}.",
    "The {team} team reviews every request within {hours} hours, including weekends.",
    "This rule does not apply to contractors hired through {product} partners.",
]

NONCOMMITTAL = [
    "I don't know the answer to QUESTION; please check with the {team} team.",
    "I'm not sure the documents I can see cover QUESTION.",
]


def _fill(template: str, rng: random.Random) -> str:
    values = {
        "amount": rng.choice([50, 75, 100, 150, 250]),
        "rate": rng.choice([120, 150, 180, 220]),
        "city": rng.choice(CITIES),
        "hours": rng.choice([4, 6, 8, 24, 48]),
        "meal": rng.choice([40, 60, 80]),
        "days": rng.choice([5, 10, 14, 30]),
        "team": rng.choice(TEAMS),
        "vacation": rng.choice([20, 25, 28, 30]),
        "carry": rng.choice([3, 5, 10]),
        "weeks": rng.choice([4, 12, 16, 20]),
        "notice": rng.choice([7, 14, 21]),
        "sick": rng.choice([2, 3, 5]),
        "length": rng.choice([12, 14, 16]),
        "rotate": rng.choice([90, 180, 365]),
        "idle": rng.choice([5, 10, 15]),
        "report": rng.choice([2, 4, 24]),
        "product": rng.choice(PRODUCTS),
        "seats": rng.choice([5, 10, 25, 50]),
        "storage": rng.choice([100, 250, 1000]),
        "uptime": rng.choice(["99.5", "99.9", "99.95"]),
        "credit": rng.choice([10, 25]),
        "response": rng.choice([4, 8, 24]),
        "discount": rng.choice([10, 15, 20]),
        "hour": rng.choice([9, 10, 14]),
        "checkin": rng.choice([30, 60, 90]),
        "update": rng.choice([15, 30]),
        "impact": rng.choice([5, 15, 30]),
        "escalate": rng.choice([30, 60]),
        "year": rng.choice([2019, 2021, 2023]),
        "extra": rng.choice([2, 3, 5]),
    }
    return template.format(**values)


def _context(facts: list[str], rng: random.Random, sentences: tuple[int, int]) -> str:
    """A retrieved chunk: ``sentences`` (min, max) filled fact sentences, ~15 tokens each."""
    low, high = sentences
    picked = rng.sample(facts, min(len(facts), rng.randint(low, high)))
    return " ".join(_fill(t, rng) for t in picked)


def generate_records(
    count: int, seed: int, chunk_sentences: tuple[int, int] = (5, 8)
) -> list[Interaction]:
    """``count`` varied records, deterministic for a seed."""
    rng = random.Random(seed)

    def _chunk(facts: list[str]) -> str:
        return _context(facts, rng, chunk_sentences)

    names = sorted(TOPICS)
    records: list[Interaction] = []
    for i in range(count):
        topic = names[i % len(names)]
        questions, facts = TOPICS[topic]
        question = _fill(rng.choice(questions), rng)
        relevant = [_chunk(facts) for _ in range(rng.randint(1, 3))]
        others = [t for t in names if t != topic]
        noise = [_chunk(TOPICS[rng.choice(others)][1]) for _ in range(rng.randint(1, 3))]
        contexts = relevant + noise
        rng.shuffle(contexts)
        contexts = contexts[:6] if len(contexts) >= 3 else contexts + noise[:1]
        while len(contexts) < 3:
            contexts.append(_chunk(TOPICS[rng.choice(others)][1]))
        kind = rng.choices(["faithful", "invented", "noncommittal"], weights=[5, 4, 1])[0]
        if kind == "noncommittal":
            # unique per record, so the frugal run gets no cache hits from repeated answers
            response = _fill(rng.choice(NONCOMMITTAL), rng).replace("QUESTION", f'"{question}"')
        else:
            sentences = [s.strip() + "." for c in relevant for s in c.split(".") if s.strip()]
            response_sentences = rng.sample(sentences, min(len(sentences), rng.randint(2, 3)))
            if kind == "invented":
                position = rng.randint(0, len(response_sentences))
                response_sentences.insert(position, _fill(rng.choice(INVENTED), rng))
            response = " ".join(response_sentences)
        records.append(
            Interaction(
                id=f"bench-{i:03d}",
                user_input=question,
                retrieved_contexts=tuple(Context(text=c) for c in contexts),
                response=response,
                metadata={"topic": topic, "kind": kind},
            )
        )
    return records


# --- the run


@dataclass
class Run:
    pattern: str
    records: list[ScoredRecord]
    stats: StatsSnapshot
    cache_hits: int

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.records:
            total.add(r.usage)
        return total


async def score_all(server: JudgeServer, records: list[Interaction], pattern: str) -> Run:
    server.stats.reset()
    judge = OpenAIJudge(
        base_url=server.base_url,
        model=MODEL,
        embedding_model=EMBEDDING_MODEL,
        timeout_seconds=30.0,
        max_retries=0,
        concurrency=8,
    )
    try:
        scorer = Scorer(judge, ONLINE_METRICS, call_pattern=pattern)  # type: ignore[arg-type]
        scored = [await scorer.score(r) for r in records]
    finally:
        await judge.aclose()
    return Run(pattern, scored, server.stats.snapshot(), scorer.cache_hits)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _instruction_tokens(run: Run) -> int:
    """Tokens of instruction text the run sent: per answered request, its step's instruction."""
    return sum(
        stats.answered * count_tokens(INSTRUCTIONS[step].strip(), MODEL)
        for step, stats in run.stats.steps.items()
    )


def report(records: list[Interaction], per_call: Run, frugal: Run) -> int:
    n = len(records)
    contexts = sum(len(r.retrieved_contexts) for r in records) / n
    chunk = sum(count_tokens(c.text, MODEL) for r in records for c in r.retrieved_contexts) / (
        contexts * n
    )
    metrics = ", ".join(ONLINE_METRICS)
    print(
        f"records: {n}, contexts per record: {contexts:.2f} (3–6), "
        f"tokens per context: {chunk:.0f}, metrics: {metrics}"
    )
    print()
    print("| per record | per_call | frugal | frugal / per_call |")
    print("|---|---:|---:|---:|")
    rows = [
        ("judge calls (chat + embeddings)", per_call.usage.calls, frugal.usage.calls),
        ("prompt tokens", per_call.usage.prompt_tokens, frugal.usage.prompt_tokens),
        ("completion tokens", per_call.usage.completion_tokens, frugal.usage.completion_tokens),
        ("total tokens", per_call.usage.total_tokens, frugal.usage.total_tokens),
    ]
    for label, before, after in rows:
        print(f"| {label} | {before / n:.1f} | {after / n:.1f} | {after / before:.2f} |")
    print()
    print("Spend per step (tokens per record: prompt + completion; calls per record):")
    print()
    print("| step | per_call calls | per_call tokens | frugal calls | frugal tokens |")
    print("|---|---:|---:|---:|---:|")
    steps = sorted(set(per_call.stats.steps) | set(frugal.stats.steps))
    for step in steps:
        a = per_call.stats.steps.get(step)
        b = frugal.stats.steps.get(step)
        cells = []
        for s in (a, b):
            if s is None:
                cells += ["0", "0"]
            else:
                spent = s.prompt_tokens + s.completion_tokens
                cells += [f"{s.requests / n:.1f}", f"{spent / n:.0f}"]
        print(f"| {step} | " + " | ".join(cells) + " |")
    a_e, b_e = per_call.stats, frugal.stats
    print(
        f"| embeddings | {a_e.embedding_requests / n:.1f} | {a_e.embedding_tokens / n:.0f} | "
        f"{b_e.embedding_requests / n:.1f} | {b_e.embedding_tokens / n:.0f} |"
    )
    print()
    differing = 0
    for x, y in zip(per_call.records, frugal.records, strict=True):
        for metric in ONLINE_METRICS:
            if not _same(x.results[metric].score, y.results[metric].score):
                differing += 1
                print(
                    f"DIFFERENT {x.interaction.id} {metric}: "
                    f"{x.results[metric].score} vs {y.results[metric].score}"
                )
    means = {
        m: sum(r.results[m].score for r in frugal.records if r.results[m].scoreable)
        / max(1, sum(1 for r in frugal.records if r.results[m].scoreable))
        for m in ONLINE_METRICS
    }
    print(
        "scores identical in both patterns: "
        + ("yes" if differing == 0 else f"NO ({differing} differ)")
        + f" ({n * len(ONLINE_METRICS)} scores; means "
        + ", ".join(f"{m} {v:.3f}" for m, v in means.items())
        + f"; frugal cache hits {frugal.cache_hits})"
    )
    bare = {
        run.pattern: run.usage.total_tokens - _instruction_tokens(run) for run in (per_call, frugal)
    }
    print(
        f"without any instruction text: per_call {bare['per_call'] / n:.1f}, "
        f"frugal {bare['frugal'] / n:.1f} tokens per record → "
        f"{bare['frugal'] / bare['per_call']:.2f}×"
    )
    calls_ratio = frugal.usage.calls / per_call.usage.calls
    tokens_ratio = frugal.usage.total_tokens / per_call.usage.total_tokens
    print(
        f"targets: tokens ≤ 0.40× → {tokens_ratio:.2f}× "
        f"({'met' if tokens_ratio <= 0.4 else 'not met'}); "
        f"calls ≤ 0.50× → {calls_ratio:.2f}× ({'met' if calls_ratio <= 0.5 else 'not met'})"
    )
    return 1 if differing else 0


# --- Ragas itself (--ragas-python): its own metric code and prompts, our judge's answers

#: Ragas metric name → ours
RAGAS_METRICS = {
    "faithfulness": "faithfulness",
    "answer_relevancy": "response_relevancy",
    "llm_context_precision_without_reference": "context_utility",
}

#: Ragas's steps, named by the input fields its prompt renders (`bench.harness.ragas_child`)
RAGAS_STEPS = {
    "answer+question": "faithfulness: statements",
    "context+statements": "faithfulness: NLI verdicts",
    "response": "answer_relevancy: questions",
    "answer+context+question": "context precision: verification",
}


def _key(inputs: dict[str, Any]) -> str:
    """A step's inputs as a lookup key (the child parses them back from Ragas's prompt)."""
    return json.dumps(inputs, sort_keys=True, ensure_ascii=False)


def _completion(output: dict[str, Any]) -> str:
    """An answer written as our judge server writes its own: compact JSON."""
    return json.dumps(output, ensure_ascii=False)


def ragas_job(records: list[Interaction]) -> dict[str, Any]:
    """What the child needs: the records, and our judge's answer to every Ragas step of each.

    The answers come from the deterministic rules our judge server uses
    (`tests.support.answers`), put in Ragas's output fields: statements →
    ``{"statements": [...]}``; verify over the contexts joined →
    ``{"statements": [{statement, reason, verdict}]}``; the generated question →
    ``{"question", "noncommittal"}``; usefulness of one context →
    ``{"reason", "verdict"}``. Embedding vectors are ours too (for the score check).
    """
    found: dict[str, str] = {}
    vectors: dict[str, list[float]] = {}
    rows = []
    for r in records:
        question, response = r.user_input, r.response
        contexts = [c.text for c in r.retrieved_contexts]
        rows.append(
            {"id": r.id, "user_input": question, "response": response, "contexts": contexts}
        )
        asked_for = {"question": question, "text": response}
        said = answers.answer(step_models.STATEMENTS, asked_for, 1)[0]
        statements = said["statements"]
        found[_key({"question": question, "answer": response})] = _completion(
            {"statements": statements}
        )
        joined = step_models.join_contexts(contexts)
        checked = answers.answer(
            step_models.VERIFY, {"context": joined, "statements": statements}, 1
        )[0]
        found[_key({"context": joined, "statements": statements})] = _completion(
            {"statements": checked["verdicts"]}
        )
        asked = answers.answer(step_models.QUESTIONS, {"response": response}, 1)[0]
        found[_key({"response": response})] = _completion(asked)
        for context in contexts:
            inputs = {"question": question, "answer": response, "contexts": [context]}
            verdict = answers.answer(step_models.USEFULNESS, inputs, 1)[0]["verdicts"][0]
            found[_key({"question": question, "context": context, "answer": response})] = (
                _completion(verdict)
            )
        for text in (question, asked["question"]):
            vectors[text] = answers.embed([text])[0]
    return {"records": rows, "answers": found, "vectors": vectors}


@dataclass
class RagasStep(StepStats):
    """One Ragas step's requests and tokens, counted as the judge server counts ours."""

    #: prompt tokens outside the rendered inputs: instruction, JSON schema, examples
    fixed_tokens: int = 0
    #: the completions laid out as Ragas's examples are (``indent=4``)
    indented_completion_tokens: int = 0


@dataclass
class RagasRun:
    version: str
    steps: dict[str, RagasStep] = field(default_factory=dict)
    embedding_requests: int = 0
    embedding_tokens: int = 0
    #: request keys besides ``messages`` (``n``, ``temperature``, … as ChatOpenAI sends them)
    request_keys: set[str] = field(default_factory=set)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def usage(self) -> Usage:
        """Calls and tokens as `Usage` counts ours: embeddings in calls and prompt tokens."""
        return Usage(
            calls=sum(s.requests for s in self.steps.values()) + self.embedding_requests,
            prompt_tokens=sum(s.prompt_tokens for s in self.steps.values()) + self.embedding_tokens,
            completion_tokens=sum(s.completion_tokens for s in self.steps.values()),
        )


def run_ragas(python: str, records: list[Interaction]) -> RagasRun:
    """Ragas's three metrics on ``records`` in ``python`` (`bench.harness.ragas_child`, every
    request answered in its process from `ragas_job`); its requests' tokens counted as the
    judge server counts ours. `RuntimeError` when Ragas failed on any record."""
    job = ragas_job(records) | {
        "metrics": list(RAGAS_METRICS),
        # no request leaves the child: the URL is never reached and the key never checked
        "chat": {
            "model": MODEL,
            "base_url": "http://judge.invalid/v1",
            "api_key": "not-used",
            "max_retries": 0,
        },
        "embedding_model": EMBEDDING_MODEL,
        "concurrency": 1,
    }
    with tempfile.TemporaryDirectory(prefix="judge-tokens-") as tmp:
        out = Path(tmp) / "ragas.jsonl"
        run_child(python, ragas_child, job, timeout=900, result=out)
        lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    failed = [line for line in lines if line["error"]]
    if failed:
        first = failed[0]
        raise RuntimeError(
            f"Ragas failed on {len(failed)} of {len(lines)} records; the first, "
            f"{first['id']}: {first['error']}: {first.get('detail', '')}"
        )
    scores = {
        line["id"]: {m: math.nan if line[m] is None else float(line[m]) for m in RAGAS_METRICS}
        for line in lines
    }
    run = RagasRun(version=lines[0]["version"], scores=scores)
    for call in (call for line in lines for call in line["calls"]):
        if call["step"] == "embeddings":
            run.embedding_requests += 1
            run.embedding_tokens += sum(count_tokens(t, call["model"]) for t in call["texts"])
            continue
        step = run.steps.setdefault(RAGAS_STEPS.get(call["step"], call["step"]), RagasStep())
        prompt = estimate_prompt_tokens(
            [{"role": m["role"], "content": m["content"]} for m in call["messages"]], MODEL
        )
        step.requests += 1
        step.choices += len(call["contents"])
        step.prompt_tokens += prompt
        step.fixed_tokens += prompt - count_tokens(call["inputs_text"], MODEL)
        step.completion_tokens += sum(count_tokens(c, MODEL) for c in call["contents"])
        step.indented_completion_tokens += sum(
            count_tokens(json.dumps(json.loads(c), indent=4, ensure_ascii=False), MODEL)
            for c in call["contents"]
        )
        run.request_keys.update(call["keys"])
    return run


def _schema_tokens(run: Run) -> int:
    """Tokens of the ``response_format`` JSON schemas our requests carried (not counted above)."""
    total = 0
    for step, stats in run.stats.steps.items():
        schema = {"name": step, "schema": strict_schema(OUTPUTS[step]), "strict": True}
        total += stats.requests * count_tokens(json.dumps(schema), MODEL)
    return total


def report_ragas(records: list[Interaction], ragas: RagasRun, per_call: Run, frugal: Run) -> None:
    n = len(records)
    print()
    print(
        f"Ragas {ragas.version} on the same records (Faithfulness, ResponseRelevancy "
        "strictness 3, LLMContextPrecisionWithoutReference; LangchainLLMWrapper(ChatOpenAI)): "
        "its requests and prompt strings exact, its completions our judge's answers"
    )
    print()
    print(
        f"| per record | Ragas {ragas.version} | per_call | frugal | "
        "per_call / Ragas | frugal / Ragas |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    theirs, a, b = ragas.usage, per_call.usage, frugal.usage
    rows = [
        ("judge calls (chat + embeddings)", theirs.calls, a.calls, b.calls),
        ("prompt tokens", theirs.prompt_tokens, a.prompt_tokens, b.prompt_tokens),
        ("completion tokens", theirs.completion_tokens, a.completion_tokens, b.completion_tokens),
        ("total tokens", theirs.total_tokens, a.total_tokens, b.total_tokens),
    ]
    for label, base, x, y in rows:
        print(
            f"| {label} | {base / n:.1f} | {x / n:.1f} | {y / n:.1f} | "
            f"{x / base:.2f} | {y / base:.2f} |"
        )
    print()
    print(
        "| Ragas step (per record) | requests | completions | prompt tokens | "
        "of which instruction, schema, examples | completion tokens |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in sorted(ragas.steps):
        s = ragas.steps[name]
        print(
            f"| {name} | {s.requests / n:.1f} | {s.choices / n:.1f} | {s.prompt_tokens / n:.0f} | "
            f"{s.fixed_tokens / n:.0f} | {s.completion_tokens / n:.0f} |"
        )
    print(
        f"| embeddings | {ragas.embedding_requests / n:.1f} | | "
        f"{ragas.embedding_tokens / n:.0f} | | |"
    )
    print()
    print("Ragas chat request fields besides messages: " + ", ".join(sorted(ragas.request_keys)))
    equal, compared, worst = 0, 0, 0.0
    for r in frugal.records:
        for theirs_name, ours_name in RAGAS_METRICS.items():
            theirs_score = ragas.scores[r.interaction.id][theirs_name]
            our_score = r.results[ours_name].score
            compared += 1
            if math.isnan(theirs_score) or math.isnan(our_score):
                equal += int(math.isnan(theirs_score) and math.isnan(our_score))
                continue
            worst = max(worst, abs(theirs_score - our_score))
            equal += int(abs(theirs_score - our_score) <= 1e-6)
    print(
        f"Ragas's own scoring of these answers equals ours on {equal} of {compared} scores "
        f"(|Δ| ≤ 1e-6; largest |Δ| {worst:.1e})"
    )
    fixed = sum(s.fixed_tokens for s in ragas.steps.values())
    print(
        f"Ragas's instruction, schema and examples: {fixed / n:.0f} tokens per record "
        f"({fixed / theirs.prompt_tokens:.0%} of its prompt tokens)"
    )
    indented = theirs.total_tokens + sum(
        s.indented_completion_tokens - s.completion_tokens for s in ragas.steps.values()
    )
    print(
        f"with Ragas's completions indented like its examples (indent=4): {indented / n:.1f} "
        f"tokens per record → frugal {b.total_tokens / indented:.2f}×, "
        f"per_call {a.total_tokens / indented:.2f}×"
    )
    sa, sb = _schema_tokens(per_call), _schema_tokens(frugal)
    print(
        f"not counted above: our response_format schemas, per_call {sa / n:.0f}, "
        f"frugal {sb / n:.0f} tokens per record (Ragas's schema is in its prompt text); "
        f"billed as prompt text → frugal {(b.total_tokens + sb) / theirs.total_tokens:.2f}×, "
        f"per_call {(a.total_tokens + sa) / theirs.total_tokens:.2f}× of Ragas"
    )


async def main_async(
    count: int, seed: int, sentences: tuple[int, int], ragas_python: str | None = None
) -> int:
    records = generate_records(count, seed, sentences)
    with JudgeServer() as server:
        per_call = await score_all(server, records, "per_call")
        frugal = await score_all(server, records, "frugal")
    ragas: RagasRun | None = None
    failed = ""
    if ragas_python is not None:
        try:
            ragas = await asyncio.to_thread(run_ragas, ragas_python, records)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            failed = str(exc)
    status = report(records, per_call, frugal)
    if ragas is not None:
        report_ragas(records, ragas, per_call, frugal)
    if failed:
        print(f"\nRagas measurement failed: {failed}", file=sys.stderr)
        return status or 2
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--chunk-sentences",
        default="5-8",
        metavar="MIN-MAX",
        help="sentences per retrieved chunk (default 5-8, about 75-120 tokens)",
    )
    parser.add_argument(
        "--ragas-python",
        metavar="PATH",
        help="a Python with ragas 0.4.3 installed: also measure what Ragas itself spends "
        "(e.g. /tmp/rag-monitor-ragas-venv/bin/python, made by .ci/run)",
    )
    args = parser.parse_args()
    if args.records < 1:
        parser.error("--records must be >= 1")
    try:
        low, high = (int(x) for x in args.chunk_sentences.split("-"))
    except ValueError:
        parser.error("--chunk-sentences must look like 5-8")
    if not 1 <= low <= high <= 8:
        parser.error("--chunk-sentences must be within 1-8, MIN <= MAX")
    return asyncio.run(main_async(args.records, args.seed, (low, high), args.ragas_python))


if __name__ == "__main__":
    sys.exit(main())
