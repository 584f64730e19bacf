from rag_common.runner import serve
from rag_refiner.settings import RefinerSettings

serve("rag_refiner.app:create_app", RefinerSettings())
