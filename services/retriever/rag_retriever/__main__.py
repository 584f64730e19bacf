from rag_common.runner import serve
from rag_retriever.settings import RetrieverSettings

serve("rag_retriever.app:create_app", RetrieverSettings())
