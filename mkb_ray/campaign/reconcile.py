"""Reconciling a campaign's plan with its run store: which planned trials are new, done, still to run or stale,
and resetting the stale ones the caller chooses together with the finished trials that read their SKILL.md.

Every input is explicit: `record_plan` returns a `PlanSync` that carries the plan's version of each stale trial and
the plan's trial ids, and `rerun_stale` / `finished_dependants` take that sync — nothing is remembered between
calls, and a reset checks the store's rows (a trial reset already is no longer stale). The store only persists
(`RunStore.plan_states`, `write_plan`, `skill_links`, `trials_by_id`, `reset_trials`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from ..records import Trial, downstream
from ..store import TERMINAL_STATUSES, NewEvent, PlanRow, PlanState, RunStore, StoreError, TrialRow


@dataclass(frozen=True)
class PlanSync:
    """How a plan compares with what the store holds (`record_plan`'s answer). All ids in plan order.

    new_ids:       planned now, not stored before (inserted as 'planned').
    done_ids:      stored with a terminal status and the same hashes: nothing to run.
    pending_ids:   stored, not done yet (includes refreshed_ids): still to run.
    refreshed_ids: not done yet and their hashes changed: the stored row was updated (nothing was lost).
    stale_ids:     done, but their config_hash / problem_hash / template_hash differ from the plan's: NOT
                   overwritten; `rerun_stale` resets them to the new plan (and their finished dependants), or the
                   caller keeps them.
    unplanned_ids: stored but absent from this plan (left untouched), in their stored plan order.
    stale_trials:  the plan's version of each stale trial (what `rerun_stale` resets it to), by id.
    planned_ids:   every trial id of the plan.
    """

    new_ids: tuple[str, ...]
    done_ids: tuple[str, ...]
    pending_ids: tuple[str, ...]
    refreshed_ids: tuple[str, ...]
    stale_ids: tuple[str, ...]
    unplanned_ids: tuple[str, ...]
    stale_trials: Mapping[str, Trial]
    planned_ids: frozenset[str]


@dataclass(frozen=True)
class StaleReset:
    """What `rerun_stale` reset to 'planned'.

    stale_ids:     the stale trials asked for, in the order given; they now carry the plan's new hashes.
    dependant_ids: finished trials of the plan downstream of them through `skill_from` (they read a SKILL.md that
                   the rerun supersedes), not among stale_ids, in plan order; they keep their own hashes.
    """

    stale_ids: tuple[str, ...]
    dependant_ids: tuple[str, ...]


def _hashes(item: Trial | TrialRow | PlanState) -> tuple[str, str, str]:
    return item.config_hash, item.problem_hash, item.template_hash


def _still_stale(row: TrialRow | None, trial: Trial | None) -> bool:
    """The stored trial is done with other hashes than the plan's."""
    return row is not None and trial is not None and row.done and _hashes(row) != _hashes(trial)


@dataclass(frozen=True)
class Reconciliation:
    """A plan synced with its store, as `mkb run` reports it (`reconcile`'s answer).

    reset:          with a rerun of stale trials asked for, what was reset; else None.
    hanging:        without it, the finished dependants of the stale trials, kept as they are.
    already_stored: trials of the plan done and current in the store.
    pending:        trials of the plan to run now.
    """

    sync: PlanSync
    reset: Optional[StaleReset]
    hanging: tuple[str, ...]
    already_stored: int
    pending: int


def reconcile(store: RunStore, trials: Sequence[Trial], rerun_stale_trials: bool) -> Reconciliation:
    """`record_plan`, then either `rerun_stale` of every stale trial (`rerun_stale_trials`) or a count of the
    finished dependants left hanging off them."""
    sync = record_plan(store, trials)
    already_stored = len(sync.done_ids)
    reset: Optional[StaleReset] = None
    hanging: tuple[str, ...] = ()
    if sync.stale_ids:
        if rerun_stale_trials:
            reset = rerun_stale(store, sync, sync.stale_ids)
            # Reset dependants were current (in done_ids) and are not any more.
            already_stored = len(set(sync.done_ids).difference(reset.dependant_ids))
        else:
            hanging = finished_dependants(store, sync, sync.stale_ids)
    pending = len(trials) - already_stored - (0 if rerun_stale_trials else len(sync.stale_ids))
    return Reconciliation(sync, reset, hanging, already_stored, pending)


def record_plan(store: RunStore, trials: Iterable[Trial]) -> PlanSync:
    """Insert the plan's new trials (as 'planned') and compare the rest with what is stored (see PlanSync).
    Stale done trials are reported, never overwritten: `rerun_stale` resets the ones the caller chooses (and
    their finished dependants)."""
    stored = store.plan_states()
    next_order = max((state.plan_order for state in stored.values()), default=-1) + 1
    new, done, pending, refreshed, stale = [], [], [], [], []
    inserts: list[PlanRow] = []
    refreshes: list[PlanRow] = []
    stale_trials: dict[str, Trial] = {}
    seen: set[str] = set()
    for trial in trials:
        tid = trial.trial_id
        if tid in seen:
            raise StoreError(f"trial {tid!r} appears twice in the plan")
        seen.add(tid)
        old = stored.get(tid)
        if old is None:
            inserts.append(PlanRow.of(trial, next_order))
            next_order += 1
            new.append(tid)
            continue
        same = _hashes(old) == _hashes(trial)
        if old.status in TERMINAL_STATUSES:
            if same:
                done.append(tid)
            else:
                stale.append(tid)
                stale_trials[tid] = trial
        else:
            pending.append(tid)
            if not same:
                refreshed.append(tid)
                refreshes.append(PlanRow.of(trial, old.plan_order))
    unplanned = tuple(sorted((tid for tid in stored if tid not in seen), key=lambda t: stored[t].plan_order))
    store.write_plan(inserts, refreshes)
    return PlanSync(tuple(new), tuple(done), tuple(pending), tuple(refreshed), tuple(stale), unplanned,
                    stale_trials, frozenset(seen))


def finished_dependants(store: RunStore, sync: PlanSync, ids: Iterable[str]) -> tuple[str, ...]:
    """The trials `rerun_stale(store, sync, ids)` would reset besides `ids`, in plan order: those of the synced
    plan downstream of `ids` through `skill_from` that are finished (a terminal status). Still-planned dependants
    need nothing: they will read the rerun's SKILL.md. Stored trials absent from the plan are left alone, as
    record_plan leaves them: reset, they would never run again."""
    return tuple(_finished_dependants(store, sync, list(dict.fromkeys(ids))))


def _finished_dependants(store: RunStore, sync: PlanSync, ids: list[str]) -> dict[str, str]:
    """finished_dependants(ids), each mapped to its nearest source among `ids`."""
    starts = set(ids)
    links = store.skill_links()
    source_of = {link.trial_id: link.skill_from for link in links if link.skill_from is not None}
    below = downstream(((source, tid) for tid, source in source_of.items()), ids)
    nearest: dict[str, str] = {}
    for tid, _, status in links:
        if tid in below and status in TERMINAL_STATUSES and tid in sync.planned_ids:
            # Each trial has at most one skill_from, so walking up from a trial below `ids` reaches one of them.
            source = source_of[tid]
            while source not in starts:
                source = source_of[source]
            nearest[tid] = source
    return nearest


def rerun_stale(store: RunStore, sync: PlanSync, ids: Iterable[str]) -> StaleReset:
    """Reset trials that `sync` reported stale, and that are still stale in the store, to 'planned' with the
    plan's new hashes, and with them their finished dependants (see `finished_dependants`): a dependant was
    conditioned on a SKILL.md the rerun replaces. Every reset trial loses its submission/usage/skill/artifact rows
    (the artifact files are kept) and gets an event: `rerun_stale` with the old and new hashes, or
    `rerun_dependant` naming its nearest stale source (`stale_source`) and the SKILL.md it superseded
    (`superseded_skill_sha`, the source's old skill_sha). Dependants keep their own hashes, unless they are
    still stale against the plan too.

    One store transaction for both: were the dependants reset after the stale trials, a crash in between would
    leave them done with no stale trial left to find them by."""
    ids = list(dict.fromkeys(ids))
    stored = store.trials_by_id(ids)
    for tid in ids:
        if not _still_stale(stored.get(tid), sync.stale_trials.get(tid)):
            raise StoreError(f"trial {tid!r} is not stale: record_plan did not report it so, or it was reset "
                             "since")
    if not ids:
        return StaleReset((), ())
    sources = _finished_dependants(store, sync, ids)
    reset = ids + list(sources)
    old = {**stored, **store.trials_by_id(sources)}
    # A dependant stale too but not asked for: it is planned again, so it takes the plan's hashes now.
    replanned = [t for t in reset if _still_stale(old[t], sync.stale_trials.get(t))]
    events = [NewEvent("rerun_stale", tid, {
        "old_status": old[tid].status, "old_record_sha": old[tid].record_sha,
        "old_hashes": dict(zip(("config", "problem", "template"), _hashes(old[tid]))),
        "new_hashes": dict(zip(("config", "problem", "template"), _hashes(sync.stale_trials[tid])))})
        for tid in ids]
    events += [NewEvent("rerun_dependant", tid, {
        "stale_source": source, "superseded_skill_sha": old[source].skill_sha, "old_status": old[tid].status,
        "old_record_sha": old[tid].record_sha}) for tid, source in sources.items()]
    store.reset_trials(reset, [PlanRow.of(sync.stale_trials[t], old[t].plan_order) for t in replanned], events)
    return StaleReset(tuple(ids), tuple(sources))
