from rag_common.runner import serve
from rag_reranker.settings import RerankerSettings

serve("rag_reranker.app:create_app", RerankerSettings())
