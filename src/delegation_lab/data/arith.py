"""`arith`: a deterministic generator of GSM8K-like multi-step word problems.

Each problem follows one everyday setting (shopping, travel, cooking, ...): a starting quantity,
then `difficulty` arithmetic steps told as events, then a question. Every item carries its step
program (JSON), so a simulated solver can err at a real step and produce a real wrong value.
All intermediate values are non-negative integers and every division is exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from delegation_lab.data.items import Item, SplitError, make_item_id, take_splits
from delegation_lab.data.params import ArithParams, DataParams

NAMES = [
    "Maria", "James", "Aisha", "Chen", "Lucas", "Priya", "Tom", "Fatima", "Diego", "Hana",
    "Olga", "Kwame", "Sofia", "Ravi", "Emma", "Yusuf", "Lena", "Mateo", "Grace", "Noah",
]


@dataclass(frozen=True)
class Template:
    setting: str
    start: str  # uses {name} and {x}
    add: tuple[str, ...]  # uses {name} and {n}
    sub: tuple[str, ...]
    mul: tuple[str, ...]
    div: tuple[str, ...]
    question: str


TEMPLATES: tuple[Template, ...] = (
    Template("shopping", "{name} has ${x} on a gift card.",
             ("{name} adds ${n} to the card.", "A friend tops the card up with ${n}."),
             ("{name} spends ${n} on a pair of sneakers.", "A ${n} charge for groceries comes off the card."),
             ("A promotion multiplies the card balance by {n}.", "The store runs a deal that makes the balance {n} times as large."),
             ("{name} splits the balance evenly among {n} cards and keeps just one of them.",),
             "How many dollars are on {name}'s card now?"),
    Template("travel", "{name}'s road trip starts with {x} kilometres already on the trip meter.",
             ("{name} drives another {n} kilometres before lunch.", "A detour adds {n} kilometres."),
             ("{name} resets part of the meter, taking off {n} kilometres.", "A shortcut saves {n} kilometres from the count."),
             ("The return leg makes the distance {n} times as long.", "Repeating the route {n} times in all multiplies the distance by {n}."),
             ("The distance is shared equally among {n} drivers and {name} logs one share.",),
             "How many kilometres are on {name}'s trip meter at the end?"),
    Template("cooking", "{name} starts with {x} grams of flour in the pantry.",
             ("{name} buys a bag holding {n} more grams.", "A neighbour brings over {n} grams."),
             ("{name} uses {n} grams for a loaf of bread.", "{n} grams go into pancakes."),
             ("{name} scales the stock up by a factor of {n} for a bakery order.", "A bulk delivery makes the supply {n} times larger."),
             ("{name} divides the flour into {n} equal jars and keeps one jar.",),
             "How many grams of flour does {name} have left?"),
    Template("work hours", "{name} has logged {x} hours at the cafe this month.",
             ("{name} works an extra {n} hours over the weekend.", "A double shift adds {n} hours."),
             ("{n} hours are moved to a colleague's sheet.", "{name} takes {n} hours off as leave."),
             ("Overtime rules count each hour {n} times.", "The payroll system multiplies the logged hours by {n}."),
             ("The hours are spread evenly over {n} pay periods; count one period.",),
             "How many hours are on {name}'s timesheet for that period?"),
    Template("garden", "{name} plants {x} tulip bulbs.",
             ("{name} plants {n} more bulbs along the fence.", "A neighbour gives {name} {n} extra bulbs to plant."),
             ("Squirrels dig up {n} bulbs.", "{name} gives away {n} bulbs."),
             ("Each bulb splits into {n} bulbs over the season.", "The bed multiplies {n}-fold by spring."),
             ("{name} shares the bulbs equally among {n} garden beds and counts one bed.",),
             "How many bulbs are in {name}'s count now?"),
    Template("library", "A school library holds {x} picture books.",
             ("The library receives a donation of {n} books.", "{name} catalogues {n} newly bought books."),
             ("{n} books are lost or damaged.", "{name} removes {n} worn-out books."),
             ("A grant lets the library grow its collection {n}-fold.", "The collection becomes {n} times its size after a merger."),
             ("The books are shared equally between {n} classrooms and {name} counts one classroom's share.",),
             "How many picture books does {name} count?"),
    Template("savings", "{name} has saved ${x}.",
             ("{name} earns ${n} from babysitting.", "A birthday gift adds ${n}."),
             ("{name} pays ${n} for a concert ticket.", "{name} lends ${n} to a cousin."),
             ("An investment multiplies the savings by {n}.", "{name}'s parents match the savings so they become {n} times as much."),
             ("{name} divides the savings equally into {n} envelopes and keeps one envelope.",),
             "How many dollars does {name} end up with?"),
    Template("bakery", "A bakery bakes {x} muffins in the morning.",
             ("The bakers make {n} more muffins at noon.", "{name} bakes an extra batch of {n} muffins."),
             ("Customers buy {n} muffins.", "{n} muffins are set aside for staff."),
             ("An event order multiplies production by {n}.", "For a festival the bakery makes {n} times as many."),
             ("{name} packs the muffins equally into {n} crates and counts one crate.",),
             "How many muffins does {name} count?"),
    Template("farm", "{name}'s farm has {x} chickens.",
             ("{name} buys {n} more chickens.", "{n} chicks hatch."),
             ("{name} sells {n} chickens at the market.", "A fox takes {n} chickens."),
             ("The flock grows to {n} times its size over a year.", "Breeding multiplies the flock by {n}."),
             ("{name} divides the flock evenly among {n} coops and counts one coop.",),
             "How many chickens does {name} count?"),
    Template("school supplies", "{name} has {x} pencils.",
             ("{name} buys a pack of {n} pencils.", "A teacher hands {name} {n} pencils."),
             ("{name} gives {n} pencils to classmates.", "{n} pencils break."),
             ("A bulk order makes the pencil count {n} times as large.", "{name} multiplies the stock by {n} for the art fair."),
             ("{name} shares the pencils equally among {n} desks and counts one desk.",),
             "How many pencils does {name} count?"),
    Template("fitness", "{name} has run {x} laps this week.",
             ("{name} runs {n} more laps on Friday.", "A training session adds {n} laps."),
             ("A coach discounts {n} laps done too slowly.", "{n} laps are removed for cutting corners."),
             ("Race-day scoring multiplies the laps by {n}.", "The challenge counts each lap {n} times."),
             ("The laps are averaged over {n} equal sessions; count one session.",),
             "How many laps does {name} have in the final count?"),
    Template("party", "{name} blows up {x} balloons for a party.",
             ("{name} blows up {n} more balloons.", "Friends bring {n} balloons."),
             ("{n} balloons pop.", "{name} gives {n} balloons to the neighbours' kids."),
             ("A helium machine lets {name} make {n} times as many.", "The order is scaled up {n}-fold."),
             ("{name} ties the balloons into {n} equal bunches and counts one bunch.",),
             "How many balloons does {name} count?"),
    Template("fuel", "{name}'s tank holds {x} litres of fuel.",
             ("{name} fills up {n} more litres.", "A jerrycan adds {n} litres."),
             ("The drive burns {n} litres.", "{name} siphons {n} litres for the mower."),
             ("A fleet of identical cars holds {n} times this amount.", "Counting the whole convoy multiplies the fuel by {n}."),
             ("The fuel is shared evenly among {n} vehicles and {name} counts one.",),
             "How many litres does {name} count?"),
    Template("recipe", "A recipe calls for {x} grams of sugar.",
             ("{name} adds {n} grams for extra sweetness.", "The frosting needs {n} more grams."),
             ("{name} cuts {n} grams to make it healthier.", "{n} grams are spilled."),
             ("{name} multiplies the recipe by {n} for a crowd.", "The recipe is made {n} times over."),
             ("{name} divides the sugar equally into {n} bowls and weighs one bowl.",),
             "How many grams of sugar does {name} weigh?"),
    Template("reading", "{name} has read {x} pages of a novel.",
             ("{name} reads {n} more pages on the train.", "A quiet evening adds {n} pages."),
             ("{name} rereads and discounts {n} pages.", "{n} pages turn out to be the appendix and do not count."),
             ("Across the book club everyone has read {n} times as many.", "The club's total is {n} times {name}'s count."),
             ("The pages are split evenly among {n} reading days; count one day.",),
             "How many pages is the final count?"),
    Template("construction", "A crew lays {x} bricks on Monday.",
             ("They lay {n} more bricks on Tuesday.", "{name} lays an extra {n} bricks."),
             ("{n} bricks have to be removed.", "An inspector rejects {n} bricks."),
             ("A second site needs {n} times as many bricks.", "The plan is scaled up {n}-fold."),
             ("The bricks are split equally over {n} walls and {name} counts one wall.",),
             "How many bricks does {name} count?"),
    Template("streaming", "{name}'s video has {x} views.",
             ("It gets {n} more views overnight.", "A share by a friend brings {n} views."),
             ("{n} views are removed as bots.", "The platform subtracts {n} duplicate views."),
             ("Going viral multiplies the views by {n}.", "A repost makes the count {n} times larger."),
             ("The views are split evenly over {n} days; count one day.",),
             "How many views are in the final count?"),
    Template("pets", "An animal shelter has {x} kittens.",
             ("{n} more kittens arrive.", "{name} rescues {n} kittens."),
             ("{n} kittens are adopted.", "{name} fosters {n} kittens at home."),
             ("The number of meals needed is {n} per kitten.", "Each kitten needs {n} vaccine doses, counted one by one."),
             ("The count is split evenly among {n} rooms and {name} counts one room.",),
             "What number does {name} end up with?"),
    Template("commute", "{name}'s commute takes {x} minutes.",
             ("Roadworks add {n} minutes.", "A stop for coffee adds {n} minutes."),
             ("A new bus lane saves {n} minutes.", "{name} leaves early and saves {n} minutes."),
             ("Over {n} days the total time is {n} times as long.", "{name} counts the commute for {n} trips, multiplying the time by {n}."),
             ("The time is split evenly over {n} legs; count one leg.",),
             "How many minutes is the final figure?"),
    Template("orchard", "{name} picks {x} apples.",
             ("{name} picks {n} more apples.", "A sibling adds {n} apples to the basket."),
             ("{n} apples are bruised and thrown away.", "{name} eats {n} apples."),
             ("A cider order needs {n} times as many apples.", "The harvest across the orchard is {n} times bigger."),
             ("{name} packs the apples equally into {n} boxes and counts one box.",),
             "How many apples does {name} count?"),
    Template("concert", "A concert hall sells {x} tickets on the first day.",
             ("{n} more tickets sell on the second day.", "{name} buys {n} tickets for the office."),
             ("{n} tickets are refunded.", "{n} tickets are cancelled."),
             ("A tour repeats the show, multiplying ticket sales by {n}.", "Demand grows {n}-fold."),
             ("The tickets are split evenly among {n} sections and {name} counts one section.",),
             "How many tickets does {name} count?"),
    Template("water", "A rain barrel holds {x} litres of water.",
             ("A storm adds {n} litres.", "{name} pours in {n} litres."),
             ("{name} uses {n} litres on the vegetables.", "{n} litres evaporate."),
             ("A bigger barrel holds {n} times as much.", "Linking barrels multiplies the store by {n}."),
             ("The water is split evenly into {n} cans and {name} measures one can.",),
             "How many litres does {name} measure?"),
)

OPS = ("add", "sub", "mul", "div")
MAX_VALUE = 100_000


def _step(rng: np.random.Generator, value: int) -> tuple[str, int, int]:
    """One arithmetic step on a non-negative integer; returns (op, argument, result)."""
    for _ in range(20):
        op = OPS[rng.choice(4, p=[0.35, 0.3, 0.2, 0.15])]
        if op == "add":
            n = int(rng.integers(2, 41))
            return op, n, value + n
        if op == "sub" and value > 2:
            n = int(rng.integers(1, min(value, 40) + 1))
            if n < value:
                return op, n, value - n
        if op == "mul" and 0 < value * 5 <= MAX_VALUE:
            n = int(rng.integers(2, 6))
            return op, n, value * n
        if op == "div" and value > 0:
            divisors = [k for k in range(2, 10) if value % k == 0]
            if divisors:
                n = int(divisors[int(rng.integers(len(divisors)))])
                return op, n, value // n
    n = int(rng.integers(2, 41))
    return "add", n, value + n


def apply_step(op: str, value: float, arg: float) -> float:
    if op == "add":
        return value + arg
    if op == "sub":
        return value - arg
    if op == "mul":
        return value * arg
    if op == "div":
        return value / arg
    raise ValueError(f"unknown op {op!r}")


def _difficulty(
    params: ArithParams, steps_range: np.ndarray, weights: np.ndarray, seed: int, k: int, rng: np.random.Generator
) -> int:
    """Uniform weights: each block of len(steps_range) consecutive items holds every step count once,
    in a seeded order, so any large enough split has a balanced difficulty mix. Else a weighted draw."""
    if params.step_weights is None:
        n = len(steps_range)
        block_order = np.random.default_rng([seed, k // n, 7]).permutation(n)
        return int(steps_range[block_order[k % n]])
    return int(rng.choice(steps_range, p=weights))


def generate(params: ArithParams, n: int, seed: int, offset: int = 0) -> list[Item]:
    """`n` items; item k depends only on (seed, offset + k), so sizes can grow without reshuffling."""
    steps_range = np.arange(params.min_steps, params.max_steps + 1)
    weights = np.array(params.step_weights or [1.0] * len(steps_range), dtype=float)
    weights = weights / weights.sum()
    items = []
    for k in range(offset, offset + n):
        rng = np.random.default_rng([seed, k])
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        name = NAMES[int(rng.integers(len(NAMES)))]
        difficulty = _difficulty(params, steps_range, weights, seed, k, rng)
        value = int(rng.integers(5, 61))
        program: list[dict] = [{"op": "start", "value": value}]
        sentences = [template.start.format(name=name, x=value)]
        for _ in range(difficulty):
            op, arg, value = _step(rng, value)
            phrasings = getattr(template, op)
            sentences.append(phrasings[int(rng.integers(len(phrasings)))].format(name=name, n=arg))
            program.append({"op": op, "arg": arg, "result": value})
        sentences.append(template.question.format(name=name))
        source_id = f"{seed}-{k}"
        items.append(
            Item(
                item_id=make_item_id("arith", source_id),
                split="",
                question=" ".join(sentences),
                gold=str(value),
                difficulty=difficulty,
                domain=template.setting,
                source="arith",
                source_id=source_id,
                program=json.dumps(program),
            )
        )
    return items


def arith_items(params: DataParams) -> list[Item]:
    """`data.dataset: arith`: a generated pool for ability + train and a disjoint generated test set."""
    if params.train_size is None or params.test_size is None:
        raise SplitError("arith generates items, so data.train_size and data.test_size must be numbers")
    pool = generate(params.arith, params.ability_size + params.train_size, params.seed)
    test = generate(params.arith, params.test_size, params.seed, offset=10_000_000)
    return take_splits(pool, test, source="arith", **params.split_sizes())
