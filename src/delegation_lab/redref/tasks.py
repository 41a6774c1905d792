"""The split-knowledge world of the paper's experiments: a zoo of 16 agents with per-domain
competences, composite tasks of 4-6 domains that no single agent can solve, and the simulated agent
backend that plays the zoo through the solver protocol.

Agent i's own domain is domain i. Each agent also writes parts in *related* domains at a lower
competence and score, so a part can be recovered when its expert fails or is impaired: one or two
for the RAG specialists, one to five for the conversational generalists (breadth is where agents
differ in how often they help, which is what belief-guided routing can learn). Related parts score
below the fact threshold on average, so no single agent can bring a task to the success score. A call adds value (a positive marginal contribution) when it writes a still
missing part or a better version of a weak one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.hashing import stable_hash
from delegation_lab.redref.params import SPECIALISTS, TaskParams, ZooParams
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.pricing import estimate_tokens, lognormal_tokens, messages_tokens

RELATED: dict[str, list[str]] = {
    # RAG specialists: narrow and deep (their retrieval corpus reaches one or two neighbours)
    "biology": ["medicine", "fitness"],
    "finance": ["mathematics", "career_guidance"],
    "law": ["politics"],
    "medicine": ["biology", "fitness"],
    "electrical_engineering": ["technology"],
    "mathematics": ["electrical_engineering", "finance"],
    # conversational generalists: breadth varies from broad (academics, technology, daily planning)
    # to narrow (storytelling, trivia)
    "academics": ["mathematics", "literature", "biology", "politics", "career_guidance"],
    "technology": ["electrical_engineering", "mathematics", "finance", "career_guidance"],
    "daily_planning": ["fitness", "career_guidance", "finance", "medicine"],
    "career_guidance": ["finance", "academics", "daily_planning"],
    "politics": ["law", "geography", "finance"],
    "geography": ["politics", "trivia"],
    "fitness": ["medicine", "daily_planning"],
    "literature": ["storytelling", "academics"],
    "storytelling": ["literature"],
    "trivia": ["geography"],
}

# Stage 1 of the paper's task pipeline (A.1.1): single-agent questions per domain.
QUESTIONS: dict[str, list[str]] = {
    "biology": [
        "explain how the gut microbiome adapts to a high-fibre diet",
        "describe the cellular stages of muscle tissue repair after injury",
        "summarise how CRISPR edits a target gene and its off-target risks",
        "explain how circadian rhythms are regulated at the genetic level",
        "compare aerobic and anaerobic respiration in human cells",
        "describe how invasive species disrupt a freshwater ecosystem",
    ],
    "finance": [
        "build a twelve-month budget with an emergency fund target",
        "compare index funds and bonds for a five-year horizon",
        "estimate the net present value of a community solar project",
        "explain how a variable-rate loan reacts to rising interest rates",
        "plan cash flow for a small clinic's first operating year",
        "assess the financing options for a municipal infrastructure upgrade",
    ],
    "law": [
        "outline the liability issues of publishing patient data",
        "summarise the tenant protections that apply during renovations",
        "explain the consent requirements for recording interviews",
        "list the permits a community event on public land requires",
        "describe the intellectual-property risks of reusing course material",
        "explain employment-law limits on overtime for shift workers",
    ],
    "medicine": [
        "describe the standard rehabilitation protocol after knee surgery",
        "list the warning signs of dehydration in older adults",
        "explain first-line treatment options for type 2 diabetes",
        "summarise vaccination guidance for travellers to the tropics",
        "describe triage priorities in a mass-casualty incident",
        "explain how chronic stress affects blood pressure",
    ],
    "electrical_engineering": [
        "size a rooftop solar array and battery for a small clinic",
        "design a fault-tolerant power supply for a field laboratory",
        "explain how to reduce electromagnetic interference in a sensor network",
        "specify the wiring and protection for an electric-vehicle charger",
        "design a low-power microcontroller circuit for a wearable tracker",
        "plan the backup generator transfer switch for a shelter",
    ],
    "mathematics": [
        "model the expected queue length at a vaccination centre",
        "compute the optimal order quantity for medical supplies",
        "estimate the probability that two schedules conflict",
        "fit a growth curve to monthly membership data",
        "solve the shortest delivery route among six depots",
        "derive the break-even point for a subscription service",
    ],
    "fitness": [
        "design a progressive eight-week strength programme",
        "plan low-impact cardio sessions for a recovering patient",
        "suggest mobility routines for desk workers",
        "structure a marathon taper for the final three weeks",
        "plan warm-ups and cool-downs for a youth football team",
        "design a balance programme to prevent falls",
    ],
    "literature": [
        "recommend novels that explore resilience after loss",
        "analyse the narrative voice of a classic coming-of-age story",
        "compile a reading list on climate fiction",
        "compare two poems about migration and home",
        "summarise the themes of a dystopian novel for a book club",
        "select short stories suitable for a community reading circle",
    ],
    "technology": [
        "choose a scheduling app for a volunteer network",
        "compare cloud storage options for sensitive records",
        "set up a secure home network for remote work",
        "recommend accessibility tools for visually impaired users",
        "plan the rollout of tablets in a rural school",
        "evaluate open-source tools for tracking inventory",
    ],
    "geography": [
        "identify flood-prone districts along a river basin",
        "describe the climate zones a cross-country trip passes through",
        "map the best locations for regional supply hubs",
        "explain how terrain shapes rural access to healthcare",
        "compare urban heat islands in three coastal cities",
        "list the natural hazards of a mountain village",
    ],
    "storytelling": [
        "write a short narrative that explains the plan to residents",
        "craft a story that motivates volunteers to join",
        "turn the project's milestones into a community story",
        "write an engaging opening for a public presentation",
        "create a character-driven case study for a newsletter",
        "draft a bedtime story that teaches healthy habits",
    ],
    "politics": [
        "analyse how local government could support the initiative",
        "summarise the policy debate around public health funding",
        "identify the stakeholders who must approve the proposal",
        "explain how election cycles affect infrastructure projects",
        "compare national and regional responsibilities for disaster relief",
        "outline a lobbying strategy for a community clinic",
    ],
    "academics": [
        "find peer-reviewed evidence supporting the intervention",
        "design a study to evaluate the programme's outcomes",
        "write an abstract summarising the project for a journal",
        "plan a literature review on community health workers",
        "outline the ethics approval needed for a field study",
        "suggest citation practices for a mixed-methods report",
    ],
    "career_guidance": [
        "map the career paths into renewable-energy jobs",
        "advise a nurse who wants to move into health policy",
        "prepare interview tips for a project-manager role",
        "plan the skills training for new clinic staff",
        "suggest mentoring structures for early-career engineers",
        "write a job description for a volunteer coordinator",
    ],
    "trivia": [
        "collect surprising facts to open a public talk",
        "list historical firsts related to the topic",
        "prepare a quiz that checks the audience's understanding",
        "find memorable statistics for a poster",
        "gather fun facts about the region for a tour",
        "note famous inventors connected to the theme",
    ],
    "daily_planning": [
        "turn the plan into a weekly schedule with milestones",
        "organise a daily routine that fits the training sessions",
        "plan the logistics of a one-day community workshop",
        "build a checklist for the first month of the project",
        "schedule appointments around a full-time job",
        "plan meal preparation for a busy week",
    ],
}

# The merged MCP of a composite task (A.1.2): each contributing agent's intent and tools.
MCP: dict[str, tuple[str, list[str]]] = {
    "biology": ("explain the biological mechanism", ["pubmed_search", "gene_ontology_lookup"]),
    "finance": ("quantify costs and funding", ["budget_calculator", "loan_amortizer"]),
    "law": ("check legal obligations", ["statute_search", "case_law_lookup"]),
    "medicine": ("give clinical guidance", ["clinical_guidelines", "drug_interaction_check"]),
    "electrical_engineering": ("design the electrical system", ["circuit_simulator", "load_calculator"]),
    "mathematics": ("build the quantitative model", ["equation_solver", "optimizer"]),
    "fitness": ("prescribe exercise", ["workout_planner", "heart_rate_zones"]),
    "literature": ("curate readings", ["library_catalog", "book_summaries"]),
    "technology": ("select the software and devices", ["product_comparison", "security_checklist"]),
    "geography": ("analyse places and terrain", ["map_search", "climate_atlas"]),
    "storytelling": ("write the narrative", ["story_outline", "tone_adjuster"]),
    "politics": ("map the policy landscape", ["policy_tracker", "stakeholder_map"]),
    "academics": ("ground it in research", ["scholar_search", "citation_manager"]),
    "career_guidance": ("advise on roles and skills", ["job_board", "skills_matrix"]),
    "trivia": ("add engaging facts", ["fact_finder", "quiz_maker"]),
    "daily_planning": ("schedule the work", ["calendar", "task_scheduler"]),
}

FRAMES = [
    "Prepare a joint plan for a community project. The team must {parts}.",
    "A regional foundation asks for a single report. In it, {parts}.",
    "Help a family with a complex decision: {parts}.",
    "Draft a proposal for a city council that will {parts}.",
    "Write a recovery and action plan in which you {parts}.",
]


@dataclass(frozen=True)
class Zoo:
    """The agent population as arrays. Agent i's own domain is domain i."""

    names: list[str]
    specialist: np.ndarray  # bool [N]
    competence: np.ndarray  # float [N, K]: P(usable part) per domain
    quality: np.ndarray  # float [N, K]: mean score of a part per domain
    tokens_in_extra: np.ndarray  # float [N]: retrieval context per call
    tokens_out_mean: np.ndarray  # float [N]
    params: ZooParams

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def domains(self) -> list[str]:
        return self.names

    def covered_domains(self, agent: int) -> list[int]:
        return [int(k) for k in np.nonzero(self.competence[agent] > 0)[0]]


def build_zoo(params: ZooParams) -> Zoo:
    names = list(params.agents)
    index = {n: i for i, n in enumerate(names)}
    n = len(names)
    specialist = np.array([a in SPECIALISTS for a in names])
    competence = np.zeros((n, n))
    quality = np.zeros((n, n))
    for i, name in enumerate(names):
        competence[i, i] = params.specialist_competence if specialist[i] else params.generalist_competence
        quality[i, i] = params.specialist_quality if specialist[i] else params.generalist_quality
        for rel in RELATED[name]:
            if rel in index:
                competence[i, index[rel]] = params.related_competence
                quality[i, index[rel]] = params.related_quality
    return Zoo(
        names=names,
        specialist=specialist,
        competence=competence,
        quality=quality,
        tokens_in_extra=np.where(specialist, params.retrieval_tokens, 0).astype(float),
        tokens_out_mean=np.where(specialist, params.specialist_tokens_out, params.generalist_tokens_out).astype(float),
        params=params,
    )


@dataclass(frozen=True)
class TaskPool:
    """Composite tasks: required domains, text, programmatic checkability, prompt size."""

    ids: list[str]
    texts: list[str]
    required: np.ndarray  # bool [P, K]
    checkable: np.ndarray  # bool [P]
    tokens: np.ndarray  # float [P]: estimated prompt tokens of the query
    facts: list[dict[str, str]]  # per task: domain -> key fact string

    @property
    def size(self) -> int:
        return len(self.ids)

    def item(self, p: int, zoo: Zoo) -> Item:
        """Task p as a platform Item (its parts, facts and checkability in `program`)."""
        parts = [zoo.names[k] for k in np.nonzero(self.required[p])[0]]
        program = json.dumps({"parts": parts, "facts": self.facts[p], "checkable": bool(self.checkable[p])})
        return Item(
            item_id=self.ids[p], split="tasks", question=self.texts[p], gold=None, difficulty=len(parts),
            domain="split-knowledge", source="redref", source_id=self.ids[p], program=program,
        )


def _join_parts(clauses: list[str]) -> str:
    return ", ".join(clauses[:-1]) + ", and " + clauses[-1] if len(clauses) > 1 else clauses[0]


def generate_tasks(zoo: Zoo, params: TaskParams, seed: int, prompt_overhead: int = 0) -> TaskPool:
    """Stage 2 of the paper's pipeline (A.1.2): compose 4-6 domains' questions into one task."""
    if zoo.n < params.max_domains:
        raise InputError(f"agent pool of {zoo.n} is smaller than a task's {params.max_domains} domains")
    rng = np.random.default_rng([seed, 3])
    weights = np.array([params.popularity.get(name, 1.0) for name in zoo.names])
    weights = weights / weights.sum()
    covers = zoo.competence > 0
    ids, texts, facts = [], [], []
    required = np.zeros((params.pool_size, zoo.n), dtype=bool)
    for p in range(params.pool_size):
        for _ in range(1000):  # compose until no single agent covers every part (A.1.3: unsolvable by one agent)
            n_domains = int(rng.integers(params.min_domains, params.max_domains + 1))
            chosen = np.sort(rng.choice(zoo.n, size=n_domains, replace=False, p=weights))
            if not (covers[:, chosen].all(axis=1)).any():
                break
        else:
            raise InputError(f"cannot compose a task of {params.min_domains}-{params.max_domains} domains that no single "
                             f"agent of {zoo.names} covers; add agents or raise tasks.min_domains")
        required[p, chosen] = True
        clauses = [QUESTIONS[zoo.names[k]][int(rng.integers(len(QUESTIONS[zoo.names[k]])))] for k in chosen]
        order = rng.permutation(len(clauses))
        text = FRAMES[int(rng.integers(len(FRAMES)))].format(parts=_join_parts([clauses[o] for o in order]))
        mcp = [MCP[zoo.names[chosen[o]]] for o in order]
        text += " Intents: " + "; ".join(m[0] for m in mcp) + ". Tools: " + ", ".join(t for m in mcp for t in m[1]) + "."
        ids.append(f"sk-{p:04d}")
        texts.append(text)
        facts.append({zoo.names[k]: f"FACT-{zoo.names[k][:3].upper()}-{stable_hash([seed, p, int(k)], 6)}" for k in chosen})
    return TaskPool(
        ids=ids,
        texts=texts,
        required=required,
        checkable=rng.random(params.pool_size) < params.checkable_rate,
        tokens=np.array([estimate_tokens(t) + prompt_overhead for t in texts], dtype=float),
        facts=facts,
    )


# --------------------------------------------------------------------------------------------
# the simulated agents and judge behind the solver protocol


def section_draw(seed: int, item_id: str, agent: str, domain: str, nonce: int) -> tuple[float, float]:
    """(uniform for success, standard normal for the score) of one part attempt: a pure function, so
    the simulated judge can re-derive the true score of any section an agent wrote."""
    rng = np.random.default_rng([seed, int(stable_hash([item_id, agent, domain, nonce], 12), 16)])
    return float(rng.random()), float(rng.standard_normal())


def section_score(zoo: Zoo, seed: int, item_id: str, agent: str, domain: str, nonce: int, impaired: frozenset[str]) -> float | None:
    """The true 0-100 score of the part `agent` writes for `domain` on attempt `nonce` (None: no usable part)."""
    i, k = zoo.names.index(agent), zoo.names.index(domain)
    u, z = section_draw(seed, item_id, agent, domain, nonce)
    competence = 0.0 if agent in impaired else zoo.competence[i, k]
    if u >= competence:
        return None
    return float(np.clip(zoo.quality[i, k] + zoo.params.quality_sd * z, 0.0, 100.0))


SECTION = re.compile(r"^## (?P<domain>[a-z_]+) \| by (?P<agent>[a-z_]+) \| #(?P<nonce>\d+)$", re.M)


def parse_sections(text: str) -> dict[str, tuple[str, int, str]]:
    """domain -> (agent, nonce, body) of every section in a draft (the last one of a domain wins)."""
    out: dict[str, tuple[str, int, str]] = {}
    matches = list(SECTION.finditer(text or ""))
    for j, m in enumerate(matches):
        end = matches[j + 1].start() if j + 1 < len(matches) else len(text)
        out[m.group("domain")] = (m.group("agent"), int(m.group("nonce")), text[m.end():end].strip())
    return out


def render_sections(sections: dict[str, tuple[str, int, str]]) -> str:
    return "\n\n".join(f"## {d} | by {a} | #{n}\n{body}" for d, (a, n, body) in sections.items())


CRITIQUE_PARTS = re.compile(r"(missing|weak) parts: ([a-z_, ]+)")


def wanted_parts(parts: list[str], critique: str) -> list[str]:
    """The parts the refined query asks for: those the judge's critique names missing or weak, or
    every part before the first critique."""
    named = {p.strip() for m in CRITIQUE_PARTS.finditer(critique or "") for p in m.group(2).split(",")}
    if not named and "every part is present" not in (critique or ""):
        return list(parts)
    return [p for p in parts if p in named]


def filler(head: str, tokens: int) -> str:
    """`head` padded with neutral words to about `tokens` tokens (estimate_tokens: ~4 characters each)."""
    pad = max(0, tokens * 4 - len(head))
    words = (" detail" * (pad // 7 + 1))[:pad]
    return head + words


class SplitKnowledgeBackend:
    """Plays every agent of the zoo (role `redref_agent`): the request context names the agent and
    the attempt; the agent writes a section for each required part it covers and succeeds at, with
    the part's key fact when the section is usable. Deterministic in (seed, task, agent, attempt)."""

    def __init__(self, zoo: Zoo, seed: int, impaired: frozenset[str] = frozenset()):
        self.zoo = zoo
        self.seed = seed
        self.impaired = impaired

    def fingerprint(self) -> dict[str, Any]:
        return {"zoo": self.zoo.params.model_dump(), "seed": self.seed, "impaired": sorted(self.impaired)}

    def generate(self, requests: list[Request]) -> list[Generation]:
        return [self._one(r) for r in requests]

    def _one(self, request: Request) -> Generation:
        if request.role != "redref_agent":
            raise ValueError(f"SplitKnowledgeBackend plays role 'redref_agent', not {request.role!r}")
        agent = request.context["agent"]
        nonce = int(request.context["attempt"])
        task = json.loads(request.item.program or "{}")
        i = self.zoo.names.index(agent)
        rng = np.random.default_rng([self.seed, int(stable_hash([request.item.item_id, agent, nonce, "tok"], 12), 16)])
        tokens_out = int(lognormal_tokens(rng, self.zoo.tokens_out_mean[i], self.zoo.params.tokens_cv))
        written = {}
        for domain in wanted_parts(task.get("parts", []), request.context.get("critique", "")):
            score = section_score(self.zoo, self.seed, request.item.item_id, agent, domain, nonce, self.impaired)
            if score is not None:
                written[domain] = task["facts"][domain] if score >= self.zoo.params.fact_score else "FACT-UNSURE"
        # the text is as long as the completion it stands for (~4 characters a token), split among the parts
        share = tokens_out // max(len(written), 1)
        sections = {d: (agent, nonce, filler(f"{agent} on {d}", share - 12) + f"\nFact: {fact}") for d, fact in written.items()}
        text = render_sections(sections) if sections else filler(f"({agent} has nothing to add to this task.)", tokens_out)
        return Generation(
            text=text,
            tokens_in=messages_tokens(request.messages) + int(self.zoo.tokens_in_extra[i]),
            tokens_out=tokens_out,
            latency_s=round(0.2 + 0.01 * tokens_out, 4),
        )
