"""Reads of failures and groups, shared by the API and the pages."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple, TypedDict, TypeVar

from django.db import connection, connections, router
from django.db.models import (
    Count,
    Exists,
    F,
    Field,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.utils import timezone
from django.utils.translation import get_language, gettext, gettext_lazy

from core.http import strong_etag
from core.side_reads import SideRead, read_beside
from organisation.access import is_admin, seen_by
from organisation.models import Team
from triage.models import (
    UNCERTAIN_STATES,
    FailureGroup,
    FailureGroupBucket,
    FailureGroupDay,
    FailureGroupFacet,
    FailureReasonBucket,
    FailureRecord,
    Receipt,
    Reconciliation,
    RejectionCount,
    Release,
    Runbook,
    RunbookRevision,
    RunbookSubject,
    ToolPolicy,
)
from triage.timebins import day_floor, hour_floor
from triage.vocabulary import taxonomy


class FailureFilters(TypedDict, total=False):
    collection: str
    stage: str
    reason: str
    tool: str
    lane: str
    execution_state: str
    source: str
    status: str
    group: int
    since: datetime
    until: datetime


def failures_list(*, filters: FailureFilters, user: Any = None) -> QuerySet[FailureRecord]:
    records = FailureRecord.objects.filter(seen_by(user))
    for name in ("collection", "stage", "reason", "tool", "lane", "execution_state", "source"):
        if name in filters:
            records = records.filter(**{name: filters[name]})
    if "group" in filters:
        records = records.filter(group_id=filters["group"])
    if "status" in filters:
        records = records.filter(group__status=filters["status"])
    if "since" in filters:
        records = records.filter(occurred_at__gte=filters["since"])
    if "until" in filters:
        records = records.filter(occurred_at__lt=filters["until"])
    return records.order_by("-occurred_at", "-id")


def groups_list(*, filters: FailureFilters, user: Any = None) -> QuerySet[FailureGroup]:
    groups = FailureGroup.objects.filter(seen_by(user))
    for name in ("collection", "stage", "reason", "tool", "lane", "status"):
        if name in filters:
            groups = groups.filter(**{name: filters[name]})
    for dimension in ("source", "execution_state"):
        if dimension in filters:
            groups = groups.filter(_having_facet(dimension, filters[dimension]))
    if "since" in filters:
        groups = groups.filter(last_seen__gte=filters["since"])
    if "until" in filters:
        groups = groups.filter(first_seen__lt=filters["until"])
    return groups.order_by("-last_seen", "-id")


def unmapped_reasons(*, user: Any = None) -> list[dict[str, Any]]:
    """Reasons the taxonomy does not know yet, with how often they were seen."""
    return list(
        FailureGroup.objects.filter(seen_by(user), reason_mapped=False)
        .values("stage", "reason")
        .annotate(groups=Count("id"))
        .order_by("stage", "reason")
    )


def desk_wide_seen_by(user: Any) -> Q:
    """The desk-wide figures no collection carries (rejections per code, retention runs)
    are admins', and everyone's while no team exists: a condition of their read, no query
    of its own. ``None`` is the desk reading for itself."""
    if user is None or is_admin(user):
        return Q()
    return ~Q(Exists(Team.objects.all()))


def rejections_by_code(*, user: Any = None) -> list[RejectionCount]:
    """Rejected items per code, most frequent first, since the beginning."""
    return list(RejectionCount.objects.filter(desk_wide_seen_by(user), count__gt=0))


# --- the triage page ------------------------------------------------------------------------

_STATUS_URGENCY = ["regressed", "open", "acknowledged", "muted", "resolved"]


class GroupSummary(NamedTuple):
    """What the triage page shows of a group: read as a plain row, not a model instance,
    because a busy fleet has thousands of groups in a day's window."""

    pk: int
    collection: str
    stage: str
    reason: str
    tool: str
    lane: str
    status: str
    first_seen: datetime
    last_seen: datetime
    # When a mute ends, by time or after so many new records (a muted group's list row says).
    muted_until: datetime | None
    mute_remaining_count: int | None
    records: int
    retryable_records: int
    assignee: str | None


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a page
# makes thousands of these.
@dataclass(slots=True)
class GroupRow:
    group: GroupSummary
    window_count: int
    previous_count: int = 0

    # What the sorts read, named as on a reason row (the group view sorts the same way).
    @property
    def count(self) -> int:
        return self.window_count

    @property
    def trend(self) -> float:
        return (self.window_count + 1) / (self.previous_count + 1)

    @property
    def stage(self) -> str:
        return self.group.stage

    @property
    def reason(self) -> str:
        return self.group.reason

    @property
    def first_seen(self) -> datetime:
        return self.group.first_seen

    @property
    def last_seen(self) -> datetime:
        return self.group.last_seen


@dataclass
class ReasonRow:
    """One (stage, reason) line of the triage page. Its groups are added largest first, and
    what the line shows of them is tallied as each is added: one pass over a busy fleet's
    thousands of groups, instead of one pass per figure."""

    stage: str
    reason: str
    info: taxonomy.ReasonInfo | None
    # The earliest first record and the latest last record of its groups (tallied by add(),
    # from those of the first group).
    first_seen: datetime
    last_seen: datetime
    # Largest first in the window (triage_overview adds them in that order).
    groups: list[GroupRow] = field(default_factory=list)
    spark: list[int] = field(default_factory=list)
    state_mix: dict[str, int] = field(default_factory=dict)
    source_mix: dict[str, int] = field(default_factory=dict)
    # Set by triage_overview, which knows the window.
    new: bool = False
    spiking: bool = False
    # Groups of the row first seen in the window (a new group of an old reason).
    new_groups: int = 0
    # Tallied by add(): records in the window and in the window of the same length just
    # before it; the groups' records of all time and the retryable ones; records in the
    # window in groups whose lane allows a retry.
    count: int = 0
    previous_count: int = 0
    records: int = 0
    retryable_records: int = 0
    retry_safe_count: int = 0
    tool_counts: dict[str, int] = field(default_factory=dict, repr=False)
    lane_counts: dict[str, int] = field(default_factory=dict, repr=False)
    collection_names: set[str] = field(default_factory=set, repr=False)
    statuses: set[str] = field(default_factory=set, repr=False)
    assignee_names: set[str] = field(default_factory=set, repr=False)

    def mix(self, dimension: str) -> dict[str, int]:
        """The row's records of all time by execution state or by source."""
        return self.state_mix if dimension == "execution_state" else self.source_mix

    def add(self, row: GroupRow) -> None:
        group, count = row.group, row.window_count
        self.groups.append(row)
        if group.first_seen < self.first_seen:
            self.first_seen = group.first_seen
        if group.last_seen > self.last_seen:
            self.last_seen = group.last_seen
        self.count += count
        self.previous_count += row.previous_count
        self.records += group.records
        self.retryable_records += group.retryable_records
        tool = group.tool or gettext("(no tool)")
        self.tool_counts[tool] = self.tool_counts.get(tool, 0) + count
        self.lane_counts[group.lane] = self.lane_counts.get(group.lane, 0) + count
        if group.lane == "retry_safe":
            self.retry_safe_count += count
        self.collection_names.add(group.collection or gettext("(none)"))
        self.statuses.add(group.status)
        if group.assignee:
            self.assignee_names.add(group.assignee)

    @property
    def trend(self) -> float:
        """How much the count grew against the previous window (1.0: the same)."""
        return (self.count + 1) / (self.previous_count + 1)

    @cached_property
    def tools(self) -> list[str]:
        """Most records in the window first; equal ones in the order of their largest group."""
        return _most_first(self.tool_counts)

    @cached_property
    def collections(self) -> list[str]:
        return sorted(self.collection_names)

    @cached_property
    def lanes(self) -> list[str]:
        return _most_first(self.lane_counts)

    @cached_property
    def status(self) -> str:
        return next(status for status in _STATUS_URGENCY if status in self.statuses)

    @property
    def retryable_share(self) -> float:
        return self.retryable_records / self.records if self.records else 0.0

    @property
    def retry_safe_share(self) -> float:
        """Of the window's records, the share in groups whose lane allows a retry."""
        return self.retry_safe_count / self.count if self.count else 0.0

    @cached_property
    def assignees(self) -> list[str]:
        return sorted(self.assignee_names)

    @property
    def top_group(self) -> GroupSummary:
        return self.groups[0].group


def _most_first(counts: dict[str, int]) -> list[str]:
    """The keys, largest count first; a stable sort keeps equal ones in the order they came."""
    return [key for key, _ in sorted(counts.items(), key=itemgetter(1), reverse=True)]


@dataclass
class StageSection:
    stage: str
    title: str
    known: bool
    rows: list[ReasonRow]
    # One list across stages (any sort but stage order): each row names its stage.
    flat: bool = False

    @property
    def count(self) -> int:
        return sum(row.count for row in self.rows)


@dataclass
class TriageOverview:
    sections: list[StageSection]
    group_ids: list[int]
    total: int
    open_groups: int
    regressed_groups: int
    uncertain_waiting: int
    spark_bins: int
    spark_hours: int
    spark_daily: bool
    spark_start: datetime
    # One row per group, largest first, and the page's sort; and where the window starts,
    # which tells a new group.
    groups_by_count: list[GroupRow] = field(default_factory=list)
    sort: str = "count"
    window_start: datetime | None = None

    @cached_property
    def groups(self) -> list[GroupRow]:
        """One row per group in the page's sort (the group view): sorted when read, since
        the reason view shows the groups through its rows."""
        return _in_order(self.groups_by_count, self.sort, by_count=False)

    @property
    def spark_unit(self) -> str:
        if self.spark_daily:
            return "day" if self.spark_bins * 24 == self.spark_hours else "bin"
        return "hour" if self.spark_bins == self.spark_hours else "bin"


def awaiting_reconciliation(*, user: Any = None) -> QuerySet[Receipt]:
    """Receipts whose outcome nobody knows yet: maybe done, maybe partly, maybe not at all."""
    return Receipt.objects.filter(seen_by(user), execution_state__in=UNCERTAIN_STATES).exclude(
        Exists(Reconciliation.objects.filter(receipt=OuterRef("pk")))
    )


def _having_facet(dimension: str, value: str, *, group: str = "pk") -> Exists:
    """Groups with records of this source, execution state or release (ingest's facet rows);
    `group` names the outer column holding the group's id."""
    return Exists(
        FailureGroupFacet.objects.filter(
            group=OuterRef(group), dimension=dimension, value=value, count__gt=0
        )
    )


# The triage page's default source: every source but Quality Lab's test runs.
PRODUCTION_SOURCES = "production"


def having_production_records(*, via: str = "") -> Q:
    """Groups with records from any source but Quality Lab (runtime traffic): more records
    than Quality Lab's, two counters of the group's row that ingest and retention keep as
    they keep its source facets. Testing the facets instead cost every read of the page a
    probe per group (at 1M records, about 5 ms of the 24-hour page's window statement).
    With `via="group__"`, rows that belong to such a group."""
    return Q(**{f"{via}count__gt": F(f"{via}quality_lab_count")})


def _triage_filter(
    filters: dict[str, str], *, via: str = "", by_facets: bool = True, user: Any = None
) -> Q:
    """The triage page's filters as a condition on groups or, with `via="group__"`, on
    rows that belong to a group (buckets, daily rollups, facets), joined once.
    ``by_facets=False`` leaves out the filters read from the groups' facets (source,
    execution state, release): more groups, for a read whose rows are kept afterwards by
    group, spared a second look through the facets. The collections ``user`` may see are
    one more condition of the same statement (see seen_by)."""
    condition = seen_by(user, f"{via}collection")
    status = filters.get("status", "active")
    if status == "active":
        condition &= Q(**{f"{via}status__in": ["open", "acknowledged", "regressed"]})
    elif status != "all":
        condition &= Q(**{f"{via}status": status})
    for name in ("collection", "tool", "lane", "stage", "reason"):
        if filters.get(name):
            condition &= Q(**{f"{via}{name}": filters[name]})
    outer = "group_id" if via else "pk"
    for dimension in ("source", "execution_state", "release") if by_facets else ():
        if filters.get(dimension) == PRODUCTION_SOURCES and dimension == "source":
            condition &= having_production_records(via=via)
        elif filters.get(dimension):
            condition &= Q(_having_facet(dimension, filters[dimension], group=outer))
    if filters.get("q"):
        text = filters["q"]
        matches = Q()
        for name in ("reason", "tool", "collection", "stage"):
            matches |= Q(**{f"{via}{name}__icontains": text})
        described = reasons_described_by(text)
        if described:
            matches |= Q(**{f"{via}reason__in": described})
        condition &= matches
    return condition


def reasons_described_by(text: str) -> list[str]:
    """The catalog's reasons whose meaning, advice or usual fix, or whose stage's title,
    contains ``text`` in English or in the reader's language: a reason typed in words (in
    Korean, say) finds its code. Read from the catalog in memory, never from the database."""
    needle = text.casefold().strip()
    if not needle:
        return []
    return [code for code, words in _reason_words().items() if needle in words]


def _reason_words() -> dict[str, str]:
    language = get_language() or ""
    words = _REASON_WORDS.get(language)
    if words is None:
        words = _REASON_WORDS[language] = {}
        for info in taxonomy.REASONS.values():
            stage = taxonomy.STAGE_INFO[info.stage].title
            texts = (info.meaning, info.triage_advice, info.usual_action, stage)
            words[info.code] = "\n".join([*texts, *(gettext(text) for text in texts)]).casefold()
    return words


# One index per language the pages are read in (two today): built on first use.
_REASON_WORDS: dict[str, dict[str, str]] = {}


@dataclass(frozen=True)
class _Edge:
    """A piece of an hour at one end of a window, counted from the records themselves and
    added to (sign 1) or taken from (sign -1) the hourly buckets read beside it."""

    start: datetime
    end: datetime
    sign: int


def _records_to_read(start: datetime, end: datetime, now: datetime) -> timedelta:
    """How much of the record timeline a piece covers: nothing is recorded after now
    (save a clock running ahead), so a piece in the future costs nothing to read."""
    return max(timedelta(0), min(end, now) - start)


# What reading one UTC day's rollups costs, in hours of hourly buckets: a day holds one
# row per group with records that day, about as many rows as two to four busy hours hold
# (at a million records a month, 2,655 groups a day against about 620 an hour).
DAY_READ_HOURS = 3


@dataclass(frozen=True)
class _WindowParts:
    """A window as whole hours plus exact edges. A window that starts or ends inside an
    hour (the last 60 minutes at 19:07 start at 18:07) counts that hour's piece from the
    records: either the piece inside the window is added, or the bucket is read whole and
    the piece outside it is taken away, whichever has fewer minutes of records to read. So
    counts are exact to the record, and at most half an hour of records is read at each
    edge.

    The whole hours are cut along UTC midnights, and each day is read the cheaper way
    (see _DayPart): a day the window covers whole from its daily rollups, a piece of a day
    from its hourly buckets, or from the day's rollups less the hours outside the window
    (a window of the last 24 hours at 08:00 is yesterday's rollups less its first 8 hours,
    and today's so far). A 30-day window reads about 30 rows per group instead of 720."""

    first_hour: datetime
    end_hour: datetime
    # Which side of a day costs less to read depends on what is recorded yet.
    now: datetime
    edges: tuple[_Edge, ...] = ()

    @classmethod
    def of(cls, start: datetime, end: datetime, *, now: datetime) -> _WindowParts:
        floor_start, floor_end = hour_floor(start), hour_floor(end)
        if floor_start == floor_end and start != floor_start:
            # Inside one hour: the records alone.
            return cls(floor_start, floor_start, now, (_Edge(start, end, 1),))
        edges: list[_Edge] = []
        first_hour = floor_start
        if start != floor_start:
            ceil_start = floor_start + timedelta(hours=1)
            inside = _records_to_read(start, ceil_start, now)
            if inside <= _records_to_read(floor_start, start, now):
                first_hour = ceil_start
                edges.append(_Edge(start, ceil_start, 1))
            else:
                edges.append(_Edge(floor_start, start, -1))
        end_hour = floor_end
        if end != floor_end:
            ceil_end = floor_end + timedelta(hours=1)
            if _records_to_read(floor_end, end, now) < _records_to_read(end, ceil_end, now):
                edges.append(_Edge(floor_end, end, 1))
            else:
                end_hour = ceil_end
                edges.append(_Edge(end, ceil_end, -1))
        return cls(first_hour, end_hour, now, tuple(edges))

    def days(self) -> list[_DayPart]:
        """The UTC days the whole hours touch, each with the part of it they cover."""
        parts: list[_DayPart] = []
        day = day_floor(self.first_hour)
        while day < self.end_hour:
            following = day + timedelta(days=1)
            parts.append(_DayPart(day, max(day, self.first_hour), min(following, self.end_hour)))
            day = following
        return parts

    def pieces(self) -> list[_Piece]:
        """What to read, each range on its own: hourly ranges, daily ranges and each edge's
        records, signed. One range is an index-only scan: two joined by OR made PostgreSQL
        fetch every bucket row from the table (12 ms against 4 ms for a 7-day window at a
        million records). Each edge is one range of occurred_at, which either index on the
        records answers by its range: edges joined by OR left the group index only the
        group to seek, and once PostgreSQL underestimated the matching groups (200 for
        2,605) it read every record of every group (150 ms of a 300 ms page)."""
        pieces: list[_Piece] = []
        for part in self.days():
            pieces += part.pieces(self.now)
        pieces += [_Piece(FailureRecord, edge.start, edge.end, edge.sign) for edge in self.edges]
        merged: list[_Piece] = []
        for piece in pieces:
            if piece.end <= piece.start:
                continue
            last = merged[-1] if merged else None
            if last and (last.model, last.sign, last.end) == (piece.model, piece.sign, piece.start):
                merged[-1] = _Piece(piece.model, last.start, piece.end, piece.sign)
            else:
                merged.append(piece)
        return merged


@dataclass(frozen=True)
class _DayPart:
    """The hours [start, end) a window covers of the UTC day that begins at ``day``."""

    day: datetime
    start: datetime
    end: datetime

    def pieces(self, now: datetime) -> list[_Piece]:
        """The day whole from its rollups, when the window covers it whole or when the hours
        it leaves out of the day (those with records yet: none after now) cost fewer than
        the hours it covers by DAY_READ_HOURS or more; else the covered hours' buckets."""
        following = self.day + timedelta(days=1)
        if (self.start, self.end) != (self.day, following):
            covered = self.end - self.start
            left_out = _records_to_read(self.day, self.start, now) + _records_to_read(
                self.end, following, now
            )
            if left_out + timedelta(hours=DAY_READ_HOURS) > covered:
                return [_Piece(FailureGroupBucket, self.start, self.end)]
        return [
            _Piece(FailureGroupBucket, self.day, self.start, -1),
            _Piece(FailureGroupDay, self.day, following),
            _Piece(FailureGroupBucket, self.end, following, -1),
        ]


@dataclass(frozen=True)
class _Piece:
    """One read of a window: a range of the hourly buckets, of the daily rollups or (at an
    edge) of the records, summed per group and added (sign 1) or taken away (-1)."""

    model: type[FailureGroupBucket | FailureGroupDay | FailureRecord]
    start: datetime
    end: datetime
    sign: int = 1

    def sql(self, uses: list[tuple[int, int]]) -> tuple[str, list[Any]]:
        """``SELECT part, group_id, total`` for each (part, sign) of ``uses``: the windows
        that read this same range (the window before the page's shares its edges), which
        read it once. The range is summed per group on its own, by time alone, and joined
        to the matching groups once, after every piece (see _with_window_sums): summed
        first, a day of hourly buckets is a few thousand rows to join instead of fifteen
        thousand, and each piece is read by its time index whatever PostgreSQL guesses of
        the matching groups (once it seeked every group in the records' group index, 5 ms
        an edge at a million records, instead of reading the edge's minutes, 2 ms)."""
        quote = connection.ops.quote_name
        time_column = quote(self._column(_TIME_FIELDS[self.model]))
        group_column = quote(self._column("group"))
        counted = "1" if self.model is FailureRecord else quote(self._column("count"))
        summed = (
            f"(SELECT {group_column} AS group_id, SUM({counted}) AS total "
            f"FROM {quote(self.model._meta.db_table)} "
            f"WHERE {time_column} >= %s AND {time_column} < %s "
            f"GROUP BY {group_column}) piece"
        )
        if len(uses) == 1:
            (part, sign), *_ = uses
            sql = f"SELECT {int(part)} AS part, group_id, total * {int(sign)} AS total "
            sql += f"FROM {summed}"
        else:
            rows = " UNION ALL ".join(
                f"SELECT {int(part)} AS part, {int(sign)} AS sign" for part, sign in uses
            )
            sql = (
                "SELECT uses.part, piece.group_id, piece.total * uses.sign AS total "
                f"FROM {summed} CROSS JOIN ({rows}) uses"
            )
        adapt = connection.ops.adapt_datetimefield_value
        return sql, [adapt(self.start), adapt(self.end)]

    def _column(self, name: str) -> str:
        return _column(self.model, name)


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return field.column


_TIME_FIELDS: dict[type[Any], str] = {
    FailureGroupBucket: "hour",
    FailureGroupDay: "day",
    FailureRecord: "occurred_at",
}


# The CTEs of a window statement: the ids of the groups the filters match, and the
# (part, group_id, total) rows of every window's pieces.
_MATCHING = "triage_matching_groups"
_SUMS = "triage_window_sums"


def _window_pieces(
    windows: list[tuple[datetime, datetime]], now: datetime
) -> tuple[str, list[Any]] | None:
    """``SELECT part, group_id, total`` of every group's records in each window (part 0,
    1, ... in the order given; a group's totals in a part add up to its records there), or
    None when no window has anything to read. Each range of the windows' pieces is read
    once and summed per group (see _Piece.sql), so the page's query count stays the same
    however a window is cut."""
    uses: dict[_Piece, list[tuple[int, int]]] = {}
    for part, (start, end) in enumerate(windows):
        for piece in _WindowParts.of(start, end, now=now).pieces():
            uses.setdefault(replace(piece, sign=1), []).append((part, piece.sign))
    if not uses:
        return None
    pieces = [piece.sql(piece_uses) for piece, piece_uses in uses.items()]
    return (
        " UNION ALL ".join(sql for sql, _ in pieces),
        [param for _, params in pieces for param in params],
    )


def _window_groups(
    windows: list[tuple[datetime, datetime]], filters: dict[str, str], user: Any
) -> QuerySet[FailureGroup]:
    """The groups the filters show ``user`` that may have records in the windows (the
    collections ``user`` may see are one more condition: the team filter joins, it adds no
    statement)."""
    return FailureGroup.objects.filter(
        _triage_filter(filters, user=user)
        & _seen_between(min(start for start, _ in windows), max(end for _, end in windows))
    ).order_by()


def _with_window_sums(
    windows: list[tuple[datetime, datetime]], filters: dict[str, str], now: datetime, user: Any
) -> tuple[str, list[Any]] | None:
    """The ``WITH`` clause of a statement that reads the matching groups' records in each
    window (see _window_pieces), or None when no window has anything to read. The sums are
    joined once to the groups the filters match, which are found once, in the first CTE
    (joining the pieces to the groups themselves made PostgreSQL read them once per piece
    and test the filters once per bucket row)."""
    union = _window_pieces(windows, now)
    if union is None:
        return None
    union_sql, union_params = union
    groups_sql, groups_params = (
        _window_groups(windows, filters, user).values("pk").query.sql_with_params()
    )
    return (
        f"WITH {_MATCHING}(id) AS MATERIALIZED ({groups_sql}), "
        f"{_SUMS}(part, group_id, total) AS (SELECT piece_sums.part, piece_sums.group_id, "
        f"piece_sums.total FROM ({union_sql}) piece_sums "
        f"INNER JOIN {_MATCHING} ON {_MATCHING}.id = piece_sums.group_id)",
        [*groups_params, *union_params],
    )


def _seen_between(start: datetime, end: datetime, *, via: str = "") -> Q:
    """Groups that may have records between start and end: their first record came before
    the end and their last one at or after the start. Every group with a record in the
    window is among them, so a read that keeps only those with one still sees all of them;
    for the last 60 minutes it skips most groups of a busy month."""
    return Q(**{f"{via}first_seen__lt": end, f"{via}last_seen__gte": start})


def _window_sums(
    windows: list[tuple[datetime, datetime]], filters: dict[str, str], now: datetime, user: Any
) -> list[dict[int, int]]:
    """Records per group in each window, all in one statement (see _with_window_sums)."""
    statement = _with_window_sums(windows, filters, now, user)
    if statement is None:
        return [{} for _ in windows]
    with_sums, params = statement
    counts: list[dict[int, int]] = [{} for _ in windows]
    # The page's database: the replica when the page reads one (core.replica).
    with connections[router.db_for_read(FailureGroup)].cursor() as cursor:
        cursor.execute(
            f"{with_sums} SELECT part, group_id, SUM(total) FROM {_SUMS} GROUP BY part, group_id",
            params,
        )
        for part, group_id, total in cursor.fetchall():
            if total > 0:
                counts[part][group_id] = int(total)
    return counts


# The columns of a GroupSummary, as the group table's values_list names them.
_SUMMARY_COLUMNS = (*GroupSummary._fields[:-3], "count", "retryable_count", "assignee__username")


def _groups_in_window(
    *, start: datetime, end: datetime, filters: dict[str, str], now: datetime, user: Any
) -> list[GroupRow]:
    """The groups the triage page shows, with their records in the window and in the
    window of the same length just before it, most records in the window first and newest
    first among equals (sorted by PostgreSQL, not in Python): one statement, which reads
    every group's row only when it had records in the window (the counts and the group rows
    used to be two reads, each testing the filters on every matching group)."""
    windows = [(start, end), (start - (end - start), start)]
    if _leaves_out_few(filters):
        # Every group's pieces summed first, then joined to the group rows the filters
        # keep: the group table is read once (at 1M records the 24h page's statement took
        # about 3.5 ms less than finding the matching groups apart first).
        union = _window_pieces(windows, now)
        if union is None:
            return []
        head = ""
        head_params: list[Any] = []
        sums, sums_params = f"({union[0]}) piece_sums", union[1]
        groups = _window_groups(windows, filters, user).values_list(*_SUMMARY_COLUMNS)
    else:
        # A filter that leaves out most groups: their pieces are dropped before summing
        # (summing every group's week first took 8 ms more for one collection and lane).
        statement = _with_window_sums(windows, filters, now, user)
        if statement is None:
            return []
        head, head_params = statement
        sums, sums_params = _SUMS, []
        groups = FailureGroup.objects.order_by().values_list(*_SUMMARY_COLUMNS)
    # The groups' columns as Django writes them for this database (its joins and names);
    # the join to the sums keeps those with records in the window.
    groups_sql, groups_params = groups.query.sql_with_params()
    sql = (
        f"{head} SELECT shown.*, counted.current, counted.previous FROM ({groups_sql}) shown "
        f"INNER JOIN (SELECT group_id, "
        f"CAST(SUM(CASE WHEN part = 0 THEN total ELSE 0 END) AS BIGINT) AS current, "
        f"CAST(SUM(CASE WHEN part = 1 THEN total ELSE 0 END) AS BIGINT) AS previous "
        f"FROM {sums} GROUP BY group_id) counted ON counted.group_id = shown.pk "
        f"WHERE counted.current > 0 "
        f"ORDER BY counted.current DESC, shown.last_seen DESC, shown.pk DESC"
    )
    with connections[groups.db].cursor() as cursor:  # the page's database (core.replica)
        cursor.execute(sql, [*head_params, *groups_params, *sums_params])
        rows = cursor.fetchall()
    width = len(_SUMMARY_COLUMNS)
    # PostgreSQL's cursor gives aware timestamps, each row as it is; SQLite's need reading.
    summary = GroupSummary._make if rows and _aware(rows[0][_FIRST_SEEN]) else _summary
    return [
        GroupRow(summary(values[:width]), values[width], max(0, values[width + 1]))
        for values in rows
    ]


def window_counts(
    *,
    start: datetime,
    end: datetime,
    filters: dict[str, str],
    now: datetime | None = None,
    user: Any = None,
) -> dict[int, int]:
    """Records in the window per group, for the groups matching the filters that have any
    (of the collections ``user`` may see).

    This is the one definition of "the groups the triage page shows", used by the page
    and by bulk actions. It reads the counters, and the records only at the window's edges
    (see _WindowParts): exact to the record.
    """
    return _window_sums([(start, end)], filters, now or timezone.now(), user)[0]


def triage_groups_in_window(
    *,
    start: datetime,
    end: datetime,
    filters: dict[str, str],
    now: datetime | None = None,
    user: Any = None,
) -> QuerySet[FailureGroup]:
    """The groups the triage page shows ``user``, as a queryset to act on."""
    return FailureGroup.objects.filter(
        pk__in=list(window_counts(start=start, end=end, filters=filters, now=now, user=user))
    )


# However long the window, a reason row's sparkline has at most this many bars: its cost
# per row stays the same for a week and for a year.
SPARK_MAX_BINS = 31


@dataclass(frozen=True)
class _Spark:
    """The sparkline's bins: hours for windows up to two days; beyond, whole UTC days
    from the daily rollups (so the first bar covers all of the window's first day), one
    day per bar up to SPARK_MAX_BINS days, several days per bar beyond."""

    start: datetime
    hours: int
    bins: int
    daily: bool

    @classmethod
    def of(cls, start: datetime, end: datetime) -> _Spark:
        hours = max(24, int((end - start).total_seconds() // 3600) + 1)
        if hours <= 49:
            # Never more bins than hours, or the newest hour would not reach the last bin.
            first = hour_floor(end) - timedelta(hours=hours - 1)
            return cls(first, hours, min(hours, 28), daily=False)
        first = day_floor(hour_floor(start))
        days = (day_floor(end) - first).days + 1
        return cls(first, days * 24, min(days, SPARK_MAX_BINS), daily=True)

    def read(self, filters: dict[str, str], user: Any) -> SideRead:
        """The records of the groups the page's filters show ``user``, summed in SQL per
        (stage, reason, hour or day), started beside the page (core.side_reads); bars()
        bins them. Read by reason when the filters leave out few groups (see _by_reason),
        else from the groups' own buckets."""
        model = FailureGroupDay if self.daily else FailureGroupBucket
        database = connections[router.db_for_read(model)]  # the page's (core.replica)
        # Nothing after the last bin: a window that ended in the past does not pile
        # everything since into its last bar.
        after = self.start + timedelta(hours=self.hours)
        adapt = database.ops.adapt_datetimefield_value
        on_page = _triage_filter(filters, user=user)
        if self.daily or not _by_reason(filters):
            shown_sql, shown_params = _group_line_sums(
                database, model, FailureGroup.objects.filter(on_page)
            )
            sql, params = shown_sql, [*shown_params, adapt(self.start), adapt(after)]
        else:
            # Every group's records per reason and hour, less those of the groups the
            # filters leave out (of the same stage and reason, when the page is narrowed to
            # one): muted and resolved groups, and those only Quality Lab reports. A day's
            # line at ten million records reads about 1,300 reason buckets and the left-out
            # groups' buckets, instead of 39,282 buckets of the groups shown.
            narrowed = {name: filters[name] for name in ("stage", "reason") if filters.get(name)}
            reasons = FailureReasonBucket.objects.filter(
                hour__gte=self.start, hour__lt=after, **narrowed
            ).values_list("stage", "reason", "hour", "count")
            reasons_sql, reasons_params = reasons.query.sql_with_params()
            sql, params = reasons_sql, list(reasons_params)
            if on_page:  # else every group is shown (any status, any source, every team)
                left_out = FailureGroup.objects.filter(**narrowed).exclude(on_page)
                left_sql, left_params = _group_line_sums(database, model, left_out, sign=-1)
                # The union's columns are named by its first part's (stage, reason, hour,
                # count).
                quote = database.ops.quote_name
                hour = quote(_column(FailureReasonBucket, "hour"))
                count = quote(_column(FailureReasonBucket, "count"))
                sql = (
                    f"SELECT stage, reason, {hour}, SUM({count}) FROM ({sql} UNION ALL "
                    f"{left_sql}) lines GROUP BY stage, reason, {hour}"
                )
                params = [*params, *left_params, adapt(self.start), adapt(after)]
        return read_beside(sql, params, using=database.alias)

    def bars(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[str, str, int, int]]:
        """(stage, reason, bin, records) of the rows of read()."""
        # A day's line has about 25 distinct hours among a thousand rows or more: each
        # moment's bar is worked out once.
        bar_of: dict[Any, int] = {}
        for stage, reason, moment, total in rows:
            if not total:
                continue
            bar = bar_of.get(moment)
            if bar is None:
                hours = int((_moment(moment) - self.start).total_seconds() // 3600)
                bar = bar_of[moment] = hours * self.bins // self.hours
            yield stage, reason, bar, int(total)  # PostgreSQL sums bigints as numeric


def _by_reason(filters: dict[str, str]) -> bool:
    """Whether a sparkline reads by reason (the reason buckets, less the groups the filters
    leave out): the default view's filters and those that narrow it to one reason leave out
    few groups. Any other filter leaves out most groups, which the groups' own buckets read
    for less."""
    return _leaves_out_few(
        {name: value for name, value in filters.items() if name not in ("stage", "reason")}
    )


def _leaves_out_few(filters: dict[str, str]) -> bool:
    """The default view's filters: a status of active or any, a source of production or
    any. Any other filter leaves out most groups."""
    return (
        set(filters) <= {"status", "source"}
        and filters.get("status", "active") in ("active", "all")
        and filters.get("source") in (None, PRODUCTION_SOURCES)  # none: any source
    )


def _group_line_sums(
    database: Any, model: type[Model], groups: QuerySet[FailureGroup], *, sign: int = 1
) -> tuple[str, list[Any]]:
    """``SELECT stage, reason, moment, total`` of these groups' buckets (hourly or daily)
    per reason and moment, times ``sign``, between two moments passed last.

    The groups are found first, in a subquery PostgreSQL must not fold into the join
    (OFFSET 0): folded, it joined every hourly bucket to its group and then tested the
    filters once per bucket (39,282 at ten million records for a day's line), 13.5 ms
    against 11.6 ms for the groups found once (5.9 against 5.4 ms at 1M). That was measured
    while the production test still probed the source facets; it is now two columns of the
    group (having_production_records), and the fence has not been measured again since."""
    quote = database.ops.quote_name
    time_column = quote(_column(model, _TIME_FIELDS[model]))
    group_column = quote(_column(model, "group"))
    count_column = quote(_column(model, "count"))
    groups_sql, groups_params = (
        groups.order_by().values_list("id", "stage", "reason").query.sql_with_params()
    )
    fence = " OFFSET 0" if database.vendor == "postgresql" else ""
    sql = (
        f"SELECT matching.stage, matching.reason, piece.{time_column}, "
        f"SUM(piece.{count_column}) * {int(sign)} FROM {quote(model._meta.db_table)} piece "
        f"INNER JOIN ({groups_sql}{fence}) matching "
        f"ON matching.id = piece.{group_column} "
        f"WHERE piece.{time_column} >= %s AND piece.{time_column} < %s "
        f"GROUP BY matching.stage, matching.reason, piece.{time_column}"
    )
    return sql, list(groups_params)


_FIRST_SEEN = GroupSummary._fields.index("first_seen")


def _moment(value: datetime | str) -> datetime:
    """A timestamp column as the cursor returned it: PostgreSQL gives an aware datetime,
    SQLite (the development database) naive UTC, as a datetime or as text."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _aware(value: Any) -> bool:
    return isinstance(value, datetime) and value.tzinfo is not None


def _summary(values: tuple[Any, ...]) -> GroupSummary:
    summary = GroupSummary._make(values)
    if _aware(values[_FIRST_SEEN]):
        return summary
    return summary._replace(
        first_seen=_moment(summary.first_seen),
        last_seen=_moment(summary.last_seen),
        muted_until=None if summary.muted_until is None else _moment(summary.muted_until),
    )


# The triage page's orders. Stage order reads the lifecycle; the others one list, largest,
# fastest rising or newest first.
SORTS = ("count", "trend", "last_seen", "first_seen", "stage")
SORT_TITLES = {
    "count": gettext_lazy("by count in the window"),
    "trend": gettext_lazy("by trend against the previous window"),
    "last_seen": gettext_lazy("by last seen"),
    "first_seen": gettext_lazy("by first seen"),
}
# A row is spiking with at least this many times the previous window's records, and at
# least SPIKE_MIN_RECORDS of them (two records after one is not an incident).
SPIKE_FACTOR = 2
SPIKE_MIN_RECORDS = 10


def _in_order(rows: Iterable[_Row], sort: str, *, by_count: bool = True) -> list[_Row]:
    """Rows (reason rows or group rows) in the page's sort: largest count first, or by the
    sort's key and, among equals, largest count first. ``by_count=False`` says the rows
    already come largest first (thousands of group rows need not be sorted by it again);
    the sorts are stable, so equal rows keep the order they came in."""
    ordered = sorted(rows, key=attrgetter("count"), reverse=True) if by_count else list(rows)
    if sort == "count":
        return ordered
    return sorted(ordered, key=_SORT_KEYS.get(sort, _SORT_KEYS["stage"]))


# A reason row and a group row both have these.
_Row = TypeVar("_Row", "ReasonRow", "GroupRow")

_SORT_KEYS: dict[str, Callable[[Any], Any]] = {
    "trend": lambda row: -row.trend,
    "last_seen": lambda row: -row.last_seen.timestamp(),
    "first_seen": lambda row: -row.first_seen.timestamp(),
    "stage": lambda row: taxonomy.stage_index(row.stage),
}


def failed_between(
    *, filters: dict[str, str], start: datetime, end: datetime, user: Any = None
) -> bool:
    """Whether any group these filters show had a record between start and end (its newest
    record's time; one indexed query, for the first screen's window)."""
    return (
        FailureGroup.objects.filter(
            _triage_filter(filters, user=user), last_seen__gte=start, last_seen__lte=end
        )
        .order_by()
        .exists()
    )


def triage_overview(
    *,
    start: datetime,
    end: datetime,
    filters: dict[str, str],
    sort: str = "stage",
    now: datetime | None = None,
    user: Any = None,
) -> TriageOverview:
    """Everything the triage page shows ``user``, in a fixed number of queries.

    Counts come from the hourly buckets and daily rollups kept by ingest, and from the
    records only in the pieces of hours at the window's edges, so the page costs about the
    same at a thousand records and at millions, and a "1h" window is the last 60 minutes
    to the record. Groups are read as plain rows, with their counts, in one statement;
    every read applies the filters through its join to the group, never as a list of
    thousands of ids. The collections ``user`` may see are one more condition of each of
    those reads, so the page's query count is the same with teams as without.
    """
    # The sparkline's and the facets' statements run beside the window statement, on a
    # second connection (core.side_reads): each needs only the filters.
    spark = _Spark.of(start, end)
    spark_sums = spark.read(filters, user)
    mixes = _ReasonMixes.read(filters=filters, start=start, end=end, user=user)
    # Largest first, newest first among equals (sorted in SQL).
    groups = _groups_in_window(
        start=start, end=end, filters=filters, now=now or timezone.now(), user=user
    )
    by_key: dict[tuple[str, str], ReasonRow] = {}
    line_of_group: dict[int, ReasonRow] = {}
    for row in groups:
        group = row.group
        key = (group.stage, group.reason)
        line = by_key.get(key)
        if line is None:
            line = by_key[key] = ReasonRow(
                group.stage,
                group.reason,
                taxonomy.reason_info(group.reason),
                group.first_seen,
                group.last_seen,
                spark=[0] * spark.bins,
            )
        line.add(row)
        if group.first_seen >= start:
            line.new_groups += 1
        line_of_group[group.pk] = line
    # What is not on the page is skipped: with the 1h window the line spans the day, and
    # so also counts the reason's matching groups that were quiet in the last hour.
    last_bin = spark.bins - 1
    for stage, reason, index, count in spark.bars(spark_sums.rows()):
        line = by_key.get((stage, reason))
        if line is not None:
            line.spark[min(last_bin, max(0, index))] += count
    mixes.add_to(by_key, line_of_group)

    for line in by_key.values():
        line.new = line.first_seen >= start
        line.spiking = (
            line.count >= SPIKE_MIN_RECORDS and line.count >= SPIKE_FACTOR * line.previous_count
        ) and not line.new
    lines = _in_order(by_key.values(), sort)
    if sort != "stage":
        flat = StageSection("sorted", str(SORT_TITLES.get(sort, sort)), True, lines, flat=True)
        return _overview([flat] if lines else [], groups, spark, sort=sort, start=start, user=user)
    sections: dict[str, StageSection] = {}
    for line in lines:
        if line.stage not in sections:
            info = taxonomy.STAGE_INFO.get(line.stage)
            sections[line.stage] = StageSection(
                line.stage, info.title if info else line.stage, info is not None, []
            )
        sections[line.stage].rows.append(line)
    return _overview(list(sections.values()), groups, spark, sort=sort, start=start, user=user)


@dataclass
class _ReasonMixes:
    """Each reason row's execution states and sources of all time, over its groups.

    Summed per reason in SQL, beside the page (core.side_reads), over the groups the
    filters show that were seen across the window (first record before its end, last one
    after its start). Those are the page's groups and sometimes a few more: a group quiet
    in the window while records came before and after it (a window in the past), or whose
    window's records were pruned. So the same statement counts the groups it summed per
    reason, and a row whose count is not its own number of groups takes its groups' facets
    one by one, in one more read made only then. At a million records the default view's
    page then receives about 270 rows instead of 9,000 (a group's states and sources) and
    tallies none of them in Python, while its window statement runs."""

    filters: dict[str, str]
    start: datetime
    end: datetime
    user: Any
    sums: SideRead

    DIMENSIONS = ("execution_state", "source")

    @classmethod
    def read(
        cls, *, filters: dict[str, str], start: datetime, end: datetime, user: Any
    ) -> _ReasonMixes:
        facets = cls._facets(filters=filters, start=start, end=end, user=user)
        summed = (
            facets.values("group__stage", "group__reason", "dimension", "value")
            .annotate(total=Sum("count"))
            .values_list("group__stage", "group__reason", "dimension", "value", "total")
        )
        # One row per reason, its dimension empty: how many groups its sums are over.
        counted = (
            FailureGroup.objects.filter(_triage_filter(filters, user=user))
            .filter(_seen_between(start, end))
            .order_by()
            .values("stage", "reason")
            .annotate(dimension=Value(""), value=Value(""), total=Count("pk"))
            .values_list("stage", "reason", "dimension", "value", "total")
        )
        sql, params = summed.union(counted, all=True).query.sql_with_params()
        sums = read_beside(sql, params, using=router.db_for_read(FailureGroupFacet))
        return cls(filters, start, end, user, sums)

    @classmethod
    def _facets(
        cls, *, filters: dict[str, str], start: datetime, end: datetime, user: Any
    ) -> QuerySet[FailureGroupFacet]:
        return FailureGroupFacet.objects.filter(
            _triage_filter(filters, via="group__", user=user),
            _seen_between(start, end, via="group__"),
            dimension__in=cls.DIMENSIONS,
            count__gt=0,
        ).order_by()

    def add_to(
        self, lines: dict[tuple[str, str], ReasonRow], line_of_group: dict[int, ReasonRow]
    ) -> None:
        sums: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
        groups_summed: dict[tuple[str, str], int] = {}
        for stage, reason, dimension, value, total in self.sums.rows():
            if dimension:
                sums.setdefault((stage, reason), []).append((dimension, value, int(total)))
            else:
                groups_summed[(stage, reason)] = total
        apart = {key for key, line in lines.items() if groups_summed.get(key) != len(line.groups)}
        for key in lines.keys() - apart:
            for dimension, value, total in sums.get(key, ()):
                lines[key].mix(dimension)[value] = total
        if apart:
            facets = self._facets(
                filters=self.filters, start=self.start, end=self.end, user=self.user
            )
            for group_id, dimension, value, count in facets.values_list(
                "group_id", "dimension", "value", "count"
            ):
                shown = line_of_group.get(group_id)
                if shown is not None and (shown.stage, shown.reason) in apart:
                    mix = shown.mix(dimension)
                    mix[value] = mix.get(value, 0) + count
        for line in lines.values():  # most records first, however they were read
            line.state_mix = _most_first_counts(line.state_mix)
            line.source_mix = _most_first_counts(line.source_mix)


def _most_first_counts(counts: dict[str, int]) -> dict[str, int]:
    """Largest count first; equal counts by name."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _overview(
    sections: list[StageSection],
    groups: list[GroupRow],
    spark: _Spark,
    *,
    sort: str,
    start: datetime,
    user: Any,
) -> TriageOverview:
    return TriageOverview(
        groups_by_count=groups,
        sort=sort,
        window_start=start,
        sections=sections,
        group_ids=[row.group.pk for row in groups],
        total=sum(row.window_count for row in groups),
        open_groups=sum(1 for row in groups if row.group.status in ("open", "regressed")),
        regressed_groups=sum(1 for row in groups if row.group.status == "regressed"),
        uncertain_waiting=awaiting_reconciliation(user=user).count(),
        spark_bins=spark.bins,
        spark_hours=spark.hours,
        spark_daily=spark.daily,
        spark_start=spark.start,
    )


# --- the group page -------------------------------------------------------------------------


@dataclass
class RecordPage:
    records: list[FailureRecord]
    older_cursor: str | None
    newer_cursor: str | None


def group_records(*, group: FailureGroup, before: str | None, size: int = 25) -> RecordPage:
    """Newest first, by keyset (occurred_at, id): every page is as fast as the first."""
    records = FailureRecord.objects.filter(group=group).order_by("-occurred_at", "-id")
    if before:
        stamp, _, record_id = before.partition("_")
        moment = datetime.fromisoformat(stamp)
        # "Before (moment, id)" as a range plus an exclusion, not an OR: PostgreSQL then
        # walks the (group, occurred_at) index from the cursor and stops after one page,
        # instead of collecting every older record of the group and sorting them.
        records = records.filter(occurred_at__lte=moment).exclude(
            occurred_at=moment, id__gte=int(record_id)
        )
    page = list(records[: size + 1])
    older = None
    if len(page) > size:
        page = page[:size]
        last = page[-1]
        older = f"{last.occurred_at.isoformat()}_{last.pk}"
    return RecordPage(records=page, older_cursor=older, newer_cursor=before)


def group_timeline(*, group: FailureGroup, days: int = 14) -> tuple[list[int], datetime]:
    """Records per hour over the last `days` days, for the group page's timeline."""
    end = hour_floor(timezone.now())
    start = end - timedelta(hours=days * 24 - 1)
    values = [0] * (days * 24)
    for hour, count in group.buckets.filter(hour__gte=start).values_list("hour", "count"):
        values[int((hour - start).total_seconds() // 3600)] += count
    return values, start


@dataclass(frozen=True)
class ReleaseSeen:
    """One release's records in a group: how many, and when first and last seen."""

    release: str  # "" for records sent without a release
    records: int
    first_seen: datetime
    last_seen: datetime


# The group page lists at most this many releases, the most recently seen first.
GROUP_RELEASES_SHOWN = 20


def group_releases(*, group: FailureGroup, limit: int = GROUP_RELEASES_SHOWN) -> list[ReleaseSeen]:
    """The group's records per release, the most recently seen first, with "" for records
    without one; empty when no record of the group carries a release (the table would say
    nothing). Two queries at most whatever the group's size: whether the group has release
    facets (kept by ingest and retention), and only then their counts, each release's first
    and last record two endpoints of the index on (group, release, occurred_at).

    Each endpoint is looked up in the days' partitions of the group's span only (all its
    records lie between its first and last), which PostgreSQL leaves out when it plans:
    planned over every day of a month, the four lookups took about 16 ms of the largest
    group's page at a million records, for half a millisecond of reading. A group with no
    release facets is not planned for at all."""
    releases = FailureGroupFacet.objects.filter(group=group.pk, dimension="release")
    if not releases.exists():
        return []
    span = {"occurred_at__gte": group.first_seen, "occurred_at__lte": group.last_seen}

    def edge(release: Any, newest: bool) -> Subquery:
        records = FailureRecord.objects.filter(group=group.pk, release=release, **span)
        ordered = records.order_by("-occurred_at" if newest else "occurred_at")
        return Subquery(ordered.values("occurred_at")[:1])

    rows = list(
        releases.annotate(
            first=edge(OuterRef("value"), newest=False),
            last=edge(OuterRef("value"), newest=True),
            unreleased_first=edge("", newest=False),
            unreleased_last=edge("", newest=True),
        ).values_list("value", "count", "first", "last", "unreleased_first", "unreleased_last")
    )
    if not rows:
        return []
    seen = [ReleaseSeen(value, count, first, last) for value, count, first, last, _, _ in rows]
    unreleased = group.count - sum(row.records for row in seen)
    if unreleased > 0 and rows[0][4] is not None:
        seen.append(ReleaseSeen("", unreleased, rows[0][4], rows[0][5]))
    seen.sort(key=lambda row: (-row.last_seen.timestamp(), row.release))
    return seen[:limit]


def collection_releases(*, collection: str, limit: int = 50) -> list[Release]:
    """A collection's releases, the most recently deployed first (what a resolve may name)."""
    if not collection:
        return []
    return list(
        Release.objects.filter(collection=collection).order_by("-deployed_at", "-id")[:limit]
    )


def group_siblings(*, group: FailureGroup, user: Any = None) -> list[FailureGroup]:
    """The same stage and reason in other tools and collections (that ``user`` may see)."""
    return list(
        FailureGroup.objects.filter(seen_by(user), stage=group.stage, reason=group.reason)
        .exclude(pk=group.pk)
        .order_by("-last_seen")[:20]
    )


def _related_to_group(group: FailureGroup, keys: list[str]) -> Q:
    related = Q(tool=group.tool, collection=group.collection) if group.tool else Q(pk__in=[])
    if keys:
        related |= Q(idempotency_key__in=keys)
    return related


def group_related_receipts(
    *, group: FailureGroup, keys: list[str], user: Any = None
) -> list[Receipt]:
    """The group's tool's runs and the runs of its idempotency keys, which another
    collection's runtime may reuse: of the collections ``user`` may see."""
    related = _related_to_group(group, keys)
    return list(Receipt.objects.filter(related, seen_by(user)).order_by("-received_at")[:20])


def group_waiting_receipts(
    *, group: FailureGroup, keys: list[str], user: Any = None
) -> list[Receipt]:
    """The group's runs whose outcome nobody has looked up yet (the receipts page's queue),
    oldest first: where a reconcile_first group's status lookup is recorded."""
    related = _related_to_group(group, keys)
    waiting = awaiting_reconciliation(user=user).filter(related)
    return list(waiting.order_by("received_at")[:10])


@dataclass(frozen=True)
class Runbooks:
    """The runbooks that apply to one failure: its reason's and its tool's (either may be
    None). ``tool`` is the collection's own runbook of the tool when it has one, else the
    tool's runbook for every collection."""

    reason: Runbook | None
    tool: Runbook | None

    def __bool__(self) -> bool:
        return bool(self.reason or self.tool)


def runbooks_for(*, reason: str, tool: str, collection: str) -> Runbooks:
    """The runbook link and note of a reason and a tool, in one query.

    The one read the pages and alerts share: an alert about a group passes the group's
    reason, tool and collection and carries what this returns.
    """
    wanted = Q(subject=RunbookSubject.REASON, reason=reason) if reason else Q(pk__in=[])
    if tool:
        wanted |= Q(subject=RunbookSubject.TOOL, tool=tool, collection__in={collection, ""})
    found = [runbook for runbook in Runbook.objects.filter(wanted) if not runbook.is_empty]
    reason_runbook = next((r for r in found if r.subject == RunbookSubject.REASON), None)
    tools = sorted(
        (r for r in found if r.subject == RunbookSubject.TOOL),
        key=lambda r: r.collection == "",  # the collection's own first
    )
    return Runbooks(reason=reason_runbook, tool=tools[0] if tools else None)


def runbook_history(
    *, reason: str, tool: str, collection: str, limit: int = 20
) -> list[RunbookRevision]:
    """The latest edits of every runbook that can apply to a group, newest first."""
    wanted = Q(runbook__subject=RunbookSubject.REASON, runbook__reason=reason)
    if tool:
        wanted |= Q(
            runbook__subject=RunbookSubject.TOOL,
            runbook__tool=tool,
            runbook__collection__in={collection, ""},
        )
    return list(RunbookRevision.objects.filter(wanted).select_related("runbook", "actor")[:limit])


# A runtime serves one collection: more policies than this is not a policy table.
TOOL_POLICY_DOCUMENT_LIMIT = 2000


def tool_policy_document(*, collection: str) -> tuple[dict[str, Any], str]:
    """A collection's tool policies as GET /api/v1/tool-policies answers them, in seed
    004's field names (the collection's own policy of a tool wins over the one for every
    collection), and a strong ETag of that answer."""
    rows = list(
        ToolPolicy.objects.filter(collection__in=[collection, ""]).order_by("tool", "-collection")[
            : 2 * TOOL_POLICY_DOCUMENT_LIMIT
        ]
    )
    tools: dict[str, dict[str, Any]] = {}
    for policy in rows:  # per tool, the collection's own row comes first
        if policy.tool in tools:
            continue
        tools[policy.tool] = {
            "side_effect": policy.side_effect,
            "idempotency": {
                "required": policy.idempotency_required,
                "lookup": policy.idempotency_lookup,
            },
            "timeout_policy": {
                "on_before_send": policy.timeout_before_send_lane,
                "on_after_send": policy.timeout_after_send_lane,
            },
            "authority": {"approval_required": policy.approval_required},
        }
    truncated = (
        len(tools) > TOOL_POLICY_DOCUMENT_LIMIT or len(rows) == 2 * TOOL_POLICY_DOCUMENT_LIMIT
    )
    kept = dict(list(tools.items())[:TOOL_POLICY_DOCUMENT_LIMIT])
    body = {"collection": collection, "tools": kept, "truncated": truncated}
    return body, strong_etag(body)
