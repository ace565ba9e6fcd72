"""Agent memory on top of the core engine: notes, scratchpad, rolling summaries, facts.

Each module holds free functions taking an :class:`~mindfile.Mindfile` (typed as the
protocol of what they use, :mod:`mindfile._deps`: they reach their tables through the
storage seam, ``engine.stores``); the engine exposes them as methods
(``mem.store_note(...)``, ``mem.set_fact(...)``, ...), and :mod:`mindfile.tools` exposes
them to LLMs. See ``docs/agent-memory.md`` and docs/architecture.md ("Storage seam").
"""

from mindfile.memory.facts import (
    MAX_FACT_NAME_CHARS,
    MAX_FACT_VALUE_CHARS,
    delete_fact,
    fact_history,
    facts_session,
    get_fact,
    list_facts,
    set_fact,
)
from mindfile.memory.notes import (
    MAX_NOTE_CHARS,
    NOTE_SCHEMA_VERSION,
    delete_note,
    get_note,
    list_notes,
    notes_session,
    search_notes,
    store_note,
    update_note,
)
from mindfile.memory.scratchpad import (
    MAX_SCRATCHPAD_ITEM_CHARS,
    MAX_SCRATCHPAD_ITEMS,
    clear_scratchpad,
    read_scratchpad,
    write_scratchpad,
)
from mindfile.memory.summarizer import (
    SECTION_HEADING,
    SUMMARY_PREFIX,
    Condenser,
    SummaryConfig,
    extractive_condenser,
    summarize,
)
from mindfile.memory.summary import read_summary_state, write_summary_state
from mindfile.memory.types import (
    Fact,
    FactSource,
    FactVersion,
    MemoryHit,
    Note,
    ScratchpadState,
    SummaryContext,
    SummaryOutcome,
    SummaryState,
    SummaryWriteOutcome,
)

__all__ = [
    "MAX_FACT_NAME_CHARS",
    "MAX_FACT_VALUE_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_SCRATCHPAD_ITEMS",
    "MAX_SCRATCHPAD_ITEM_CHARS",
    "NOTE_SCHEMA_VERSION",
    "SECTION_HEADING",
    "SUMMARY_PREFIX",
    "Condenser",
    "Fact",
    "FactSource",
    "FactVersion",
    "MemoryHit",
    "Note",
    "ScratchpadState",
    "SummaryConfig",
    "SummaryContext",
    "SummaryOutcome",
    "SummaryState",
    "SummaryWriteOutcome",
    "clear_scratchpad",
    "delete_fact",
    "delete_note",
    "extractive_condenser",
    "fact_history",
    "facts_session",
    "get_fact",
    "get_note",
    "list_facts",
    "list_notes",
    "notes_session",
    "read_scratchpad",
    "read_summary_state",
    "search_notes",
    "set_fact",
    "store_note",
    "summarize",
    "update_note",
    "write_scratchpad",
    "write_summary_state",
]
