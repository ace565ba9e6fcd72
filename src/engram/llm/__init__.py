"""Optional LLM provider: an OpenAI-compatible chat client and the features built on it.

Nothing in Engram's write path needs a model; these are opt-in helpers (install the
``llm`` extra: ``pip install 'engram-memory[llm]'``)::

    from engram.llm import OpenAICompatibleClient, extract_facts, llm_condenser

    with OpenAICompatibleClient("http://127.0.0.1:11434/v1", model="llama3.1") as llm:
        mem.summarize("chat", 4000, condenser=llm_condenser(llm))
        extract_facts(mem, llm, mem.recall("chat"), user_id="u1", session_id="chat")

Importing this package does not import httpx; creating a client does. See
``docs/llm.md`` for configuration, the retry policy, the JSON contract and the
``llm_failures`` log.
"""

from engram.llm._fake import ScriptedChatClient
from engram.llm.client import (
    API_KEY_ENV,
    BASE_URL_ENV,
    MODEL_ENV,
    ChatClient,
    ChatMessage,
    ChatResponse,
    JsonMode,
    OpenAICompatibleClient,
    complete_json,
    parse_json_reply,
)
from engram.llm.failures import (
    LLMFailure,
    delete_llm_failures,
    list_llm_failures,
    record_llm_failure,
)
from engram.llm.tasks import (
    CONDENSE_SCHEMA,
    EXTRACT_SCHEMA,
    MERGE_SCHEMA,
    NOTE_SOURCE,
    ExtractionResult,
    extract_facts,
    llm_condenser,
    llm_merge,
)

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "CONDENSE_SCHEMA",
    "EXTRACT_SCHEMA",
    "MERGE_SCHEMA",
    "MODEL_ENV",
    "NOTE_SOURCE",
    "ChatClient",
    "ChatMessage",
    "ChatResponse",
    "ExtractionResult",
    "JsonMode",
    "LLMFailure",
    "OpenAICompatibleClient",
    "ScriptedChatClient",
    "complete_json",
    "delete_llm_failures",
    "extract_facts",
    "list_llm_failures",
    "llm_condenser",
    "llm_merge",
    "parse_json_reply",
    "record_llm_failure",
]
