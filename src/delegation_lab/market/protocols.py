"""The three auction protocols of seed 004 §3.4, cleared for a whole batch of auctions at once.

Every auction has a buyer (the highest bidder, who wins the right to act) and a seller (the agent
that holds the state, or the consumer who posted the task). With b1 >= b2 the two highest bids
(b2 = 0, the floor, when there is a single bidder):

| protocol | buyer pays | seller receives | platform subsidy |
|---|---|---|---|
| first_price (bucket brigade) | b1 | gamma b1 | gamma b1 - b1 (0 at gamma = 1) |
| second_price (Vickrey) | b2 | gamma b1 | gamma b1 - b2 (>= 0 at gamma = 1) |
| ccv (credit-conserving Vickrey) | b2 | gamma b2 | gamma b2 - b2 (0 at gamma = 1) |

so that in every auction: money in (seller) = money out (buyer) + subsidy. A negative subsidy is
money the platform keeps (the discount). An auction without bidders clears nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FIRST_PRICE, SECOND_PRICE, CCV = 0, 1, 2
PROTOCOL_CODES = {"first_price": FIRST_PRICE, "second_price": SECOND_PRICE, "ccv": CCV}


@dataclass
class Clearing:
    """The outcome of a batch of auctions (leading dims of the bids tensor, agents last)."""

    winner: torch.Tensor  # long, -1 when nobody bid
    sold: torch.Tensor  # bool
    b1: torch.Tensor  # highest bid (0 when unsold)
    b2: torch.Tensor  # second-highest bid (0 when fewer than two bidders)
    buyer_pays: torch.Tensor
    seller_gets: torch.Tensor
    subsidy: torch.Tensor


def clear(bids: torch.Tensor, bidding: torch.Tensor, protocol: torch.Tensor, gamma: float, tie_break: torch.Tensor | None = None) -> Clearing:
    """Clear auctions. bids, bidding: [..., A]; protocol: protocol codes broadcastable to bids[..., 0].

    Ties go to the agent with the largest `tie_break` key (uniform noise; None = lowest index).
    """
    neg_inf = torch.tensor(float("-inf"), dtype=bids.dtype, device=bids.device)
    masked = torch.where(bidding, bids, neg_inf)
    b1 = masked.max(dim=-1).values
    if tie_break is None:  # prefer the lowest index among equal bids
        tie_break = -torch.arange(bids.shape[-1], dtype=bids.dtype, device=bids.device).expand_as(bids)
    key = torch.where(bidding & (masked == b1.unsqueeze(-1)), tie_break, neg_inf)
    winner = key.argmax(dim=-1)
    second = masked.scatter(-1, winner.unsqueeze(-1), float("-inf")).max(dim=-1).values
    sold = torch.isfinite(b1)
    zero = torch.zeros_like(b1)
    b1 = torch.where(sold, b1, zero)
    b2 = torch.where(torch.isfinite(second), second, zero)
    protocol = protocol.expand_as(b1) if protocol.dim() else torch.full_like(winner, int(protocol))
    buyer_pays = torch.where(protocol == FIRST_PRICE, b1, b2)
    seller_price = torch.where(protocol == CCV, b2, b1)
    seller_gets = gamma * seller_price
    subsidy = seller_gets - buyer_pays
    winner = torch.where(sold, winner, torch.full_like(winner, -1))
    return Clearing(winner, sold, b1, b2, buyer_pays, seller_gets, subsidy)


def clear_reference(bids: list[float], protocol: str, gamma: float) -> tuple[int, float, float, float]:
    """One auction in plain Python (the specification the batched `clear` is tested against):
    (winner or -1, buyer pays, seller gets, subsidy) for the bids of the agents that bid."""
    if not bids:
        return -1, 0.0, 0.0, 0.0
    order = sorted(range(len(bids)), key=lambda i: (-bids[i], i))
    b1 = bids[order[0]]
    b2 = bids[order[1]] if len(bids) > 1 else 0.0
    pays = b1 if protocol == "first_price" else b2
    gets = gamma * (b2 if protocol == "ccv" else b1)
    return order[0], pays, gets, gets - pays
