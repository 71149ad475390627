"""Demands for models with several layer groups (full attention, sliding window, recurrent state).

An engine adapter knows, per group, which block positions it can take restored pages into; the Manager knows which
pages exist. The Manager answers only a legal boundary (every group's required state present and inside the declared
positions, engine.proto ``Demand``), so an adapter declares exactly the positions its engine can receive and copies
each leased page by its ``(group_id, position)``, never by its order in the lease.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from orbitkv._proto import engine_pb2 as pb


def spans(positions: Iterable[int]) -> list[pb.BlockSpan]:
    """Ascending, disjoint spans covering exactly ``positions`` (duplicates ignored)."""
    result: list[pb.BlockSpan] = []
    for position in sorted(set(positions)):
        if result and result[-1].end == position:
            result[-1].end = position + 1
        else:
            result.append(pb.BlockSpan(start=position, end=position + 1))
    return result


def group_demand(session, request_id: str, block_hashes: Sequence[bytes], *, start_block: int, end_block: int,
                 selected_group: int, positions: Mapping[int, Iterable[int]],
                 max_wait_micros: Optional[int] = None) -> pb.Demand:
    """A demand for blocks up to ``end_block`` of every registered group: ``block_hashes`` (from block 0) is the
    selected group's chain, the other groups name the same token content under their own group id; ``positions``
    gives, per group id, the block positions in ``[start_block, end_block)`` the engine can take restored pages into.
    Blocks below ``start_block`` are already in the engine (the valid prefix)."""
    page = session.identity.page_size_tokens
    groups = []
    for group_id in sorted(positions):
        wanted = [p for p in positions[group_id] if start_block <= p < end_block]
        groups.append(pb.GroupDemand(group_id=group_id,
                                     block_hashes=list(block_hashes[:end_block]) if group_id == selected_group else [],
                                     ranges=spans(wanted)))
    demand = pb.Demand(request_id=request_id, namespace_id=session.namespace, page_size_tokens=page,
                       valid_prefix_tokens=start_block * page, selected_end_tokens=end_block * page,
                       selected_group_id=selected_group, groups=groups, target_instance_id=session.instance_id,
                       target_tp_rank=session.identity.tp_rank, target_pp_rank=session.identity.pp_rank)
    if max_wait_micros is not None:
        demand.max_wait_micros = max_wait_micros
    return demand
