"""Optional LLM provider: an OpenAI-compatible chat client and the features built on it.

Nothing in Mindfile's write path needs a model; these are opt-in helpers (install the
``llm`` extra: ``pip install 'mindfile[llm]'``)::

    from mindfile.llm import OpenAICompatibleClient, extract_facts, llm_condenser, llm_reranker

    with OpenAICompatibleClient("http://127.0.0.1:11434/v1", model="llama3.1") as llm:
        mem.summarize("chat", 4000, condenser=llm_condenser(llm))
        mem.reranker = llm_reranker(llm)  # searches: the first 50 hits in its order
        extract_facts(mem, llm, mem.recall("chat"), user_id="u1", session_id="chat")

Importing this package does not import httpx; creating a client does. See
``docs/llm.md`` for configuration, the retry policy, the JSON contract and the
``llm_failures`` log.
"""

from mindfile.llm._fake import ScriptedChatClient
from mindfile.llm.client import (
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
from mindfile.llm.failures import (
    LLMFailure,
    delete_llm_failures,
    list_llm_failures,
    record_llm_failure,
)
from mindfile.llm.rerank import RERANK_SCHEMA, LLMReranker, llm_reranker
from mindfile.llm.tasks import (
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
    "RERANK_SCHEMA",
    "ChatClient",
    "ChatMessage",
    "ChatResponse",
    "ExtractionResult",
    "JsonMode",
    "LLMFailure",
    "LLMReranker",
    "OpenAICompatibleClient",
    "ScriptedChatClient",
    "complete_json",
    "delete_llm_failures",
    "extract_facts",
    "list_llm_failures",
    "llm_condenser",
    "llm_merge",
    "llm_reranker",
    "parse_json_reply",
    "record_llm_failure",
]
